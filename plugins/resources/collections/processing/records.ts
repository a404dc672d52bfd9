/**
 * Source records: what a collection's extractors read. At tier 0 a record is a bucket object (its key,
 * metadata and blobs by property); at later tiers it is a document of the source collection (its fields
 * and metadata). Both become one flat field map the `input_mapping` picks the extractor's inputs from.
 */
import type { ExtractorPlugin } from '../../../../kernel/plugins.js';
import type { SourceObject } from '../../../../kernel/processing.js';
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
  /** Fields documents inherit from their source (later tiers keep the parent's fields). */
  inherited: Record<string, unknown>;
  /** What `source.filters` and `prefix_key` are evaluated against. */
  filterView: Record<string, unknown>;
  /** Content type per field holding a blob. */
  contentTypes: Record<string, string>;
  key: string | null;
}

export function recordFromObject(object: SourceObject): SourceRecord {
  const fields: Record<string, unknown> = { ...object.metadata };
  const contentTypes: Record<string, string> = {};
  for (const blob of object.blobs) {
    fields[blob.property] = { storage_key: blob.storage_key, content_type: blob.content_type, size_bytes: blob.size_bytes, filename: blob.filename };
    contentTypes[blob.property] = blob.content_type;
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
    inherited: {},
    filterView: { object_id: object.object_id, key: object.key, metadata: object.metadata, ...object.metadata, created_at: object.created_at.toISOString() },
    contentTypes,
    key: object.key,
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
  /** Required inputs the record has no value for. */
  missing: string[];
}

/**
 * Picks each extractor input from the record: the `input_mapping` entry when given, else a field of
 * the same name, else (one blob per kind is the common case) the first blob whose type suits the input.
 */
export function mapInputs(extractor: ExtractorPlugin, record: SourceRecord, inputMapping: Record<string, string> | undefined): MappedInput {
  const fields: Record<string, unknown> = { ...record.fields };
  const missing: string[] = [];
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
    const value = source === undefined ? undefined : readPath(record.fields, source);
    if (value === undefined || value === null || value === '') {
      if (input.required) missing.push(input.name);
      continue;
    }
    fields[input.name] = value;
    if (!mimeType) mimeType = source !== undefined ? (record.contentTypes[source] ?? (typeof value === 'string' ? 'text/plain' : 'application/json')) : '';
  }
  return { fields, mimeType: mimeType || 'application/octet-stream', missing };
}

function readPath(fields: Record<string, unknown>, path: string): unknown {
  if (path in fields) return fields[path];
  return path.split('.').reduce<unknown>((v, k) => (v && typeof v === 'object' ? (v as Record<string, unknown>)[k] : undefined), fields);
}
