/**
 * Batches: a bucket's objects processed through every collection that reads the bucket, tier by tier
 * (see service.ts for the state machine and runner.ts for how the work runs as tasks).
 */
import { NotFoundError } from '../../../kernel/errors.js';
import type { RequestContext } from '../../../kernel/http/context.js';
import { callerOf } from '../../../kernel/http/handlers.js';
import { PURGE_ORDER } from '../../../kernel/namespace-purge.js';
import { defineResource } from '../../../kernel/plugins.js';
import {
  BlobStore,
  Clock,
  CollectionProcessor,
  Config,
  DatabaseHandle,
  Announcer,
  EventBus,
  Lifecycle,
  NamespacePurges,
  ObjectCatalog,
  ResourceIdentifiers,
  RootLogger,
  TaskBacklog,
  TaskQueue,
  VectorIndex,
  createToken,
  type Services,
} from '../../../kernel/tokens.js';
import { ProgressCountCache, progressFrom } from './aggregate.js';
import { BatchHealthProbe } from './health.js';
import { batchMigrations } from './migrations.js';
import { BatchRunner } from './runner.js';
import { toBatch } from './serialize.js';
import { BatchService } from './service.js';
import { BatchStore, type BatchRow, type BatchStatus } from './store.js';

const Batches = createToken<BatchService>('batches.BatchService');
const Store = createToken<BatchStore>('batches.BatchStore');
const Counts = createToken<ProgressCountCache>('batches.ProgressCountCache');
/** The stall probe (exported for tests and the CLI). */
export const BatchHealth = createToken<BatchHealthProbe>('batches.BatchHealthProbe');
const HEALTH_TASK = 'batches.health';
/** How often a running chunk looks for a cancel: a canceled batch stops within about this long (plus a record). */
const CANCEL_CHECK_MS = 500;

async function bucketIdOf(ctx: RequestContext, services: Services, identifier: string): Promise<string> {
  const found = await services.get(ResourceIdentifiers).find('bucket', {
    organizationId: callerOf(ctx).organizationId,
    namespace: ctx.namespace ?? null,
    identifier,
  });
  if (!found) throw new NotFoundError(`Bucket '${identifier}' not found in this namespace`, { bucket: identifier });
  return found[0]!;
}

async function view(services: Services, row: BatchRow) {
  return toBatch(row, await progressOfRow(services, row));
}

/** `view` for a reply of the batch alone: its id lists may go out already encoded (the status poll's answer). */
async function replyView(services: Services, row: BatchRow) {
  return toBatch(row, await progressOfRow(services, row), services.get(Store).encodedIdLists(row));
}

async function progressOfRow(services: Services, row: BatchRow) {
  const counts = await services.get(Counts).counts(row, async () => (row.status === 'DRAFT' ? [] : services.get(Store).allChunks(row.batch_id)));
  return { ...progressFrom(row, counts, services.get(Clock).now()), ...(await waitingOf(services, row)) };
}

/** A running batch whose tasks sit queued while no process takes tasks says so (nothing will move it). */
async function waitingOf(services: Services, row: BatchRow): Promise<{ waiting_for_worker: boolean; status_message: string | null }> {
  if (row.status !== 'PENDING' && row.status !== 'IN_PROGRESS') return { waiting_for_worker: false, status_message: null };
  const backlog = await services.get(TaskBacklog).report(`batch:${row.batch_id}:`);
  if (!backlog.waiting_for_worker) return { waiting_for_worker: false, status_message: null };
  return {
    waiting_for_worker: true,
    status_message:
      `Waiting for a worker: ${backlog.queued} task(s) of this batch queued for ${backlog.oldest_queued_age_seconds} s and no process is taking tasks. ` +
      'Start `tessera worker`, or run the server with TESSERA_RUN_TASKS=true.',
  };
}

export default defineResource({
  name: 'batches',
  migrations: batchMigrations,
  services: (container, services) => {
    const db = services.get(DatabaseHandle).db;
    const store = new BatchStore(db);
    container.bind(Store).toConstantValue(store);
    container.bind(Counts).toConstantValue(new ProgressCountCache());
    container.bind(Batches).toConstantValue(
      new BatchService(
        db,
        store,
        () => services.get(ObjectCatalog),
        () => services.get(CollectionProcessor),
        services.get(TaskQueue),
        services.get(BlobStore),
        services.get(Clock),
        services.get(RootLogger).child({ plugin: 'batches', component: 'batches' }),
        services.get(Announcer),
      ),
    );
    const config = services.get(Config);
    container.bind(BatchHealth).toConstantValue(
      new BatchHealthProbe(
        store,
        () => services.get(CollectionProcessor),
        services.get(VectorIndex),
        services.get(Clock),
        services.get(RootLogger).child({ component: 'batch-health' }),
        config.batchStallAfterMs,
      ),
    );
  },
  setup: ({ services, log }) => {
    const tasks = services.get(TaskQueue);
    const config = services.get(Config);
    new BatchRunner(
      services.get(DatabaseHandle).db,
      services.get(Store),
      () => services.get(CollectionProcessor),
      tasks,
      services.get(Announcer),
      services.get(Clock),
      log.child({ component: 'batches' }),
      { chunkSize: config.batchChunkSize, cancelCheckMs: CANCEL_CHECK_MS },
    ).register();
    tasks.register(HEALTH_TASK, async () => ({ checked: await services.get(BatchHealth).run() }));
    // A deleted namespace's batches (their chunks go with them; a chunk still queued finds no batch and stops).
    services.get(NamespacePurges).register('batches', PURGE_ORDER.batches, async ({ organizationId, namespaceId }) => {
      const rows = await services.get(Store).inNamespace(organizationId, namespaceId);
      for (const row of rows) {
        await services.get(Store).delete(row.batch_id);
        if (row.manifest_key) await services.get(BlobStore).delete(row.manifest_key);
      }
      return { batches: rows.length };
    });
    if (config.batchHealthIntervalMs > 0) {
      const timer = setInterval(() => {
        tasks.enqueue(HEALTH_TASK, {}, { dedupeKey: HEALTH_TASK, maxAttempts: 1 }).catch((err: unknown) => log.error({ err }, 'could not schedule the batch health probe'));
      }, config.batchHealthIntervalMs);
      timer.unref();
      services.get(Lifecycle).onShutdown('batches: health probe timer', () => clearInterval(timer));
    }
  },
  handlers: {
    createBatch: async ({ params, body, ctx, services }) => {
      const caller = callerOf(ctx);
      const bucketId = await bucketIdOf(ctx, services, params.bucket_identifier);
      const row = await services.get(Batches).create(caller.organizationId, ctx.namespace!.id, bucketId, caller.userEmail, body ?? {}, caller.principalId);
      return { status: 201, body: await view(services, row) };
    },
    listBatches: async ({ params, query, ctx, services }) => {
      const bucketId = await bucketIdOf(ctx, services, params.bucket_identifier);
      const { rows, nextCursor } = await services.get(Store).list(callerOf(ctx).organizationId, bucketId, {
        limit: query.limit ?? 100,
        ...(query.cursor ? { cursor: query.cursor } : {}),
        ...(query.status ? { status: query.status as BatchStatus } : {}),
      });
      const results = [];
      for (const row of rows) results.push(await view(services, row));
      return { status: 200, body: { results, has_next: nextCursor !== null, next_cursor: nextCursor } };
    },
    getBatch: async ({ params, ctx, services }) => {
      const bucketId = await bucketIdOf(ctx, services, params.bucket_identifier);
      return { status: 200, body: await replyView(services, await services.get(Batches).get(callerOf(ctx).organizationId, bucketId, params.batch_id)) };
    },
    updateBatch: async ({ params, body, ctx, services }) => {
      const bucketId = await bucketIdOf(ctx, services, params.bucket_identifier);
      const row = await services.get(Batches).updateMetadata(callerOf(ctx).organizationId, bucketId, params.batch_id, body.metadata);
      return { status: 200, body: await view(services, row) };
    },
    deleteBatch: async ({ params, ctx, services }) => {
      const bucketId = await bucketIdOf(ctx, services, params.bucket_identifier);
      const row = await services.get(Batches).delete(callerOf(ctx).organizationId, bucketId, params.batch_id);
      return { status: 200, body: { batch_id: row.batch_id, deleted: true } };
    },
    addBatchObjects: async ({ params, body, ctx, services }) => {
      const bucketId = await bucketIdOf(ctx, services, params.bucket_identifier);
      const row = await services.get(Batches).addObjects(callerOf(ctx).organizationId, bucketId, params.batch_id, body, callerOf(ctx).principalId);
      return { status: 200, body: await view(services, row) };
    },
    submitBatch: async ({ params, ctx, services }) => {
      const bucketId = await bucketIdOf(ctx, services, params.bucket_identifier);
      const row = await services.get(Batches).submit(callerOf(ctx).organizationId, bucketId, params.batch_id);
      return { status: 202, body: await view(services, row) };
    },
    cancelBatch: async ({ params, ctx, services }) => {
      const bucketId = await bucketIdOf(ctx, services, params.bucket_identifier);
      const row = await services.get(Batches).cancel(callerOf(ctx).organizationId, bucketId, params.batch_id);
      return { status: 200, body: await view(services, row) };
    },
    retryBatch: async ({ params, ctx, services }) => {
      const bucketId = await bucketIdOf(ctx, services, params.bucket_identifier);
      const row = await services.get(Batches).retry(callerOf(ctx).organizationId, bucketId, params.batch_id);
      return { status: 202, body: await view(services, row) };
    },
  },
});
