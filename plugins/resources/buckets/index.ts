/**
 * Buckets, their objects and uploads: every object's blobs live in the BlobStore, its row in the
 * database. Namespace-scoped: every route resolves X-Namespace first (the kernel does).
 */
import { NotAllowedError } from '../../../kernel/errors.js';
import { parseFilter } from '../../../kernel/filters/filter.js';
import type { RequestContext } from '../../../kernel/http/context.js';
import { callerOf } from '../../../kernel/http/handlers.js';
import { PURGE_ORDER } from '../../../kernel/namespace-purge.js';
import { defineResource } from '../../../kernel/plugins.js';
import type { ObjectCatalog as ObjectCatalogShape } from '../../../kernel/processing.js';
import {
  BlobStore,
  Clock,
  Config,
  DatabaseHandle,
  Announcer,
  Lifecycle,
  NamespacePurges,
  ObjectCatalog,
  PresignedPutGate,
  ReferenceRegistry,
  ResourceIdentifiers,
  TaskQueue,
  createToken,
  type Services,
} from '../../../kernel/tokens.js';
import { BucketStore, type BucketRow, type Scope } from './bucket-store.js';
import { BucketService, PURGE_BLOBS_TASK } from './bucket-service.js';
import { BlobIngest } from './ingest.js';
import { bucketMigrations } from './migrations.js';
import { ObjectService } from './object-service.js';
import { ObjectStore, type SortField } from './object-store.js';
import { isSchemaless, type BucketSchema } from './schema.js';
import { toBucket, toConfirmation, toObject, toUpload } from './serialize.js';
import { CLEANUP_TASK, CONFIRM_TASK, UploadService } from './upload-service.js';
import { UploadStore } from './upload-store.js';
import { UploadPutGate } from './upload-gate.js';

const Buckets = createToken<BucketService>('buckets.BucketService');
const Objects = createToken<ObjectService>('buckets.ObjectService');
const Uploads = createToken<UploadService>('buckets.UploadService');
export const Stores = createToken<{ buckets: BucketStore; objects: ObjectStore; uploads: UploadStore }>('buckets.Stores');
const PURGE_NAMESPACE_TASK = 'buckets.purge_namespace';

function scopeOf(ctx: RequestContext): Scope {
  const caller = callerOf(ctx);
  if (!ctx.namespace) throw new Error('bucket routes declare X-Namespace as required');
  return { organizationId: caller.organizationId, namespaceId: ctx.namespace.id };
}

function bucketOf(ctx: RequestContext, services: Services, identifier: string): Promise<BucketRow> {
  return services.get(Buckets).get(scopeOf(ctx), identifier);
}

const creator = (ctx: RequestContext) => callerOf(ctx).userEmail;

/** A user-scoped (`usr_sk_`) key's principal: what it may see of objects and uploads. Null: everything. */
const viewer = (ctx: RequestContext) => callerOf(ctx).principalId;

/**
 * Whom a new object or upload belongs to: a user-scoped key's own principal (it cannot name another);
 * for other keys (the operation already needs `write`), the principal they name, or nobody.
 */
function ownerFor(ctx: RequestContext, requested: string | undefined): string | null {
  const principal = callerOf(ctx).principalId;
  if (!principal) return requested ?? null;
  if (requested !== undefined && requested !== principal) {
    throw new NotAllowedError(`A user-scoped key creates objects for its own principal only, not for '${requested}'`, { owner_principal: requested });
  }
  return principal;
}

export default defineResource({
  name: 'buckets',
  migrations: bucketMigrations,
  services: (container, services) => {
    const config = services.get(Config);
    const db = services.get(DatabaseHandle).db;
    const blobs = services.get(BlobStore);
    const announcer = services.get(Announcer);
    const clock = services.get(Clock);
    const tasks = services.get(TaskQueue);
    const bucketStore = new BucketStore(db);
    const objectStore = new ObjectStore(services.get(DatabaseHandle));
    const uploadStore = new UploadStore(db);
    const ingest = new BlobIngest(blobs, {
      maxBytes: config.maxUploadBytes,
      allowPrivateUrls: config.allowPrivateUrlFetch,
      urlTimeoutMs: config.urlFetchTimeoutMs,
    });
    const objects = new ObjectService(db, bucketStore, objectStore, ingest, blobs, announcer, clock);
    container.bind(Stores).toConstantValue({ buckets: bucketStore, objects: objectStore, uploads: uploadStore });
    container.bind(Buckets).toConstantValue(new BucketService(db, bucketStore, services.get(ReferenceRegistry), tasks, announcer, clock));
    container.bind(Objects).toConstantValue(objects);
    const catalog: ObjectCatalogShape = {
      find: async (organizationId, bucketId, objectIds) =>
        (await objectStore.findMany(organizationId, bucketId, objectIds)).map((row) => ({
          object_id: row.object_id,
          bucket_id: row.bucket_id,
          namespace_id: row.namespace_id,
          key: row.key,
          metadata: row.metadata,
          blobs: row.blobs.map((b) => ({
            property: b.property, storage_key: b.storage_key, content_type: b.content_type, size_bytes: b.size_bytes, filename: b.filename,
            ...(b.inline_text !== undefined ? { inline_text: b.inline_text, md5: b.md5, sha256: b.sha256 } : {}),
          })),
          created_by: row.created_by,
          owner_principal: row.owner_principal,
          created_at: row.created_at,
        })),
      owners: (organizationId, bucketId, objectIds) => objectStore.ownersOf(organizationId, bucketId, objectIds),
      fieldsOf: async (organizationId, bucketId) => {
        const row = (await db('buckets').where({ organization_id: organizationId, bucket_id: bucketId }).first('schema')) as { schema: BucketSchema } | undefined;
        if (!row || isSchemaless(row.schema)) return null;
        return [...Object.keys(row.schema.properties), 'object_id', 'key'];
      },
    };
    container.bind(ObjectCatalog).toConstantValue(catalog);
    container.bind(PresignedPutGate).toConstantValue(new UploadPutGate(db, clock));
    container.bind(Uploads).toConstantValue(
      new UploadService(uploadStore, objects, objectStore, ingest, blobs, tasks, announcer, clock, config.maxUploadBytes),
    );
  },

  setup: ({ services, log }) => {
    const tasks = services.get(TaskQueue);
    const blobs = services.get(BlobStore);
    const stores = services.get(Stores);
    const db = services.get(DatabaseHandle).db;

    services.get(ResourceIdentifiers).register('bucket', async ({ organizationId, namespace, identifier }) => {
      if (!namespace) return undefined;
      const bucket = await stores.buckets.find({ organizationId, namespaceId: namespace.id }, identifier);
      return bucket ? [bucket.bucket_id, bucket.bucket_name] : undefined;
    });

    services.get(ResourceIdentifiers).registerLocator('bucket', async (organizationId, id) => {
      const row = await db('buckets').where({ organization_id: organizationId, bucket_id: id }).first('namespace_id');
      return (row as { namespace_id: string } | undefined)?.namespace_id;
    });

    tasks.register(CONFIRM_TASK, async ({ task }) =>
      services.get(Uploads).confirmInBackground(String(task.payload.upload_id), (upload) =>
        stores.buckets.find({ organizationId: upload.organization_id, namespaceId: upload.namespace_id }, upload.bucket_id),
      ),
    );
    tasks.register(CLEANUP_TASK, async ({ log: taskLog }) => ({ cleaned: await services.get(Uploads).cleanupExpired(taskLog) }));
    tasks.register(PURGE_BLOBS_TASK, async ({ task }) => ({ deleted: await blobs.deletePrefix(String(task.payload.prefix)) }));
    // A deleted namespace takes its buckets, objects, uploads and blobs with it (after the collections reading them).
    const purgeNamespace = async ({ organizationId, namespaceId }: { organizationId: string; namespaceId: string }) => {
      const removed = (await db('buckets').where({ organization_id: organizationId, namespace_id: namespaceId }).delete().returning('bucket_id')).length;
      const deleted = await blobs.deletePrefix(`${organizationId}/${namespaceId}/`);
      return { buckets: removed, blobs: deleted };
    };
    services.get(NamespacePurges).register('buckets', PURGE_ORDER.buckets, purgeNamespace);
    // Queued by earlier versions, before the namespace purge task took this over.
    tasks.register(PURGE_NAMESPACE_TASK, async ({ task }) => {
      const { organization_id: organizationId, namespace_id: namespaceId } = task.payload as { organization_id: string; namespace_id: string };
      return purgeNamespace({ organizationId, namespaceId });
    });

    const lifecycle = services.get(Lifecycle);

    const interval = services.get(Config).uploadCleanupIntervalMs;
    if (interval > 0) {
      const timer = setInterval(() => {
        tasks.enqueue(CLEANUP_TASK, {}, { dedupeKey: CLEANUP_TASK }).catch((err: unknown) => log.error({ err }, 'could not schedule upload cleanup'));
      }, interval);
      timer.unref();
      lifecycle.onShutdown('buckets: upload cleanup timer', () => clearInterval(timer));
    }
  },

  handlers: {
    createBucket: async ({ body, ctx, services }) => {
      const row = await services.get(Buckets).create(scopeOf(ctx), creator(ctx), body);
      return { status: 201, body: toBucket(row) };
    },
    listBuckets: async ({ query, ctx, services }) => {
      const limit = query.limit ?? 100;
      const offset = query.offset ?? 0;
      const rows = await services.get(Buckets).list(scopeOf(ctx), query.search);
      const page = rows.slice(offset, offset + limit);
      return { status: 200, body: { results: page.map(toBucket), total: rows.length, limit, offset, has_next: offset + limit < rows.length } };
    },
    getBucket: async ({ params, ctx, services }) => ({ status: 200, body: toBucket(await bucketOf(ctx, services, params.bucket_identifier)) }),
    updateBucket: async ({ params, body, ctx, services }) => {
      const row = await services.get(Buckets).update(scopeOf(ctx), params.bucket_identifier, body);
      return { status: 200, body: toBucket(row) };
    },
    deleteBucket: async ({ params, query, ctx, services }) => {
      const { bucket, objectsDeleted } = await services.get(Buckets).delete(scopeOf(ctx), params.bucket_identifier, query.force ?? false);
      return { status: 200, body: { bucket_id: bucket.bucket_id, bucket_name: bucket.bucket_name, deleted: true, objects_deleted: objectsDeleted } };
    },

    createObject: async ({ params, body, ctx, services }) => {
      const bucket = await bucketOf(ctx, services, params.bucket_identifier);
      const row = await services.get(Objects).create(bucket, creator(ctx), { ...body, owner_principal: ownerFor(ctx, body.owner_principal) }, viewer(ctx));
      return { status: 201, body: await toObject(row, services.get(BlobStore), false) };
    },
    createObjects: async ({ params, body, ctx, services }) => {
      const bucket = await bucketOf(ctx, services, params.bucket_identifier);
      const inputs = body.objects.map((input) => ({ ...input, owner_principal: ownerFor(ctx, input.owner_principal) }));
      const rows = await services.get(Objects).createMany(bucket, creator(ctx), inputs);
      const blobs = services.get(BlobStore);
      const results = [];
      for (const row of rows) results.push(await toObject(row, blobs, false));
      return { status: 201, body: { results, created: rows.length } };
    },
    listObjects: async ({ params, query, ctx, services }) => {
      const bucket = await bucketOf(ctx, services, params.bucket_identifier);
      const { rows, nextCursor } = await services.get(Stores).objects.list({
        bucketId: bucket.bucket_id,
        organizationId: bucket.organization_id,
        sort: 'created_at',
        direction: 'desc',
        principalId: viewer(ctx),
        limit: query.limit ?? 100,
        ...(query.prefix ? { prefix: query.prefix } : {}),
        ...(query.cursor ? { cursor: query.cursor } : {}),
      });
      const blobs = services.get(BlobStore);
      const results = await Promise.all(rows.map((r) => toObject(r, blobs, query.return_presigned_urls ?? false)));
      return { status: 200, body: { results, has_next: nextCursor !== null, next_cursor: nextCursor } };
    },
    searchObjects: async ({ params, body, ctx, services }) => {
      const bucket = await bucketOf(ctx, services, params.bucket_identifier);
      const { rows, nextCursor } = await services.get(Stores).objects.list({
        bucketId: bucket.bucket_id,
        organizationId: bucket.organization_id,
        sort: (body.sort?.field ?? 'created_at') as SortField,
        direction: body.sort?.direction ?? 'desc',
        principalId: viewer(ctx),
        limit: body.limit ?? 100,
        ...(body.filters ? { filter: parseFilter(body.filters) } : {}),
        ...(body.prefix ? { prefix: body.prefix } : {}),
        ...(body.cursor ? { cursor: body.cursor } : {}),
      });
      const blobs = services.get(BlobStore);
      const results = await Promise.all(rows.map((r) => toObject(r, blobs, body.return_presigned_urls ?? false)));
      return { status: 200, body: { results, has_next: nextCursor !== null, next_cursor: nextCursor } };
    },
    getObject: async ({ params, query, ctx, services }) => {
      const bucket = await bucketOf(ctx, services, params.bucket_identifier);
      const row = await services.get(Objects).get(bucket, params.object_id, viewer(ctx));
      return { status: 200, body: await toObject(row, services.get(BlobStore), query.return_presigned_urls ?? true) };
    },
    updateObject: async ({ params, body, ctx, services }) => {
      const bucket = await bucketOf(ctx, services, params.bucket_identifier);
      const row = await services.get(Objects).updateMetadata(bucket, params.object_id, body.metadata, viewer(ctx));
      return { status: 200, body: await toObject(row, services.get(BlobStore), false) };
    },
    deleteObject: async ({ params, ctx, services }) => {
      const bucket = await bucketOf(ctx, services, params.bucket_identifier);
      const row = await services.get(Objects).delete(bucket, params.object_id, viewer(ctx));
      return { status: 200, body: { object_id: row.object_id, deleted: true } };
    },

    createUpload: async ({ params, body, ctx, services }) => {
      const bucket = await bucketOf(ctx, services, params.bucket_identifier);
      const { upload, presigned } = await services.get(Uploads).create(bucket, creator(ctx), { ...body, owner_principal: ownerFor(ctx, body.owner_principal) });
      return { status: 201, body: toUpload(upload, presigned) };
    },
    listUploads: async ({ params, query, ctx, services }) => {
      const bucket = await bucketOf(ctx, services, params.bucket_identifier);
      const { rows, nextCursor } = await services.get(Stores).uploads.list(
        bucket.bucket_id,
        query.status as Parameters<UploadStore['list']>[1],
        query.limit ?? 100,
        query.cursor,
        viewer(ctx),
      );
      return { status: 200, body: { results: rows.map((r) => toUpload(r)), has_next: nextCursor !== null, next_cursor: nextCursor } };
    },
    getUpload: async ({ params, ctx, services }) => {
      const bucket = await bucketOf(ctx, services, params.bucket_identifier);
      return { status: 200, body: toUpload(await services.get(Uploads).get(bucket, params.upload_id, viewer(ctx))) };
    },
    confirmUpload: async ({ params, query, body, ctx, services }) => {
      const bucket = await bucketOf(ctx, services, params.bucket_identifier);
      const async = query.async ?? false;
      const row = await services.get(Uploads).confirm(bucket, params.upload_id, body ?? {}, async, viewer(ctx));
      return async ? { status: 202, body: toConfirmation(row) } : { status: 200, body: toConfirmation(row) };
    },
  },
});
