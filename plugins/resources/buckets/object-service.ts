/**
 * Objects: metadata checked against the bucket schema, blobs stored and described, bucket totals kept
 * in the same transaction as the row, blobs removed when the object goes, events after each change.
 */
import type { Knex } from 'knex';
import type { BlobInfo, BlobStore } from '../../../kernel/blobs/blob-store.js';
import type { Clock } from '../../../kernel/clock.js';
import { ConflictError, InputError, NotFoundError, RequestValidationError, type FieldProblem } from '../../../kernel/errors.js';
import type { EventInput } from '../../../kernel/events/event-bus.js';
import type { Announcer } from '../../../kernel/events/announcer.js';
import { newId } from '../../../kernel/ids.js';
import { isUniqueViolation } from '../../../kernel/http/values.js';
import type { BucketRow, BucketStore } from './bucket-store.js';
import { blobPrefix } from './bucket-service.js';
import { checkBlobInputs, type BlobIngest, type BlobInput, type StoredBlob } from './ingest.js';
import type { ObjectRow, ObjectStore } from './object-store.js';
import { checkObject, type PropertyType } from './schema.js';
import type { UploadRow } from './upload-store.js';

/**
 * Blob writes of one bulk request in flight at once: each blob is its own file (or S3 object), and a small
 * one spends its time waiting on a handful of file system calls, so many overlap well.
 */
const BLOB_WRITES_AT_ONCE = 32;

export interface ObjectInput {
  key?: string;
  blobs?: BlobInput[];
  metadata?: Record<string, unknown>;
  /** Resolved by the caller (ownerFor): a user-scoped key's own principal, or what a `write` key named. */
  owner_principal?: string | null;
}

function createdEvent(row: ObjectRow): EventInput {
  return {
    type: 'object.created',
    organization_id: row.organization_id,
    data: { object_id: row.object_id, bucket_id: row.bucket_id, namespace_id: row.namespace_id, key: row.key, size_bytes: row.size_bytes },
  };
}

export class ObjectService {
  constructor(
    private readonly db: Knex,
    private readonly buckets: BucketStore,
    private readonly objects: ObjectStore,
    private readonly ingest: BlobIngest,
    private readonly blobs: BlobStore,
    private readonly announcer: Announcer,
    private readonly clock: Clock,
  ) {}

  /** The object, if the caller may see it (a user-scoped key's principal sees only what it owns). */
  async get(bucket: BucketRow, objectId: string, principalId: string | null = null): Promise<ObjectRow> {
    const row = await this.objects.find(bucket.organization_id, bucket.bucket_id, objectId, principalId);
    if (!row) throw new NotFoundError(`Object '${objectId}' not found in bucket '${bucket.bucket_name}'`, { object_id: objectId });
    return row;
  }

  async create(bucket: BucketRow, createdBy: string | null, input: ObjectInput, principalId: string | null = null): Promise<ObjectRow> {
    const problems = this.check(bucket, input, ['body']);
    if (problems.length > 0) throw new RequestValidationError(problems);
    const objectId = newId('obj');
    const key = input.key ?? objectId;
    if (await this.objects.keyTaken(bucket.bucket_id, key)) {
      throw new ConflictError(`An object with key '${key}' already exists in this bucket`, { key });
    }
    const stored: StoredBlob[] = [];
    const uploads: UploadRow[] = [];
    try {
      await this.storeBlobs(bucket, objectId, input.blobs ?? [], stored, uploads, principalId);
      return await this.insert(bucket, {
        objectId,
        key,
        metadata: input.metadata ?? {},
        blobs: stored,
        createdBy,
        owner: input.owner_principal ?? null,
        uploads,
      });
    } catch (err) {
      // Nothing half-made stays behind: blobs this request stored are removed (uploads keep theirs).
      await this.removeStored(stored);
      throw err;
    }
  }

  /**
   * Many objects at once, all or none: every input is checked before anything is stored, the rows go in
   * one transaction, and a failure removes every blob the request stored. Uploads are not accepted here.
   */
  async createMany(bucket: BucketRow, createdBy: string | null, inputs: readonly ObjectInput[]): Promise<ObjectRow[]> {
    const problems = inputs.flatMap((input, i) => {
      const at = ['body', 'objects', i];
      const found = this.check(bucket, input, at);
      (input.blobs ?? []).forEach((blob, j) => {
        if (blob.upload_id !== undefined) {
          found.push({ loc: [...at, 'blobs', j, 'upload_id'], msg: 'uploads are attached one object at a time (POST /objects)', type: 'bulk_upload' });
        }
      });
      return found;
    });
    if (problems.length > 0) throw new RequestValidationError(problems);
    const prepared = inputs.map((input) => {
      const objectId = newId('obj');
      return { input, objectId, key: input.key ?? objectId };
    });
    const seen = new Set<string>();
    for (const { key } of prepared) {
      if (seen.has(key)) throw new ConflictError(`Key '${key}' is given twice in this request`, { key });
      seen.add(key);
    }
    const taken = await this.objects.keysTaken(bucket.bucket_id, [...seen]);
    if (taken.length > 0) {
      throw new ConflictError(`${taken.length} key(s) already exist in this bucket: ${taken.slice(0, 10).join(', ')}`, { keys: taken.slice(0, 100) });
    }
    const stored: StoredBlob[][] = prepared.map(() => []);
    try {
      let next = 0;
      await Promise.all(
        Array.from({ length: Math.min(BLOB_WRITES_AT_ONCE, prepared.length) }, async () => {
          while (next < prepared.length) {
            const i = next++;
            await this.storeBlobs(bucket, prepared[i]!.objectId, prepared[i]!.input.blobs ?? [], stored[i]!, [], null);
          }
        }),
      );
      const now = this.clock.now();
      const rows: ObjectRow[] = prepared.map(({ input, objectId, key }, i) => ({
        object_id: objectId,
        organization_id: bucket.organization_id,
        namespace_id: bucket.namespace_id,
        bucket_id: bucket.bucket_id,
        key,
        metadata: input.metadata ?? {},
        blobs: stored[i]!,
        size_bytes: stored[i]!.reduce((sum, b) => sum + b.size_bytes, 0),
        created_by: createdBy,
        owner_principal: input.owner_principal ?? null,
        created_at: now,
        updated_at: now,
      }));
      try {
        await this.objects.insertMany(this.db, bucket.bucket_id, rows);
      } catch (err) {
        if (isUniqueViolation(err)) throw new ConflictError('A key was taken by another request meanwhile; nothing was stored');
        throw err;
      }
      // Never throws (kernel/events/announcer.ts): the clean-up below must not run for committed objects.
      await this.announcer.announceAll(rows.map(createdEvent));
      return rows;
    } catch (err) {
      await this.removeStored(stored.flat());
      throw err;
    }
  }

  /** Schema and blob-source problems of one object input, located under `at` (e.g. ['body', 'objects', 3]). */
  private check(bucket: BucketRow, input: ObjectInput, at: Array<string | number>): FieldProblem[] {
    const blobs = input.blobs ?? [];
    const relocate = (p: FieldProblem): FieldProblem => ({ ...p, loc: [...at, ...p.loc.slice(1)] });
    const problems = [
      ...checkBlobInputs(blobs).map(relocate),
      ...checkObject(bucket.schema, input.metadata ?? {}, blobs.map((b) => b.property), { metadata: [...at, 'metadata'], blobs: [...at, 'blobs'] }),
    ];
    blobs.forEach((blob, i) => {
      const schemaType = bucket.schema.properties[blob.property]?.type;
      if (blob.type && schemaType && blob.type !== schemaType) {
        problems.push({ loc: [...at, 'blobs', i, 'type'], msg: `property '${blob.property}' is a ${schemaType} property, not ${blob.type}`, type: 'schema_type' });
      }
    });
    return problems;
  }

  /** Stores (or adopts, for uploads) an object's blobs, appending each to `stored` as soon as it exists. */
  private async storeBlobs(
    bucket: BucketRow,
    objectId: string,
    blobs: readonly BlobInput[],
    stored: StoredBlob[],
    uploads: UploadRow[],
    principalId: string | null,
  ): Promise<void> {
    for (const [index, blob] of blobs.entries()) {
      const declared = (bucket.schema.properties[blob.property]?.type ?? blob.type) as PropertyType | undefined;
      if (blob.upload_id !== undefined) {
        const upload = await this.finishedUpload(bucket, blob.upload_id, index, principalId);
        uploads.push(upload);
        stored.push(await this.describeUpload(upload, blob.property, declared, index));
      } else {
        stored.push(await this.ingest.store(blob, `${blobPrefix(bucket)}${objectId}/${blob.property}`, declared, index));
      }
    }
  }

  private async removeStored(stored: readonly StoredBlob[]): Promise<void> {
    await Promise.allSettled(stored.filter((b) => b.source !== 'upload').map((b) => this.blobs.delete(b.storage_key)));
  }

  /**
   * Creates the object of a confirmed upload (the upload's blob becomes the object's), described by the
   * `info` confirm verified, never by a second read that could see other bytes.
   */
  async createFromUpload(
    bucket: BucketRow,
    upload: UploadRow,
    info: BlobInfo,
    contentType: string,
    trxHook?: (trx: Knex, object: ObjectRow) => Promise<void>,
  ): Promise<ObjectRow> {
    const declared = bucket.schema.properties[upload.property]?.type as PropertyType | undefined;
    const blob = this.ingest.describe(upload.property, upload.storage_key, info, contentType, declared, 0, {
      source: 'upload',
      sourceUrl: null,
      filename: upload.filename,
      uploadId: upload.upload_id,
    });
    return this.insert(bucket, {
      objectId: newId('obj'),
      key: upload.object_key,
      metadata: upload.metadata,
      blobs: [blob],
      createdBy: upload.created_by,
      owner: upload.owner_principal,
      uploads: [],
      ...(trxHook ? { trxHook } : {}),
    });
  }

  private async insert(
    bucket: BucketRow,
    o: {
      objectId: string;
      key: string | null;
      metadata: Record<string, unknown>;
      blobs: StoredBlob[];
      createdBy: string | null;
      owner: string | null;
      uploads: UploadRow[];
      trxHook?: (trx: Knex, object: ObjectRow) => Promise<void>;
    },
  ): Promise<ObjectRow> {
    const now = this.clock.now();
    const row: ObjectRow = {
      object_id: o.objectId,
      organization_id: bucket.organization_id,
      namespace_id: bucket.namespace_id,
      bucket_id: bucket.bucket_id,
      key: o.key ?? o.objectId,
      metadata: o.metadata,
      blobs: o.blobs,
      size_bytes: o.blobs.reduce((sum, b) => sum + b.size_bytes, 0),
      created_by: o.createdBy,
      owner_principal: o.owner,
      created_at: now,
      updated_at: now,
    };
    try {
      await this.db.transaction(async (trx) => {
        await this.objects.insert(trx, row);
        await this.buckets.adjustTotals(trx, bucket.bucket_id, 1, row.size_bytes);
        for (const upload of o.uploads) {
          const claimed = await trx('uploads').where({ upload_id: upload.upload_id }).whereNull('object_id').update({ object_id: row.object_id });
          if (claimed !== 1) throw new ConflictError(`Upload '${upload.upload_id}' already belongs to another object`);
        }
        await o.trxHook?.(trx, row);
      });
    } catch (err) {
      if (isUniqueViolation(err)) throw new ConflictError(`An object with key '${row.key}' already exists in this bucket`, { key: row.key });
      throw err;
    }
    await this.announcer.announce(createdEvent(row));
    return row;
  }

  async updateMetadata(bucket: BucketRow, objectId: string, metadata: Record<string, unknown>, principalId: string | null = null): Promise<ObjectRow> {
    const before = await this.get(bucket, objectId, principalId);
    const problems = checkObject(bucket.schema, metadata, before.blobs.map((b) => b.property), {
      metadata: ['body', 'metadata'],
      blobs: ['body', 'blobs'],
    });
    if (problems.length > 0) throw new RequestValidationError(problems);
    const at = this.clock.now();
    await this.objects.updateMetadata(this.db, objectId, metadata, at);
    await this.announcer.announce({
      type: 'object.updated',
      organization_id: bucket.organization_id,
      data: { object_id: objectId, bucket_id: bucket.bucket_id, namespace_id: bucket.namespace_id },
    });
    return { ...before, metadata, updated_at: at };
  }

  async delete(bucket: BucketRow, objectId: string, principalId: string | null = null): Promise<ObjectRow> {
    const row = await this.get(bucket, objectId, principalId);
    await this.db.transaction(async (trx) => {
      await this.objects.delete(trx, row.object_id);
      await this.buckets.adjustTotals(trx, bucket.bucket_id, -1, -row.size_bytes);
    });
    await Promise.all(row.blobs.map((b) => this.blobs.delete(b.storage_key)));
    await this.announcer.announce({
      type: 'object.deleted',
      organization_id: row.organization_id,
      data: { object_id: row.object_id, bucket_id: row.bucket_id, namespace_id: row.namespace_id, key: row.key },
    });
    return row;
  }

  private async finishedUpload(bucket: BucketRow, uploadId: string, index: number, principalId: string | null): Promise<UploadRow> {
    const query = this.db<UploadRow>('uploads').where({ upload_id: uploadId, bucket_id: bucket.bucket_id });
    if (principalId) query.where({ owner_principal: principalId });
    const upload = await query.first();
    if (!upload) throw new NotFoundError(`Upload '${uploadId}' not found in bucket '${bucket.bucket_name}'`, { upload_id: uploadId });
    if (upload.status !== 'COMPLETED') {
      throw new InputError(`Upload '${uploadId}' is ${upload.status}; confirm it before using it in an object`, { index });
    }
    if (upload.object_id) throw new ConflictError(`Upload '${uploadId}' already belongs to object '${upload.object_id}'`);
    return upload;
  }

  private async describeUpload(upload: UploadRow, property: string, declared: PropertyType | undefined, index: number): Promise<StoredBlob> {
    const info = await this.blobs.ensureDigests(upload.storage_key);
    const contentType = await this.ingest.sniffStored(upload.storage_key, { declaredType: upload.content_type ?? undefined, filename: upload.filename });
    return this.ingest.describe(property, upload.storage_key, info, contentType, declared, index, {
      source: 'upload',
      sourceUrl: null,
      filename: upload.filename,
      uploadId: upload.upload_id,
    });
  }
}
