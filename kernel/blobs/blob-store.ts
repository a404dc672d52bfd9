/**
 * The BlobStore: where object bytes live. Two implementations (local folder, S3-compatible) pass one
 * contract suite (test/kernel/blobs/contract.ts), so services never care which one they got.
 *
 * Keys are relative, `/`-separated paths such as `org_x/ns_y/objects/obj_z/content`. Both stores
 * validate them the same way so a key accepted by one is accepted by the other.
 */
import { InputError } from '../errors.js';

export interface BlobInfo {
  key: string;
  /** Size of the whole blob in bytes (also for ranged reads). */
  size: number;
  contentType: string;
  /**
   * Hex digests. Always set for blobs written through `put`. A blob written straight to S3 through a
   * presigned PUT has none until `ensureDigests` has read it once; until then both are ''.
   */
  md5: string;
  sha256: string;
  createdAt: Date;
}

export interface PutOptions {
  /** Defaults to `application/octet-stream`. */
  contentType?: string;
  /** Exceeding it rejects with PayloadTooLargeError and leaves nothing stored (an earlier blob under the key stays). */
  maxBytes?: number;
  /**
   * Wraps the one step that makes the new bytes visible under the key (after they are all received),
   * so a caller can hold a lock across it or refuse at the last moment: when it throws, nothing is
   * stored and the error is the put's.
   */
  commit?: (publish: () => Promise<void>) => Promise<void>;
}

/** Inclusive byte range, as in HTTP `Range: bytes=start-end`; `end` past the blob is clamped. */
export interface ByteRange {
  start: number;
  end?: number;
}

export interface PresignPutOptions {
  expiresInSeconds: number;
  /** When set, the uploader must send exactly this Content-Type (returned in `headers`). */
  contentType?: string;
  /** Enforced by the local store's upload route; S3 presigned PUTs cannot enforce it (check at confirm). */
  maxBytes?: number;
}

export interface PresignedPut {
  url: string;
  method: 'PUT';
  /** Headers the uploader must send with the PUT. */
  headers: Record<string, string>;
  expiresAt: Date;
}

export interface PresignGetOptions {
  expiresInSeconds: number;
  /** Served as `Content-Disposition: attachment; filename=...`. */
  filename?: string;
}

export interface PresignedGet {
  url: string;
  expiresAt: Date;
}

/** A blob as `get` gives it. */
export interface BlobRead {
  info: BlobInfo;
  body: NodeJS.ReadableStream;
  /**
   * The same bytes at once, when the store already holds them in memory (a batch chunk's prefetched or
   * inline blobs): read them instead of `body` (readBlobBytes does), skipping a stream per record.
   */
  bytes?: Buffer;
}

/** A blob's whole (or ranged) body in one buffer: its `bytes` when the store has them, else the stream read to its end. */
export async function readBlobBytes(read: BlobRead): Promise<Buffer> {
  if (read.bytes) return read.bytes;
  const parts: Buffer[] = [];
  for await (const chunk of read.body as AsyncIterable<Buffer | string>) parts.push(typeof chunk === 'string' ? Buffer.from(chunk) : chunk);
  return Buffer.concat(parts);
}

export interface BlobStore {
  readonly kind: 'local' | 's3';
  /** Streams the body (never buffering it whole), computing MD5 and SHA-256 on the way; replaces any blob under the key. */
  put(key: string, body: NodeJS.ReadableStream | Buffer, options?: PutOptions): Promise<BlobInfo>;
  /** NotFoundError when missing; InputError when `range.start` is at or past the end of the blob. */
  get(key: string, range?: ByteRange): Promise<BlobRead>;
  head(key: string): Promise<BlobInfo | undefined>;
  /** Idempotent: deleting a missing key is not an error. */
  delete(key: string): Promise<void>;
  /** Deletes every blob whose key starts with `prefix` (a plain string prefix, as in S3); returns how many. */
  deletePrefix(prefix: string): Promise<number>;
  /** Every blob whose key starts with `prefix`, in ascending key order. */
  list(prefix: string): AsyncIterable<BlobInfo>;
  presignPut(key: string, options: PresignPutOptions): Promise<PresignedPut>;
  presignGet(key: string, options: PresignGetOptions): Promise<PresignedGet>;
  /**
   * Makes sure the blob's MD5 and SHA-256 are recorded, reading it once if they are not (a blob
   * uploaded straight to S3 through a presigned PUT), and returns its info. NotFoundError when missing.
   */
  ensureDigests(key: string): Promise<BlobInfo>;
  /** Health probe: rejects when the store cannot be reached or written. */
  ping(): Promise<void>;
}

export const DEFAULT_CONTENT_TYPE = 'application/octet-stream';

/** S3's own limit; applied to both stores so they accept the same keys. */
const MAX_KEY_BYTES = 1024;
/** Leaves room under the usual 255-byte file-name limit for the local store's suffixes. */
const MAX_SEGMENT_BYTES = 200;
/** Where the S3 store stages streamed uploads before they appear under their key. */
export const RESERVED_PREFIX = '.tessera-staging/';

// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f]/;

function checkSegments(value: string, what: string, allowPartialLast: boolean): void {
  if (value.startsWith('/')) throw new InputError(`Invalid ${what}: must not start with "/"`, { [what]: value });
  if (value.includes('\\')) throw new InputError(`Invalid ${what}: must not contain "\\"`, { [what]: value });
  if (CONTROL.test(value)) throw new InputError(`Invalid ${what}: must not contain control characters`, { [what]: value });
  if (Buffer.byteLength(value) > MAX_KEY_BYTES) throw new InputError(`Invalid ${what}: longer than ${MAX_KEY_BYTES} bytes`, { [what]: value });
  if (value.startsWith(RESERVED_PREFIX)) throw new InputError(`Invalid ${what}: "${RESERVED_PREFIX}" is reserved`, { [what]: value });
  const segments = value.split('/');
  segments.forEach((segment, i) => {
    const last = i === segments.length - 1;
    if (segment === '' && !(last && allowPartialLast)) throw new InputError(`Invalid ${what}: empty path segment`, { [what]: value });
    if (segment === '.' || segment === '..') throw new InputError(`Invalid ${what}: "${segment}" segments are not allowed`, { [what]: value });
    if (Buffer.byteLength(segment) > MAX_SEGMENT_BYTES) throw new InputError(`Invalid ${what}: a segment is longer than ${MAX_SEGMENT_BYTES} bytes`, { [what]: value });
  });
}

/** Throws InputError unless `key` is a relative path with non-empty segments, no `.`/`..`, no backslashes. */
export function validateKey(key: string): void {
  if (typeof key !== 'string' || key === '') throw new InputError('Invalid key: empty', { key });
  checkSegments(key, 'key', false);
}

/** Like validateKey, but '' (everything) and a trailing '/' or partial last segment are fine. */
export function validatePrefix(prefix: string): void {
  if (typeof prefix !== 'string') throw new InputError('Invalid prefix', { prefix });
  if (prefix === '') return;
  checkSegments(prefix, 'prefix', true);
}

export function validateExpiry(expiresInSeconds: number): void {
  // 7 days is S3's limit for SigV4 presigned URLs; the local store keeps the same bound.
  if (!Number.isInteger(expiresInSeconds) || expiresInSeconds < 1 || expiresInSeconds > 604_800) {
    throw new InputError('expiresInSeconds must be an integer between 1 and 604800', { expiresInSeconds });
  }
}

export function validateRange(range: ByteRange | undefined): void {
  if (!range) return;
  const { start, end } = range;
  if (!Number.isSafeInteger(start) || start < 0 || (end !== undefined && (!Number.isSafeInteger(end) || end < start))) {
    throw new InputError('Invalid byte range', { start, end });
  }
}

/** `Content-Disposition` for a download, with an RFC 5987 `filename*` so any name survives. */
export function attachmentDisposition(filename: string): string {
  const fallback = filename.replace(/[^\x20-\x7e]|["\\]/g, '_');
  const encoded = encodeURIComponent(filename).replace(/['()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
  return `attachment; filename="${fallback}"; filename*=UTF-8''${encoded}`;
}
