/**
 * Turns one `blobs[]` entry of an object request into a stored blob: inline text, JSON or base64, a
 * finished upload, or a URL (fetched with the private-network guard). The stored bytes are hashed while
 * they stream, their type is sniffed from the first bytes, and the type must fit the schema property.
 */
import type { BlobInfo, BlobStore } from '../../../kernel/blobs/blob-store.js';
import { RequestValidationError, type FieldProblem } from '../../../kernel/errors.js';
import { checkBufferSize, digestBuffer } from '../../../kernel/blobs/meter.js';
import { safeFetch } from '../../../kernel/net/safe-fetch.js';
import { blobTypeOf, contentFits, type PropertyType } from './schema.js';
import { SNIFF_BYTES, sniffContentType, type SniffHints } from './sniff.js';

export type BlobSource = 'inline' | 'upload' | 'url';

/** A blob as the object row keeps it. */
export interface StoredBlob {
  property: string;
  type: PropertyType;
  content_type: string;
  size_bytes: number;
  md5: string;
  sha256: string;
  filename: string | null;
  source: BlobSource;
  source_url: string | null;
  storage_key: string;
  upload_id: string | null;
  /**
   * A small inline text or JSON blob's content, kept in the object row: creating it writes no file, and
   * processing reads it with the object. Its file at `storage_key` is written only when something needs one
   * (a download URL, a document that references the blob): `storeInlineBlob`.
   */
  inline_text?: string;
}

/** Inline text and JSON up to this many bytes stays in the object row (see `StoredBlob.inline_text`). */
export const INLINE_MAX_BYTES = 16 * 1024;

/** Whether these bytes (of this sniffed type) can stay in the row: some text, and no NUL (which jsonb cannot hold). */
function keepsInline(bytes: Buffer, contentType: string): boolean {
  return bytes.length > 0 && bytes.length <= INLINE_MAX_BYTES && (contentType.startsWith('text/') || contentType === 'application/json') && !bytes.includes(0);
}

/** Writes an inline blob's file (once; a blob already in the store is left as it is). */
export async function storeInlineBlob(blobs: BlobStore, blob: Pick<StoredBlob, 'storage_key' | 'content_type' | 'inline_text'>): Promise<void> {
  if (blob.inline_text === undefined || (await blobs.head(blob.storage_key))) return;
  await blobs.put(blob.storage_key, Buffer.from(blob.inline_text, 'utf8'), { contentType: blob.content_type });
}

export interface BlobInput {
  property: string;
  type?: PropertyType;
  text?: string;
  json?: unknown;
  base64?: string;
  upload_id?: string;
  url?: string;
  filename?: string;
}

const SOURCES = ['text', 'json', 'base64', 'upload_id', 'url'] as const;
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

/** Exactly one source per blob, valid base64, no property twice. */
export function checkBlobInputs(blobs: readonly BlobInput[]): FieldProblem[] {
  const problems: FieldProblem[] = [];
  const seen = new Set<string>();
  blobs.forEach((blob, i) => {
    const given = SOURCES.filter((s) => blob[s] !== undefined);
    if (given.length !== 1) {
      problems.push({ loc: ['body', 'blobs', i], msg: `give exactly one of ${SOURCES.join(', ')} (got ${given.length})`, type: 'blob_source' });
    }
    if (blob.base64 !== undefined && (blob.base64.length % 4 !== 0 || !BASE64.test(blob.base64))) {
      problems.push({ loc: ['body', 'blobs', i, 'base64'], msg: 'is not valid base64', type: 'blob_base64' });
    }
    if (seen.has(blob.property)) problems.push({ loc: ['body', 'blobs', i, 'property'], msg: `'${blob.property}' is given twice`, type: 'blob_duplicate' });
    seen.add(blob.property);
  });
  return problems;
}

export interface IngestLimits {
  maxBytes: number;
  allowPrivateUrls: boolean;
  urlTimeoutMs: number;
}

export class BlobIngest {
  constructor(
    private readonly blobs: BlobStore,
    private readonly limits: IngestLimits,
  ) {}

  /** Sniffs a stored blob's type from its first bytes. */
  async sniffStored(key: string, hints: SniffHints): Promise<string> {
    const { body } = await this.blobs.get(key, { start: 0, end: SNIFF_BYTES - 1 });
    const chunks: Buffer[] = [];
    for await (const chunk of body) chunks.push(Buffer.from(chunk as Buffer));
    return sniffContentType(Buffer.concat(chunks), hints);
  }

  /** Stores an inline or URL blob under `key` and describes it; the caller deletes it if the object fails. */
  async store(input: BlobInput, key: string, declaredType: PropertyType | undefined, index: number): Promise<StoredBlob> {
    let info: BlobInfo;
    let contentType: string;
    let source: BlobSource = 'inline';
    let sourceUrl: string | null = null;
    let filename = input.filename ?? null;
    if (input.url !== undefined) {
      const fetched = await safeFetch(input.url, {
        allowPrivate: this.limits.allowPrivateUrls,
        timeoutMs: this.limits.urlTimeoutMs,
        maxBytes: this.limits.maxBytes,
      });
      info = await this.blobs.put(key, fetched.body, { maxBytes: this.limits.maxBytes });
      filename ??= fetched.filename ?? null;
      contentType = await this.sniffStored(key, { declaredType: fetched.declaredType, filename: filename ?? undefined });
      source = 'url';
      sourceUrl = fetched.finalUrl;
    } else {
      const bytes =
        input.text !== undefined
          ? Buffer.from(input.text, 'utf8')
          : input.base64 !== undefined
            ? Buffer.from(input.base64, 'base64')
            : Buffer.from(JSON.stringify(input.json), 'utf8');
      contentType =
        input.json !== undefined
          ? 'application/json'
          : await sniffContentType(bytes.subarray(0, SNIFF_BYTES), { whole: bytes, filename: filename ?? undefined });
      if (input.text !== undefined && contentType === 'application/json' && declaredType === 'text') contentType = 'text/plain';
      if (input.base64 === undefined && keepsInline(bytes, contentType)) {
        checkBufferSize(bytes, this.limits.maxBytes);
        const inline: BlobInfo = { key, contentType, createdAt: new Date(), ...digestBuffer(bytes) };
        const described = this.describe(input.property, key, inline, contentType, declaredType, index, { source, sourceUrl, filename, uploadId: null });
        return { ...described, inline_text: bytes.toString('utf8') };
      }
      info = await this.blobs.put(key, bytes, { contentType, maxBytes: this.limits.maxBytes });
    }
    return this.describe(input.property, key, info, contentType, declaredType, index, { source, sourceUrl, filename, uploadId: null });
  }

  /** Describes a blob already stored (a finished upload), checking its type against the property. */
  describe(
    property: string,
    key: string,
    info: BlobInfo,
    contentType: string,
    declaredType: PropertyType | undefined,
    index: number,
    origin: { source: BlobSource; sourceUrl: string | null; filename: string | null; uploadId: string | null },
  ): StoredBlob {
    const type = declaredType ?? blobTypeOf(contentType);
    if (declaredType && !contentFits(declaredType, contentType)) {
      throw new RequestValidationError([
        {
          loc: ['body', 'blobs', index],
          // An empty blob is usually a file that was not there when the request was made (base64 of nothing).
          msg: info.size === 0
            ? `property '${property}' holds ${declaredType} content, but this blob is empty (0 bytes): send the file's content`
            : `property '${property}' holds ${declaredType} content, but this blob is ${contentType}`,
          type: 'blob_content_type',
        },
      ]);
    }
    return {
      property,
      type,
      content_type: contentType,
      size_bytes: info.size,
      md5: info.md5,
      sha256: info.sha256,
      filename: origin.filename,
      source: origin.source,
      source_url: origin.sourceUrl,
      storage_key: key,
      upload_id: origin.uploadId,
    };
  }
}
