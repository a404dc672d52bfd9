/**
 * The default BlobStore: a folder on local disk. Presigned URLs point at the API itself
 * (`/v1/storage/blobs/{token}`), whose route checks the token with `verifyBlobToken` and streams
 * the bytes to `put`/from `get`.
 *
 * On disk, one file per blob holds the bytes followed by a JSON trailer (content type, digests,
 * creation time) and an 8-byte footer, so one atomic rename commits bytes and metadata together:
 * a crash leaves either the old blob or the new one, never a half-written blob or stale metadata.
 * Key segments become directories named `<segment>.d` and the blob file `<last>.blob`; the suffixes
 * keep file and directory names apart, so `a` and `a/b` can both be keys, as on S3.
 */
import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from 'node:crypto';
import { constants as fsConstants } from 'node:fs';
import { access, mkdir, open, readdir, rename, rmdir, unlink, type FileHandle } from 'node:fs/promises';
import path from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { systemClock, type Clock } from '../clock.js';
import { AuthenticationError, InputError, NotFoundError } from '../errors.js';
import {
  DEFAULT_CONTENT_TYPE,
  validateExpiry,
  validateKey,
  validatePrefix,
  validateRange,
  type BlobInfo,
  type BlobRead,
  type BlobStore,
  type ByteRange,
  type PresignedGet,
  type PresignedPut,
  type PresignGetOptions,
  type PresignPutOptions,
  type PutOptions,
} from './blob-store.js';
import { BlobMeter, checkBufferSize, digestBuffer, toReadable, type Digests } from './meter.js';

export interface LocalBlobStoreOptions {
  /** Where the API is reachable, e.g. `http://127.0.0.1:8080`; a function because the port is known only after listen. */
  publicBaseUrl: () => string;
  /** Key for the HMAC that signs presigned URLs. */
  signingSecret: Buffer;
  clock?: Clock;
}

/** What a verified presigned-URL token allows. */
export interface BlobGrant {
  key: string;
  method: 'GET' | 'PUT';
  expiresAt: Date;
  /** PUT: the Content-Type the uploader must send and the blob is stored with. */
  contentType?: string;
  /** PUT: the most bytes the upload may have (pass to `put` as `maxBytes`). */
  maxBytes?: number;
  /** GET: the download file name (send `attachmentDisposition(filename)`). */
  filename?: string;
}

/** The signed payload; short field names keep URLs short. */
interface TokenPayload {
  k: string;
  m: 'GET' | 'PUT';
  e: number;
  ct?: string;
  mx?: number;
  fn?: string;
}

export const BLOB_ROUTE_PREFIX = '/v1/storage/blobs/';

const DIR_SUFFIX = '.d';
const BLOB_SUFFIX = '.blob';
const TMP_SUFFIX = '.tmp';
const MAGIC = Buffer.from('TSB1');
const FOOTER_BYTES = 8;

interface Trailer {
  v: 1;
  contentType: string;
  md5: string;
  sha256: string;
  createdAt: string;
}

/** The JSON trailer and footer that end a blob file. */
function trailerOf(contentType: string, digests: Digests, createdAt: Date): Buffer {
  const trailer: Trailer = { v: 1, contentType, md5: digests.md5, sha256: digests.sha256, createdAt: createdAt.toISOString() };
  const json = Buffer.from(JSON.stringify(trailer));
  const footer = Buffer.alloc(FOOTER_BYTES);
  footer.writeUInt32BE(json.length, 0);
  MAGIC.copy(footer, 4);
  return Buffer.concat([json, footer]);
}

/** The token key: derived from the signing secret, for this use only. */
function tokenKey(secret: Buffer): Buffer {
  return Buffer.from(hkdfSync('sha256', secret, Buffer.alloc(0), 'tessera presigned blob token v2', 32));
}

/**
 * A presigned-URL token: the grant sealed with AES-256-GCM (`<iv>.<ciphertext + tag>`, base64url). Sealed,
 * not only signed: the storage key inside names the organization and namespace, and a URL handed to a
 * public visitor must not show them.
 */
export function signBlobToken(grant: BlobGrant, secret: Buffer): string {
  const payload: TokenPayload = { k: grant.key, m: grant.method, e: Math.floor(grant.expiresAt.getTime() / 1000) };
  if (grant.contentType !== undefined) payload.ct = grant.contentType;
  if (grant.maxBytes !== undefined) payload.mx = grant.maxBytes;
  if (grant.filename !== undefined) payload.fn = grant.filename;
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', tokenKey(secret), iv);
  const sealed = Buffer.concat([cipher.update(JSON.stringify(payload), 'utf8'), cipher.final(), cipher.getAuthTag()]);
  return `${iv.toString('base64url')}.${sealed.toString('base64url')}`;
}

/**
 * Checks a presigned-URL token. Throws AuthenticationError when it is malformed, was not sealed with this
 * secret (or was altered), has expired at `now`, or (when `method` is given) was issued for another method.
 */
export function verifyBlobToken(token: string, secret: Buffer, now: Date, method?: 'GET' | 'PUT'): BlobGrant {
  const parts = typeof token === 'string' ? token.split('.') : [];
  if (parts.length !== 2 || !parts[0] || !parts[1]) throw new AuthenticationError('Malformed storage token');
  const iv = Buffer.from(parts[0], 'base64url');
  const sealed = Buffer.from(parts[1], 'base64url');
  if (iv.length !== 12 || sealed.length <= 16) throw new AuthenticationError('Malformed storage token');
  let payload: TokenPayload;
  try {
    const decipher = createDecipheriv('aes-256-gcm', tokenKey(secret), iv);
    decipher.setAuthTag(sealed.subarray(sealed.length - 16));
    const plain = Buffer.concat([decipher.update(sealed.subarray(0, sealed.length - 16)), decipher.final()]);
    payload = JSON.parse(plain.toString('utf8')) as TokenPayload;
  } catch {
    // A wrong tag (altered, or another secret) and a sealed payload that is not JSON alike.
    throw new AuthenticationError('Invalid storage token');
  }
  if (typeof payload?.k !== 'string' || (payload.m !== 'GET' && payload.m !== 'PUT') || !Number.isInteger(payload.e)) {
    throw new AuthenticationError('Malformed storage token');
  }
  if (now.getTime() >= payload.e * 1000) throw new AuthenticationError('Storage URL has expired');
  if (method !== undefined && payload.m !== method) throw new AuthenticationError(`Storage URL is not valid for ${method}`);
  const grant: BlobGrant = { key: payload.k, method: payload.m, expiresAt: new Date(payload.e * 1000) };
  if (typeof payload.ct === 'string') grant.contentType = payload.ct;
  if (typeof payload.mx === 'number') grant.maxBytes = payload.mx;
  if (typeof payload.fn === 'string') grant.filename = payload.fn;
  return grant;
}

function isErrno(error: unknown, ...codes: string[]): boolean {
  return error instanceof Error && codes.includes((error as NodeJS.ErrnoException).code ?? '');
}

/** Orders names the way S3 orders keys (by UTF-8 bytes); a directory sorts as `name/`. */
function byKeyOrder(a: string, b: string): number {
  return Buffer.compare(Buffer.from(a), Buffer.from(b));
}

/** The bytes a range covers in a blob of `size` bytes (`end` < `start` for an empty blob). */
function span(range: ByteRange | undefined, size: number): { start: number; end: number } {
  if (!range) return { start: 0, end: size - 1 };
  if (range.start >= size) throw new InputError('Range not satisfiable', { start: range.start, size });
  return { start: range.start, end: Math.min(range.end ?? size - 1, size - 1) };
}

/** The blob's byte count, from the footer (trailer length + magic) at the end of its file. */
function blobSize(key: string, footer: Buffer, fileSize: number): number {
  const length = footer.readUInt32BE(0);
  if (!footer.subarray(4, FOOTER_BYTES).equals(MAGIC) || length > fileSize - FOOTER_BYTES) throw new Error(`Corrupt blob file for ${key}`);
  return fileSize - FOOTER_BYTES - length;
}

function infoFrom(key: string, size: number, trailerJson: Buffer): BlobInfo {
  const trailer = JSON.parse(trailerJson.toString('utf8')) as Trailer;
  return { key, size, contentType: trailer.contentType, md5: trailer.md5, sha256: trailer.sha256, createdAt: new Date(trailer.createdAt) };
}

/** Reads up to this size are served from one buffer instead of a read stream. */
const SMALL_READ_BYTES = 256 * 1024;

export class LocalBlobStore implements BlobStore {
  readonly kind = 'local' as const;
  private readonly clock: Clock;

  constructor(
    readonly rootDir: string,
    private readonly options: LocalBlobStoreOptions,
  ) {
    this.rootDir = path.resolve(rootDir);
    this.clock = options.clock ?? systemClock;
  }

  private dirFor(segments: string[]): string {
    return path.join(this.rootDir, ...segments.map((s) => s + DIR_SUFFIX));
  }

  private fileFor(key: string): string {
    const segments = key.split('/');
    const last = segments.pop()!;
    return path.join(this.dirFor(segments), last + BLOB_SUFFIX);
  }

  async put(key: string, body: NodeJS.ReadableStream | Buffer, options: PutOptions = {}): Promise<BlobInfo> {
    validateKey(key);
    const target = this.fileFor(key);
    const dir = path.dirname(target);
    const tmp = `${target.slice(0, -BLOB_SUFFIX.length)}.${randomBytes(6).toString('hex')}${TMP_SUFFIX}`;
    const contentType = options.contentType || DEFAULT_CONTENT_TYPE;
    const createdAt = this.clock.now();
    // A body already in memory (inline text, JSON, base64) is hashed and written in one call: for the small
    // blobs of a bulk request the stream machinery cost more than the bytes.
    if (Buffer.isBuffer(body)) checkBufferSize(body, options.maxBytes);
    const known = Buffer.isBuffer(body) ? digestBuffer(body) : undefined;
    const meter = known ? undefined : new BlobMeter(options.maxBytes);
    const handle = await this.openTemp(dir, tmp);
    try {
      if (Buffer.isBuffer(body)) {
        await handle.writeFile(Buffer.concat([body, trailerOf(contentType, known!, createdAt)]));
        // fsync before close, so the rename below never publishes bytes still only in the page cache.
        await handle.sync();
        await handle.close();
      } else {
        const metered = meter!;
        await pipeline(
          toReadable(body),
          metered,
          async function* (source: AsyncIterable<Buffer>) {
            for await (const chunk of source) yield chunk;
            yield trailerOf(contentType, metered.digests(), createdAt);
          },
          handle.createWriteStream({ flush: true }),
        );
      }
      const publish = () => rename(tmp, target);
      await (options.commit ? options.commit(publish) : publish());
    } catch (error) {
      await handle.close().catch(() => undefined);
      await unlink(tmp).catch(() => undefined);
      await this.prune(dir);
      throw error;
    }
    await this.syncDir(dir);
    const d = known ?? meter!.digests();
    return { key, size: d.size, contentType, md5: d.md5, sha256: d.sha256, createdAt };
  }

  /** Opens the temp file, recreating its folder if a concurrent delete pruned it in between. */
  private async openTemp(dir: string, tmp: string): Promise<FileHandle> {
    for (let attempt = 0; ; attempt++) {
      await mkdir(dir, { recursive: true });
      try {
        return await open(tmp, 'wx');
      } catch (error) {
        if (!isErrno(error, 'ENOENT') || attempt >= 5) throw error;
      }
    }
  }

  private async syncDir(dir: string): Promise<void> {
    // Makes the rename itself durable; best effort, since not every platform can fsync a folder.
    const handle = await open(dir, 'r').catch(() => undefined);
    if (!handle) return;
    await handle.sync().catch(() => undefined);
    await handle.close();
  }

  /** Reads size and metadata from the trailer at the end of an open blob file. */
  private async readInfo(key: string, handle: FileHandle): Promise<BlobInfo> {
    const { size: fileSize } = await handle.stat();
    const footer = Buffer.alloc(FOOTER_BYTES);
    if (fileSize < FOOTER_BYTES) throw new Error(`Corrupt blob file for ${key}`);
    await handle.read(footer, 0, FOOTER_BYTES, fileSize - FOOTER_BYTES);
    const size = blobSize(key, footer, fileSize);
    const json = Buffer.alloc(fileSize - FOOTER_BYTES - size);
    await handle.read(json, 0, json.length, size);
    return infoFrom(key, size, json);
  }

  /**
   * A small blob file read whole, trailer and bytes in one read; undefined for larger files, which go
   * through readInfo and a read stream.
   */
  private async readSmall(key: string, handle: FileHandle): Promise<{ info: BlobInfo; bytes: Buffer } | undefined> {
    const { size: fileSize } = await handle.stat();
    if (fileSize > SMALL_READ_BYTES) return undefined;
    const file = Buffer.alloc(fileSize);
    const { bytesRead } = await handle.read(file, 0, fileSize, 0);
    if (bytesRead !== fileSize || fileSize < FOOTER_BYTES) throw new Error(`Corrupt blob file for ${key}`);
    const size = blobSize(key, file.subarray(fileSize - FOOTER_BYTES), fileSize);
    return { info: infoFrom(key, size, file.subarray(size, fileSize - FOOTER_BYTES)), bytes: file.subarray(0, size) };
  }

  private async openBlob(key: string): Promise<FileHandle | undefined> {
    try {
      return await open(this.fileFor(key), 'r');
    } catch (error) {
      if (isErrno(error, 'ENOENT', 'ENOTDIR')) return undefined;
      throw error;
    }
  }

  async get(key: string, range?: ByteRange): Promise<BlobRead> {
    validateKey(key);
    validateRange(range);
    // Reading through the open handle means a concurrent overwrite or delete cannot change what we serve.
    const handle = await this.openBlob(key);
    if (!handle) throw new NotFoundError(`Blob not found: ${key}`, { key });
    try {
      const small = await this.readSmall(key, handle);
      if (small) {
        const { start, end } = span(range, small.info.size);
        await handle.close();
        return { info: small.info, body: Readable.from(end < start ? [] : [small.bytes.subarray(start, end + 1)]) };
      }
      const info = await this.readInfo(key, handle);
      const { start, end } = span(range, info.size);
      if (end < start) {
        // Empty blob: a read stream with end < start would misbehave, so hand back an empty one.
        await handle.close();
        return { info, body: Readable.from([]) };
      }
      // A small range of a large blob in one read: a read stream costs more than the bytes do.
      if (end - start + 1 <= SMALL_READ_BYTES) {
        const bytes = Buffer.alloc(end - start + 1);
        const { bytesRead } = await handle.read(bytes, 0, bytes.length, start);
        await handle.close();
        return { info, body: Readable.from([bytes.subarray(0, bytesRead)]) };
      }
      return { info, body: handle.createReadStream({ start, end, autoClose: true }) };
    } catch (error) {
      await handle.close().catch(() => undefined);
      throw error;
    }
  }

  async head(key: string): Promise<BlobInfo | undefined> {
    validateKey(key);
    const handle = await this.openBlob(key);
    if (!handle) return undefined;
    try {
      return await this.readInfo(key, handle);
    } finally {
      await handle.close();
    }
  }

  async ensureDigests(key: string): Promise<BlobInfo> {
    // Every local blob is written through put, so its digests are always there.
    const info = await this.head(key);
    if (!info) throw new NotFoundError(`Blob not found: ${key}`, { key });
    return info;
  }

  async delete(key: string): Promise<void> {
    validateKey(key);
    const file = this.fileFor(key);
    try {
      await unlink(file);
    } catch (error) {
      if (isErrno(error, 'ENOENT', 'ENOTDIR')) return;
      throw error;
    }
    await this.prune(path.dirname(file));
  }

  /** Removes now-empty folders from `dir` up to (not including) the root. */
  private async prune(dir: string): Promise<void> {
    let current = dir;
    while (current.startsWith(this.rootDir + path.sep)) {
      try {
        await rmdir(current);
      } catch {
        return; // not empty (or already gone): the folders above are not empty either
      }
      current = path.dirname(current);
    }
  }

  async deletePrefix(prefix: string): Promise<number> {
    validatePrefix(prefix);
    let count = 0;
    // Collect first: deleting while walking a folder would make readdir results stale.
    const keys: string[] = [];
    for await (const key of this.keys(prefix)) keys.push(key);
    for (const key of keys) {
      const file = this.fileFor(key);
      try {
        await unlink(file);
        count++;
      } catch (error) {
        if (!isErrno(error, 'ENOENT', 'ENOTDIR')) throw error;
      }
      await this.prune(path.dirname(file));
    }
    return count;
  }

  async *list(prefix: string): AsyncIterable<BlobInfo> {
    validatePrefix(prefix);
    for await (const key of this.keys(prefix)) {
      const handle = await this.openBlob(key);
      if (!handle) continue; // deleted since the folder was read
      try {
        yield await this.readInfo(key, handle);
      } finally {
        await handle.close();
      }
    }
  }

  /** Keys starting with `prefix`, in S3 order, walking only the folder the prefix pins down. */
  private async *keys(prefix: string): AsyncIterable<string> {
    const cut = prefix.lastIndexOf('/');
    const dirSegments = cut < 0 ? [] : prefix.slice(0, cut).split('/');
    yield* this.walk(this.dirFor(dirSegments), dirSegments.map((s) => s + '/').join(''), prefix);
  }

  private async *walk(dir: string, keyPrefix: string, prefix: string): AsyncIterable<string> {
    let entries;
    try {
      entries = await readdir(dir, { withFileTypes: true });
    } catch (error) {
      if (isErrno(error, 'ENOENT', 'ENOTDIR')) return;
      throw error;
    }
    const items: Array<{ sortName: string; key: string; dir?: string }> = [];
    for (const entry of entries) {
      if (entry.isDirectory() && entry.name.endsWith(DIR_SUFFIX)) {
        const name = keyPrefix + entry.name.slice(0, -DIR_SUFFIX.length) + '/';
        // Descend only where keys can still match: the folder is inside the prefix or the prefix inside it.
        if (name.startsWith(prefix) || prefix.startsWith(name)) items.push({ sortName: name, key: name, dir: path.join(dir, entry.name) });
      } else if (entry.isFile() && entry.name.endsWith(BLOB_SUFFIX)) {
        const key = keyPrefix + entry.name.slice(0, -BLOB_SUFFIX.length);
        if (key.startsWith(prefix)) items.push({ sortName: key, key });
      }
    }
    items.sort((a, b) => byKeyOrder(a.sortName, b.sortName));
    for (const item of items) {
      if (item.dir) yield* this.walk(item.dir, item.key, prefix);
      else yield item.key;
    }
  }

  private url(grant: BlobGrant): string {
    const base = this.options.publicBaseUrl().replace(/\/+$/, '');
    return `${base}${BLOB_ROUTE_PREFIX}${signBlobToken(grant, this.options.signingSecret)}`;
  }

  private expiry(expiresInSeconds: number): Date {
    validateExpiry(expiresInSeconds);
    // Whole seconds, as in the token, so the reported expiry is exactly the one enforced.
    return new Date((Math.floor(this.clock.now().getTime() / 1000) + expiresInSeconds) * 1000);
  }

  async presignPut(key: string, options: PresignPutOptions): Promise<PresignedPut> {
    validateKey(key);
    const expiresAt = this.expiry(options.expiresInSeconds);
    const grant: BlobGrant = { key, method: 'PUT', expiresAt };
    const headers: Record<string, string> = {};
    if (options.contentType) {
      grant.contentType = options.contentType;
      headers['Content-Type'] = options.contentType;
    }
    if (options.maxBytes !== undefined) grant.maxBytes = options.maxBytes;
    return { url: this.url(grant), method: 'PUT', headers, expiresAt };
  }

  async presignGet(key: string, options: PresignGetOptions): Promise<PresignedGet> {
    validateKey(key);
    const expiresAt = this.expiry(options.expiresInSeconds);
    const grant: BlobGrant = { key, method: 'GET', expiresAt };
    if (options.filename !== undefined) grant.filename = options.filename;
    return { url: this.url(grant), expiresAt };
  }

  /**
   * The folder must be there and writable. A first ping makes it (a fresh home has no blob yet); once seen, a
   * missing folder is reported, not made again: an empty new folder would hide a lost volume behind "up"
   * while every blob written before reads as not found.
   */
  async ping(): Promise<void> {
    try {
      await access(this.rootDir, fsConstants.R_OK | fsConstants.W_OK);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
      if (this.rootSeen) throw new Error(`the blob folder ${this.rootDir} is gone (was its volume unmounted?): blobs stored before cannot be read`);
      await mkdir(this.rootDir, { recursive: true });
    }
    this.rootSeen = true;
  }

  /** Whether a ping found the folder (or made it) before. */
  private rootSeen = false;
}
