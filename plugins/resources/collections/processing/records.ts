/**
 * Source records: what a collection's extractors read. At tier 0 a record is a bucket object (its key,
 * metadata and blobs by property); at later tiers it is a document of the source collection (its fields
 * and metadata). Both become one flat field map the `input_mapping` picks the extractor's inputs from.
 */
import type { BlobInfo } from '../../../../kernel/blobs/blob-store.js';
import type { ExtractorPlugin } from '../../../../kernel/plugins.js';
import type { SkipReason, SourceObject } from '../../../../kernel/processing.js';
import type { DocumentRow } from '../document-store.js';

export interface SourceRecord {
  /** The object id (tier 0) or the source document id. */
  id: string;
  rootObjectId: string;
  sourceDocumentId: string | null;
  ownerPrincipal: string | null;
  grants: string[];
  /** Fields extractors read, by name. */
  fields: Record<string, unknown>;
  /** The record's metadata: an `input_mapping` path `metadata.<name>` reads it. */
  metadata: Record<string, unknown>;
  /** Fields documents inherit from their source (later tiers keep the parent's fields). */
  inherited: Record<string, unknown>;
  /** What `source.filters` and `prefix_key` are evaluated against. */
  filterView: Record<string, unknown>;
  /** Content type per field holding a blob. */
  contentTypes: Record<string, string>;
  key: string | null;
  /** The record's inline blobs (`SourceObjectBlob.inline_text`) by storage key: extractors read them from memory. */
  inlineBlobs: Map<string, InlineBlob>;
}

export interface InlineBlob {
  info: BlobInfo;
  bytes: Buffer;
}

export function recordFromObject(object: SourceObject): SourceRecord {
  const fields: Record<string, unknown> = { ...object.metadata };
  const contentTypes: Record<string, string> = {};
  const inlineBlobs = new Map<string, InlineBlob>();
  for (const blob of object.blobs) {
    fields[blob.property] = { storage_key: blob.storage_key, content_type: blob.content_type, size_bytes: blob.size_bytes, filename: blob.filename };
    contentTypes[blob.property] = blob.content_type;
    if (blob.inline_text !== undefined) {
      const bytes = Buffer.from(blob.inline_text, 'utf8');
      const info: BlobInfo = { key: blob.storage_key, size: bytes.length, contentType: blob.content_type, md5: blob.md5 ?? '', sha256: blob.sha256 ?? '', createdAt: object.created_at };
      inlineBlobs.set(blob.storage_key, { info, bytes });
    }
  }
  fields.object_id = object.object_id;
  fields.key = object.key;
  return {
    id: object.object_id,
    rootObjectId: object.object_id,
    sourceDocumentId: null,
    // Documents belong to whoever owns the object they come from (user-scoped keys see only their own).
    ownerPrincipal: object.owner_principal,
    grants: [],
    fields,
    metadata: object.metadata,
    inherited: {},
    filterView: { object_id: object.object_id, key: object.key, metadata: object.metadata, ...object.metadata, created_at: object.created_at.toISOString() },
    contentTypes,
    key: object.key,
    inlineBlobs,
  };
}

export function recordFromDocument(doc: DocumentRow): SourceRecord {
  const contentTypes: Record<string, string> = {};
  for (const [name, value] of Object.entries(doc.fields)) {
    if (value && typeof value === 'object' && 'storage_key' in value && 'content_type' in value) {
      contentTypes[name] = String((value as { content_type: unknown }).content_type);
    }
  }
  return {
    id: doc.document_id,
    rootObjectId: doc.root_object_id ?? doc.document_id,
    sourceDocumentId: doc.document_id,
    ownerPrincipal: doc.owner_principal,
    grants: doc.grants,
    fields: { ...doc.metadata, ...doc.fields, document_id: doc.document_id },
    metadata: doc.metadata,
    inherited: doc.fields,
    filterView: {
      ...doc.fields,
      fields: doc.fields,
      metadata: doc.metadata,
      document_id: doc.document_id,
      root_object_id: doc.root_object_id,
      processing_tier: doc.processing_tier,
    },
    contentTypes,
    key: null,
    inlineBlobs: new Map(),
  };
}

const TYPE_PREFIX: Record<string, string[]> = {
  text: ['text/', 'application/json'],
  image: ['image/'],
  video: ['video/'],
  audio: ['audio/', 'video/'],
  pdf: ['application/pdf'],
  json: ['application/json'],
  any: [''],
};

export interface MappedInput {
  fields: Record<string, unknown>;
  mimeType: string;
  /** Why the extractor cannot read this record (undefined: it can). */
  skip?: SkipReason;
}

// Whether a content type is one of an extractor's `accepts` patterns: `text/*`, `*/*`, or exact.
export function acceptsType(accepts: readonly string[], contentType: string): boolean {
  const type = contentType.split(';')[0]!.trim().toLowerCase();
  return accepts.some((pattern) => {
    const p = pattern.toLowerCase();
    if (p === '*/*' || p === '*') return true;
    if (p.endsWith('/*')) return type.startsWith(p.slice(0, -1));
    return type === p;
  });
}

/**
 * Picks each extractor input from the record: the `input_mapping` entry when given, else a field of
 * the same name, else (one blob per kind is the common case) the first blob whose type suits the input.
 * A record the extractor cannot read is to be skipped: a required input is a blob of a type the
 * extractor does not accept, or the record has blobs but none of a suitable type (`unsupported_type`),
 * or the record has no value for it at all (`no_input_field`).
 */
export function mapInputs(extractor: ExtractorPlugin, record: SourceRecord, inputMapping: Record<string, string> | undefined): MappedInput {
  const fields: Record<string, unknown> = { ...record.fields };
  let skip: SkipReason | undefined;
  let mimeType = '';
  for (const input of extractor.inputs) {
    const mapped = inputMapping?.[input.name];
    let source: string | undefined;
    if (mapped !== undefined) source = mapped;
    else if (record.fields[input.name] !== undefined) source = input.name;
    else {
      const prefixes = TYPE_PREFIX[input.type] ?? [''];
      source = Object.entries(record.contentTypes).find(([, type]) => prefixes.some((p) => type.startsWith(p)))?.[0];
    }
    const value = source === undefined ? undefined : readPath(record, source);
    const contentType = source === undefined ? undefined : record.contentTypes[source];
    if (value === undefined || value === null || value === '') {
      if (input.required) skip ??= mapped === undefined && Object.keys(record.contentTypes).length > 0 ? 'unsupported_type' : 'no_input_field';
      continue;
    }
    if (contentType !== undefined && !acceptsType(extractor.accepts, contentType)) {
      if (input.required) skip ??= 'unsupported_type';
      continue;
    }
    fields[input.name] = value;
    if (!mimeType) mimeType = contentType ?? (typeof value === 'string' ? 'text/plain' : 'application/json');
  }
  return { fields, mimeType: mimeType || 'application/octet-stream', ...(skip ? { skip } : {}) };
}

function readPath(record: SourceRecord, path: string): unknown {
  const fields = record.fields;
  if (path in fields) return fields[path];
  const [head, ...rest] = path.split('.');
  const root: unknown = head === 'metadata' && !('metadata' in fields) ? record.metadata : fields[head!];
  return rest.reduce<unknown>((v, k) => (v && typeof v === 'object' ? (v as Record<string, unknown>)[k] : undefined), root);
}
