/**
 * BlobStore on any S3-compatible service (AWS S3, MinIO, R2, ...), with real presigned URLs.
 *
 * MD5 and SHA-256 are stored as user metadata (`x-amz-meta-md5`, `x-amz-meta-sha256`). S3 takes
 * metadata before the body, but the digests are known only after it, so a streamed put that is too
 * big for one request is uploaded under a staging key (`.tessera-staging/...`) and then copied
 * server-side onto its key with the digests: the key only ever shows a complete blob with metadata,
 * as with the local store. Small streams (up to `singleRequestMaxBytes`) are collected and sent in
 * one request with the metadata. Stale staging objects from a crash are best expired by a bucket
 * lifecycle rule on that prefix.
 */
import { randomUUID } from 'node:crypto';
import { pipeline, Readable } from 'node:stream';
import {
  AbortMultipartUploadCommand,
  CompleteMultipartUploadCommand,
  CopyObjectCommand,
  CreateMultipartUploadCommand,
  DeleteObjectCommand,
  DeleteObjectsCommand,
  GetObjectCommand,
  HeadBucketCommand,
  HeadObjectCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  S3Client,
  UploadPartCopyCommand,
  type CompletedPart,
} from '@aws-sdk/client-s3';
import { Upload } from '@aws-sdk/lib-storage';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import { systemClock, type Clock } from '../clock.js';
import { ConflictError, InputError, NotFoundError } from '../errors.js';
import {
  attachmentDisposition,
  DEFAULT_CONTENT_TYPE,
  RESERVED_PREFIX,
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

export interface S3Settings {
  /** Omit for AWS itself; e.g. `http://127.0.0.1:9000` for MinIO. */
  endpoint?: string;
  region: string;
  bucket: string;
  /** Omit both to use the SDK's default credential chain. */
  accessKeyId?: string;
  secretAccessKey?: string;
  /** `http://host/bucket/key` instead of `http://bucket.host/key`; most self-hosted stores need it. */
  forcePathStyle?: boolean;
}

/** Sizes that shape the requests; the defaults suit production, tests shrink them to reach every path. */
export interface S3Tuning {
  /** Streams up to this size are sent as one PutObject carrying the digests. */
  singleRequestMaxBytes: number;
  /** Multipart upload part size (memory held per part in flight). */
  partSize: number;
  /** Parts uploaded in parallel. */
  queueSize: number;
  /** Above this, the staging-to-key copy is a multipart copy (S3's CopyObject stops at 5 GiB). */
  copyObjectMaxBytes: number;
  copyPartBytes: number;
}

const DEFAULT_TUNING: S3Tuning = {
  singleRequestMaxBytes: 8 * 1024 * 1024,
  partSize: 8 * 1024 * 1024,
  queueSize: 4,
  copyObjectMaxBytes: 5 * 1024 * 1024 * 1024,
  copyPartBytes: 512 * 1024 * 1024,
};

const META_MD5 = 'md5';
const META_SHA256 = 'sha256';
const META_CREATED = 'created-at';
/** HeadObject requests in flight while listing (ListObjectsV2 returns no metadata). */
const LIST_HEAD_CONCURRENCY = 16;

interface S3Failure {
  name?: string;
  Code?: string;
  $metadata?: { httpStatusCode?: number };
}

function statusOf(error: unknown): number | undefined {
  return (error as S3Failure | undefined)?.$metadata?.httpStatusCode;
}

function isNotFound(error: unknown): boolean {
  const e = error as S3Failure | undefined;
  return statusOf(error) === 404 || e?.name === 'NoSuchKey' || e?.name === 'NotFound';
}

/** The `CopySource` header value: bucket and URL-encoded key, keeping `/` as is. */
function copySource(bucket: string, key: string): string {
  return `${bucket}/${key.split('/').map(encodeURIComponent).join('/')}`;
}

export class S3BlobStore implements BlobStore {
  readonly kind = 's3' as const;
  readonly client: S3Client;
  private readonly bucket: string;
  private readonly clock: Clock;
  private readonly tuning: S3Tuning;

  constructor(settings: S3Settings, options: { clock?: Clock; tuning?: Partial<S3Tuning> } = {}) {
    this.bucket = settings.bucket;
    this.clock = options.clock ?? systemClock;
    this.tuning = { ...DEFAULT_TUNING, ...options.tuning };
    this.client = new S3Client({
      region: settings.region,
      ...(settings.endpoint ? { endpoint: settings.endpoint } : {}),
      forcePathStyle: settings.forcePathStyle ?? false,
      ...(settings.accessKeyId && settings.secretAccessKey
        ? { credentials: { accessKeyId: settings.accessKeyId, secretAccessKey: settings.secretAccessKey } }
        : {}),
      // Only the checksums S3 insists on: newer default checksums break many S3-compatible stores
      // and would be baked into presigned PUT URLs.
      requestChecksumCalculation: 'WHEN_REQUIRED',
      responseChecksumValidation: 'WHEN_REQUIRED',
    });
  }

  private metadata(d: Digests, createdAt: Date): Record<string, string> {
    return { [META_MD5]: d.md5, [META_SHA256]: d.sha256, [META_CREATED]: createdAt.toISOString() };
  }

  async put(key: string, body: NodeJS.ReadableStream | Buffer, options: PutOptions = {}): Promise<BlobInfo> {
    validateKey(key);
    const contentType = options.contentType || DEFAULT_CONTENT_TYPE;
    const createdAt = this.clock.now();
    if (Buffer.isBuffer(body)) {
      checkBufferSize(body, options.maxBytes);
      return this.putSmall(key, body, digestBuffer(body), contentType, createdAt, options.commit);
    }
    const meter = new BlobMeter(options.maxBytes);
    // Errors on the source destroy the meter too, so reading the meter sees them.
    const metered = pipeline(toReadable(body), meter, () => undefined);
    const iterator = metered[Symbol.asyncIterator]() as AsyncIterator<Buffer>;
    const head: Buffer[] = [];
    let headBytes = 0;
    try {
      while (headBytes <= this.tuning.singleRequestMaxBytes) {
        const next = await iterator.next();
        if (next.done) {
          return await this.putSmall(key, Buffer.concat(head, headBytes), meter.digests(), contentType, createdAt, options.commit);
        }
        head.push(next.value);
        headBytes += next.value.length;
      }
    } catch (error) {
      metered.destroy();
      throw error;
    }
    return this.putLarge(key, head, iterator, metered, meter, contentType, createdAt, options.commit);
  }

  private async putSmall(key: string, body: Buffer, d: Digests, contentType: string, createdAt: Date, commit?: PutOptions['commit']): Promise<BlobInfo> {
    const publish = async () => {
      await this.client.send(
        new PutObjectCommand({
          Bucket: this.bucket,
          Key: key,
          Body: body,
          ContentLength: body.length,
          ContentType: contentType,
          Metadata: this.metadata(d, createdAt),
        }),
      );
    };
    await (commit ? commit(publish) : publish());
    return { key, size: d.size, contentType, md5: d.md5, sha256: d.sha256, createdAt };
  }

  private async putLarge(
    key: string,
    head: Buffer[],
    iterator: AsyncIterator<Buffer>,
    metered: Readable,
    meter: BlobMeter,
    contentType: string,
    createdAt: Date,
    commit?: PutOptions['commit'],
  ): Promise<BlobInfo> {
    const staging = `${RESERVED_PREFIX}${randomUUID()}`;
    async function* rest(): AsyncGenerator<Buffer> {
      yield* head;
      head.length = 0; // let the collected first chunks go once sent
      for (let next = await iterator.next(); !next.done; next = await iterator.next()) yield next.value;
    }
    let uploaded = false;
    let upload: Upload | undefined;
    try {
      upload = new Upload({
        client: this.client,
        params: { Bucket: this.bucket, Key: staging, Body: Readable.from(rest()), ContentType: contentType },
        partSize: this.tuning.partSize,
        queueSize: this.tuning.queueSize,
        // We abort a failed upload ourselves (below): lib-storage's own abort throws its failure in
        // place of the upload's, so a body over maxBytes could surface as an unrelated S3 error.
        leavePartsOnError: true,
      });
      await upload.done();
      uploaded = true;
      const d = meter.digests();
      const publish = () => this.copyWithMetadata(staging, key, d.size, contentType, this.metadata(d, createdAt));
      await (commit ? commit(publish) : publish());
      return { key, size: d.size, contentType, md5: d.md5, sha256: d.sha256, createdAt };
    } catch (error) {
      metered.destroy();
      // Nothing is left behind when the abort succeeds; when it fails too, the parts stay under the
      // staging prefix for the bucket's AbortIncompleteMultipartUpload lifecycle rule, and the caller
      // still sees the upload's own error.
      const uploadId = uploaded ? undefined : upload?.uploadId;
      if (uploadId) {
        await this.client.send(new AbortMultipartUploadCommand({ Bucket: this.bucket, Key: staging, UploadId: uploadId })).catch(() => undefined);
      }
      throw error;
    } finally {
      if (uploaded) await this.client.send(new DeleteObjectCommand({ Bucket: this.bucket, Key: staging })).catch(() => undefined);
    }
  }

  /** Server-side copy replacing the metadata; `ifMatch` guards against the source changing meanwhile. */
  private async copyWithMetadata(
    source: string,
    target: string,
    size: number,
    contentType: string,
    metadata: Record<string, string>,
    ifMatch?: string,
  ): Promise<void> {
    const CopySource = copySource(this.bucket, source);
    if (size <= this.tuning.copyObjectMaxBytes) {
      await this.client.send(
        new CopyObjectCommand({
          Bucket: this.bucket,
          Key: target,
          CopySource,
          MetadataDirective: 'REPLACE',
          ContentType: contentType,
          Metadata: metadata,
          ...(ifMatch ? { CopySourceIfMatch: ifMatch } : {}),
        }),
      );
      return;
    }
    const { UploadId } = await this.client.send(
      new CreateMultipartUploadCommand({ Bucket: this.bucket, Key: target, ContentType: contentType, Metadata: metadata }),
    );
    try {
      const ranges: Array<{ PartNumber: number; range: string }> = [];
      for (let start = 0, n = 1; start < size; start += this.tuning.copyPartBytes, n++) {
        ranges.push({ PartNumber: n, range: `bytes=${start}-${Math.min(start + this.tuning.copyPartBytes, size) - 1}` });
      }
      const parts: CompletedPart[] = [];
      for (let i = 0; i < ranges.length; i += this.tuning.queueSize) {
        const batch = ranges.slice(i, i + this.tuning.queueSize);
        const done = await Promise.all(
          batch.map(async ({ PartNumber, range }) => {
            const res = await this.client.send(
              new UploadPartCopyCommand({
                Bucket: this.bucket,
                Key: target,
                UploadId,
                PartNumber,
                CopySource,
                CopySourceRange: range,
                ...(ifMatch ? { CopySourceIfMatch: ifMatch } : {}),
              }),
            );
            return { PartNumber, ETag: res.CopyPartResult?.ETag };
          }),
        );
        parts.push(...done);
      }
      await this.client.send(
        new CompleteMultipartUploadCommand({ Bucket: this.bucket, Key: target, UploadId, MultipartUpload: { Parts: parts } }),
      );
    } catch (error) {
      await this.client.send(new AbortMultipartUploadCommand({ Bucket: this.bucket, Key: target, UploadId })).catch(() => undefined);
      throw error;
    }
  }

  private info(
    key: string,
    size: number,
    res: { ContentType?: string; Metadata?: Record<string, string>; LastModified?: Date },
  ): BlobInfo {
    const meta = res.Metadata ?? {};
    const created = meta[META_CREATED] ? new Date(meta[META_CREATED]) : undefined;
    return {
      key,
      size,
      contentType: res.ContentType || DEFAULT_CONTENT_TYPE,
      md5: meta[META_MD5] ?? '',
      sha256: meta[META_SHA256] ?? '',
      createdAt: created && !Number.isNaN(created.getTime()) ? created : (res.LastModified ?? new Date(0)),
    };
  }

  async get(key: string, range?: ByteRange): Promise<BlobRead> {
    validateKey(key);
    validateRange(range);
    let res;
    try {
      res = await this.client.send(
        new GetObjectCommand({
          Bucket: this.bucket,
          Key: key,
          ...(range ? { Range: `bytes=${range.start}-${range.end ?? ''}` } : {}),
        }),
      );
    } catch (error) {
      if (isNotFound(error)) throw new NotFoundError(`Blob not found: ${key}`, { key });
      if (statusOf(error) === 416) throw new InputError('Range not satisfiable', { start: range?.start });
      throw error;
    }
    // A ranged answer carries the whole size in `Content-Range: bytes s-e/total`.
    const total = res.ContentRange ? Number(res.ContentRange.split('/')[1]) : undefined;
    const size = total !== undefined && Number.isFinite(total) ? total : (res.ContentLength ?? 0);
    const body = res.Body;
    if (!(body instanceof Readable)) throw new Error('S3 returned a body that is not a Node stream');
    return { info: this.info(key, size, res), body };
  }

  async head(key: string): Promise<BlobInfo | undefined> {
    validateKey(key);
    return this.headUnchecked(key);
  }

  private async headUnchecked(key: string): Promise<(BlobInfo & { etag?: string }) | undefined> {
    try {
      const res = await this.client.send(new HeadObjectCommand({ Bucket: this.bucket, Key: key }));
      return { ...this.info(key, res.ContentLength ?? 0, res), ...(res.ETag ? { etag: res.ETag } : {}) };
    } catch (error) {
      if (isNotFound(error)) return undefined;
      throw error;
    }
  }

  async ensureDigests(key: string): Promise<BlobInfo> {
    validateKey(key);
    const found = await this.headUnchecked(key);
    if (!found) throw new NotFoundError(`Blob not found: ${key}`, { key });
    const { etag, ...info } = found;
    if (info.md5 && info.sha256) return info;
    const { body } = await this.get(key);
    const meter = new BlobMeter();
    await new Promise<void>((resolve, reject) => {
      pipeline(body as Readable, meter, (error) => (error ? reject(error) : resolve()));
      meter.resume(); // only the digests are wanted
    });
    const d = meter.digests();
    try {
      // The copy only applies if the blob is still the one just read.
      await this.copyWithMetadata(key, key, d.size, info.contentType, this.metadata(d, info.createdAt), etag);
    } catch (error) {
      if (statusOf(error) === 412) throw new ConflictError(`Blob changed while its digests were computed: ${key}`, { key });
      throw error;
    }
    return { ...info, size: d.size, md5: d.md5, sha256: d.sha256 };
  }

  async delete(key: string): Promise<void> {
    validateKey(key);
    // S3 deletes are idempotent already: a missing key answers 204.
    await this.client.send(new DeleteObjectCommand({ Bucket: this.bucket, Key: key }));
  }

  /** Pages of keys under the prefix, without the staging area. */
  private async *keyPages(prefix: string): AsyncGenerator<string[]> {
    let ContinuationToken: string | undefined;
    do {
      const res = await this.client.send(
        new ListObjectsV2Command({ Bucket: this.bucket, Prefix: prefix, ...(ContinuationToken ? { ContinuationToken } : {}) }),
      );
      const keys = (res.Contents ?? []).map((o) => o.Key!).filter((k) => k && !k.startsWith(RESERVED_PREFIX));
      if (keys.length) yield keys;
      ContinuationToken = res.IsTruncated ? res.NextContinuationToken : undefined;
    } while (ContinuationToken);
  }

  async deletePrefix(prefix: string): Promise<number> {
    validatePrefix(prefix);
    let count = 0;
    for await (const keys of this.keyPages(prefix)) {
      // A page holds at most 1000 keys, which is also DeleteObjects' limit.
      const res = await this.client.send(
        new DeleteObjectsCommand({ Bucket: this.bucket, Delete: { Objects: keys.map((Key) => ({ Key })), Quiet: true } }),
      );
      const failed = res.Errors ?? [];
      if (failed.length) {
        throw new Error(`Could not delete ${failed.length} blobs under "${prefix}": ${failed[0]?.Code} ${failed[0]?.Message}`);
      }
      count += keys.length;
    }
    return count;
  }

  async *list(prefix: string): AsyncIterable<BlobInfo> {
    validatePrefix(prefix);
    for await (const keys of this.keyPages(prefix)) {
      for (let i = 0; i < keys.length; i += LIST_HEAD_CONCURRENCY) {
        const infos = await Promise.all(keys.slice(i, i + LIST_HEAD_CONCURRENCY).map((k) => this.headUnchecked(k)));
        for (const found of infos) {
          if (!found) continue; // deleted since it was listed
          const { etag: _etag, ...info } = found;
          yield info;
        }
      }
    }
  }

  async presignPut(key: string, options: PresignPutOptions): Promise<PresignedPut> {
    validateKey(key);
    validateExpiry(options.expiresInSeconds);
    const signingDate = this.clock.now();
    // The presigner never signs Content-Type, so S3 stores whatever the uploader sends; the header
    // is returned so well-behaved clients send the declared one.
    const url = await getSignedUrl(
      this.client,
      new PutObjectCommand({ Bucket: this.bucket, Key: key, ...(options.contentType ? { ContentType: options.contentType } : {}) }),
      { expiresIn: options.expiresInSeconds, signingDate },
    );
    const headers: Record<string, string> = options.contentType ? { 'Content-Type': options.contentType } : {};
    return { url, method: 'PUT', headers, expiresAt: new Date(signingDate.getTime() + options.expiresInSeconds * 1000) };
  }

  async presignGet(key: string, options: PresignGetOptions): Promise<PresignedGet> {
    validateKey(key);
    validateExpiry(options.expiresInSeconds);
    const signingDate = this.clock.now();
    const url = await getSignedUrl(
      this.client,
      new GetObjectCommand({
        Bucket: this.bucket,
        Key: key,
        ...(options.filename !== undefined ? { ResponseContentDisposition: attachmentDisposition(options.filename) } : {}),
      }),
      { expiresIn: options.expiresInSeconds, signingDate },
    );
    return { url, expiresAt: new Date(signingDate.getTime() + options.expiresInSeconds * 1000) };
  }

  async ping(): Promise<void> {
    await this.client.send(new HeadBucketCommand({ Bucket: this.bucket }));
  }

  /** Closes the HTTP connection pool. */
  destroy(): void {
    this.client.destroy();
  }
}
