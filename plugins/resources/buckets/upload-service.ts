/**
 * Uploads exactly as the spec's state machine: created PENDING with a presigned PUT URL; confirmed
 * synchronously (→ COMPLETED with `object_id`) or asynchronously (→ PROCESSING with `task_id`, COMPLETED
 * later); a failed check leaves the upload PENDING; unconfirmed uploads past expiry are cleaned up.
 */
import type { BlobInfo, BlobStore } from '../../../kernel/blobs/blob-store.js';
import type { Clock } from '../../../kernel/clock.js';
import { ApiError, ConflictError, InputError, NotFoundError, PayloadTooLargeError, RequestValidationError } from '../../../kernel/errors.js';
import type { Announcer } from '../../../kernel/events/announcer.js';
import { newId } from '../../../kernel/ids.js';
import type { TaskQueue } from '../../../kernel/tasks/task-queue.js';
import type { Logger } from '../../../kernel/logger.js';
import type { BucketRow } from './bucket-store.js';
import { blobPrefix } from './bucket-service.js';
import type { BlobIngest } from './ingest.js';
import type { ObjectService } from './object-service.js';
import type { ObjectStore } from './object-store.js';
import { BLOB_TYPES, checkObject, contentFits, isSchemaless } from './schema.js';
import type { UploadRow, UploadStore } from './upload-store.js';

export const CONFIRM_TASK = 'uploads.confirm';
export const CLEANUP_TASK = 'uploads.cleanup';

export interface UploadInput {
  filename: string;
  content_type?: string;
  file_size_bytes?: number;
  property?: string;
  key?: string;
  metadata?: Record<string, unknown>;
  create_object?: boolean;
  expires_in_seconds?: number;
  /** Resolved by the caller (ownerFor), like an object's. */
  owner_principal?: string | null;
}

export interface ConfirmInput {
  etag?: string | null;
  file_size_bytes?: number | null;
}

export interface Presigned {
  url: string;
  headers: Record<string, string>;
}

/** `"abc"`, `W/"abc"` and `abc` are the same etag. */
export function normalizeEtag(etag: string): string {
  return etag.trim().replace(/^W\//i, '').replace(/^"(.*)"$/, '$1').toLowerCase();
}

export class UploadService {
  constructor(
    private readonly uploads: UploadStore,
    private readonly objects: ObjectService,
    private readonly objectStore: ObjectStore,
    private readonly ingest: BlobIngest,
    private readonly blobs: BlobStore,
    private readonly tasks: TaskQueue,
    private readonly announcer: Announcer,
    private readonly clock: Clock,
    private readonly maxUploadBytes: number,
  ) {}

  /** The upload, if the caller may see it (a user-scoped key's principal sees only its own). */
  async get(bucket: BucketRow, uploadId: string, principalId: string | null = null): Promise<UploadRow> {
    const row = await this.uploads.find(bucket.bucket_id, uploadId, principalId);
    if (!row) throw new NotFoundError(`Upload '${uploadId}' not found in bucket '${bucket.bucket_name}'`, { upload_id: uploadId });
    return row;
  }

  async create(bucket: BucketRow, createdBy: string | null, input: UploadInput): Promise<{ upload: UploadRow; presigned: Presigned }> {
    if (input.file_size_bytes !== undefined && input.file_size_bytes > this.maxUploadBytes) {
      throw new PayloadTooLargeError(`file_size_bytes ${input.file_size_bytes} is above the maximum upload size of ${this.maxUploadBytes} bytes`, {
        max_size_bytes: this.maxUploadBytes,
      });
    }
    const property = input.property ?? this.defaultProperty(bucket);
    const createObject = input.create_object ?? true;
    const metadata = input.metadata ?? {};
    if (createObject) {
      const problems = checkObject(bucket.schema, metadata, [property], { metadata: ['body', 'metadata'], blobs: ['body', 'property'] })
        .map((p) => (p.loc[1] === 'property' ? { ...p, loc: ['body', 'property'] } : p));
      if (problems.length > 0) throw new RequestValidationError(problems);
      if (input.key && (await this.objectStore.keyTaken(bucket.bucket_id, input.key))) {
        throw new ConflictError(`An object with key '${input.key}' already exists in this bucket`, { key: input.key });
      }
    }
    const now = this.clock.now();
    const expiresIn = input.expires_in_seconds ?? 3600;
    const uploadId = newId('upl');
    const maxBytes = input.file_size_bytes ?? this.maxUploadBytes;
    const storageKey = `${blobPrefix(bucket)}uploads/${uploadId}`;
    const presigned = await this.blobs.presignPut(storageKey, {
      expiresInSeconds: expiresIn,
      maxBytes,
      ...(input.content_type ? { contentType: input.content_type } : {}),
    });
    const upload: UploadRow = {
      upload_id: uploadId,
      organization_id: bucket.organization_id,
      namespace_id: bucket.namespace_id,
      bucket_id: bucket.bucket_id,
      status: 'PENDING',
      filename: input.filename,
      content_type: input.content_type ?? null,
      file_size_bytes: input.file_size_bytes ?? null,
      max_size_bytes: maxBytes,
      property,
      object_key: input.key ?? null,
      metadata,
      create_object: createObject,
      storage_key: storageKey,
      expires_at: presigned.expiresAt,
      expected_etag: null,
      expected_size: null,
      etag: null,
      file_hash: null,
      stored_size: null,
      object_id: null,
      task_id: null,
      error: null,
      created_by: createdBy,
      owner_principal: input.owner_principal ?? null,
      verified_at: null,
      completed_at: null,
      created_at: now,
    };
    await this.uploads.insert(upload);
    return { upload, presigned: { url: presigned.url, headers: presigned.headers } };
  }

  /** Sync: verifies and completes now. Async: claims the upload (PROCESSING) and hands it to a task. */
  async confirm(bucket: BucketRow, uploadId: string, input: ConfirmInput, async: boolean, principalId: string | null = null): Promise<UploadRow> {
    const upload = await this.get(bucket, uploadId, principalId);
    if (upload.status !== 'PENDING') {
      throw new ConflictError(`Upload '${uploadId}' is already ${upload.status}; it can be confirmed once`, { status: upload.status });
    }
    const info = await this.blobs.head(upload.storage_key);
    if (!info) {
      throw new InputError(`No file is stored for upload '${uploadId}' yet: PUT it to the presigned URL first`, { upload_id: uploadId });
    }
    const expected = { expected_etag: input.etag ?? null, expected_size: input.file_size_bytes ?? null };
    if (!(await this.uploads.transition(uploadId, 'PENDING', { status: 'PROCESSING', ...expected }))) {
      throw new ConflictError(`Upload '${uploadId}' is being confirmed by another request`);
    }
    const claimed: UploadRow = { ...upload, status: 'PROCESSING', ...expected };
    if (async) {
      const task = await this.tasks.enqueue(CONFIRM_TASK, { upload_id: uploadId }, { organizationId: bucket.organization_id, dedupeKey: `confirm:${uploadId}` });
      await this.uploads.update(uploadId, { task_id: task.task_id });
      return { ...claimed, task_id: task.task_id };
    }
    try {
      return await this.verifyAndComplete(bucket, claimed);
    } catch (err) {
      // A failed check leaves the upload PENDING, so the client can fix the file or the request and confirm again.
      await this.uploads.transition(uploadId, 'PROCESSING', { status: 'PENDING', error: err instanceof Error ? err.message : String(err) });
      throw err;
    }
  }

  /** The task behind `async=true`. Check failures end the upload as FAILED; anything else is retried. */
  async confirmInBackground(uploadId: string, bucketOf: (upload: UploadRow) => Promise<BucketRow | undefined>): Promise<Record<string, unknown>> {
    const upload = await this.uploads.findById(uploadId);
    if (!upload || upload.status !== 'PROCESSING') return { skipped: upload?.status ?? 'missing' };
    const bucket = await bucketOf(upload);
    try {
      if (!bucket) throw new NotFoundError('The bucket of this upload no longer exists');
      const done = await this.verifyAndComplete(bucket, upload);
      return { status: done.status, object_id: done.object_id };
    } catch (err) {
      if (!(err instanceof ApiError) && !(err instanceof RequestValidationError)) throw err;
      await this.uploads.transition(uploadId, 'PROCESSING', { status: 'FAILED', error: err.message, completed_at: this.clock.now() });
      return { status: 'FAILED', error: err.message };
    }
  }

  private async verifyAndComplete(bucket: BucketRow, upload: UploadRow): Promise<UploadRow> {
    const info: BlobInfo | undefined = await this.blobs.head(upload.storage_key);
    if (!info) throw new InputError(`No file is stored for upload '${upload.upload_id}'`);
    const digests = await this.blobs.ensureDigests(upload.storage_key);
    this.check(upload, digests);
    const contentType = await this.ingest.sniffStored(upload.storage_key, { declaredType: upload.content_type ?? undefined, filename: upload.filename });
    const declared = bucket.schema.properties[upload.property]?.type;
    if (upload.create_object && declared && !contentFits(declared, contentType)) {
      throw new InputError(`The file is ${contentType}, but property '${upload.property}' holds ${declared} content`, { content_type: contentType });
    }
    await this.refuseIfReplaced(upload, digests);
    const now = this.clock.now();
    const completion: Partial<UploadRow> = {
      status: 'COMPLETED',
      etag: digests.md5,
      file_hash: digests.sha256,
      stored_size: digests.size,
      verified_at: now,
      completed_at: now,
      error: null,
    };
    let objectId: string | null = null;
    if (upload.create_object) {
      const object = await this.objects.createFromUpload(bucket, upload, digests, contentType, async (trx, created) => {
        await this.uploads.update(upload.upload_id, { ...completion, object_id: created.object_id }, trx);
      });
      objectId = object.object_id;
    } else {
      await this.uploads.transition(upload.upload_id, 'PROCESSING', { ...completion, status: 'COMPLETED' });
    }
    const done: UploadRow = { ...upload, ...completion, object_id: objectId } as UploadRow;
    await this.announcer.announce({
      type: 'upload.completed',
      organization_id: upload.organization_id,
      data: { upload_id: upload.upload_id, bucket_id: upload.bucket_id, object_id: objectId, size_bytes: digests.size },
    });
    return done;
  }

  /**
   * The local store's PUTs cannot land once the upload left PENDING (the upload gate). An S3 presigned URL
   * cannot be revoked, so there a PUT may replace the file while confirm checks it: the object would
   * then describe bytes it does not hold. Reading the blob's identity once more refuses that case.
   */
  private async refuseIfReplaced(upload: UploadRow, verified: BlobInfo): Promise<void> {
    const now = await this.blobs.head(upload.storage_key);
    if (!now || now.md5 !== verified.md5 || now.size !== verified.size || now.createdAt.getTime() !== verified.createdAt.getTime()) {
      throw new ConflictError(`The file of upload '${upload.upload_id}' changed while it was being confirmed; confirm it again`, {
        upload_id: upload.upload_id,
      });
    }
  }

  private check(upload: UploadRow, info: BlobInfo): void {
    if (upload.expected_etag !== null && normalizeEtag(upload.expected_etag) !== info.md5.toLowerCase()) {
      throw new InputError(`etag ${upload.expected_etag} does not match the stored file (MD5 ${info.md5})`, { etag: upload.expected_etag });
    }
    if (upload.expected_size !== null && upload.expected_size !== info.size) {
      throw new InputError(`file_size_bytes ${upload.expected_size} does not match the stored file (${info.size} bytes)`, {
        file_size_bytes: upload.expected_size,
      });
    }
    if (upload.file_size_bytes !== null && upload.file_size_bytes !== info.size) {
      throw new InputError(`The stored file has ${info.size} bytes, not the ${upload.file_size_bytes} declared when the upload was created`);
    }
    if (info.size > upload.max_size_bytes) {
      throw new PayloadTooLargeError(`The stored file (${info.size} bytes) is above the limit of ${upload.max_size_bytes} bytes`);
    }
  }

  /** Removes the files of uploads nobody confirmed before they expired. */
  async cleanupExpired(log: Logger): Promise<number> {
    let cleaned = 0;
    for (;;) {
      const batch = await this.uploads.expired(this.clock.now(), 100);
      if (batch.length === 0) return cleaned;
      for (const upload of batch) {
        await this.blobs.delete(upload.storage_key);
        const done = await this.uploads.transition(upload.upload_id, 'PENDING', {
          status: 'CANCELED',
          error: 'expired before it was confirmed; its file was removed',
          completed_at: this.clock.now(),
        });
        if (done) cleaned += 1;
      }
      log.info({ cleaned }, 'expired uploads cleaned up');
    }
  }

  private defaultProperty(bucket: BucketRow): string {
    if (isSchemaless(bucket.schema)) return 'content';
    const blobProperties = Object.entries(bucket.schema.properties).filter(([, p]) => BLOB_TYPES.has(p.type)).map(([name]) => name);
    if (blobProperties.length === 1) return blobProperties[0]!;
    throw new RequestValidationError([
      {
        loc: ['body', 'property'],
        msg: blobProperties.length === 0 ? 'the bucket schema has no blob property to upload into' : `name the property: one of ${blobProperties.join(', ')}`,
        type: 'missing',
      },
    ]);
  }
}
