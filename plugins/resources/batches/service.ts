/**
 * The batch state machine as users drive it: DRAFT (objects added) → submit (DAG resolved, tier 0
 * queued: PENDING) → the runner takes it through IN_PROGRESS to COMPLETED, COMPLETED_WITH_ERRORS or
 * FAILED; cancel stops queued work (running chunks stop themselves and report what they wrote), retry runs
 * again, in a new generation, only the records that failed or never ran.
 */
import type { Knex } from 'knex';
import type { Logger } from 'pino';
import type { BlobStore } from '../../../kernel/blobs/blob-store.js';
import type { Clock } from '../../../kernel/clock.js';
import type { Announcer } from '../../../kernel/events/announcer.js';
import { ConflictError, InputError, NotFoundError } from '../../../kernel/errors.js';
import { newId } from '../../../kernel/ids.js';
import type { CollectionProcessor, ObjectCatalog } from '../../../kernel/processing.js';
import type { TaskQueue } from '../../../kernel/tasks/task-queue.js';
import { emptyTier } from './aggregate.js';
import { batchEnded } from './events.js';
import type { BatchRow, BatchStatus, BatchStore } from './store.js';

export const TIER_TASK = 'batches.tier';
export const CHUNK_TASK = 'batches.chunk';

export interface TierTaskPayload {
  organization_id: string;
  batch_id: string;
  generation: number;
  tier: number;
}

/** The most objects one batch holds (its id list is one row's JSON). */
export const MAX_BATCH_OBJECTS = 100_000;

const RUNNING: readonly BatchStatus[] = ['PENDING', 'IN_PROGRESS', 'PROCESSING'];
const RETRYABLE: readonly BatchStatus[] = ['FAILED', 'COMPLETED_WITH_ERRORS', 'CANCELED'];

export function tierDedupeKey(batchId: string, generation: number, tier: number): string {
  return `batch:${batchId}:${generation}:tier:${tier}`;
}

export class BatchService {
  constructor(
    private readonly db: Knex,
    private readonly store: BatchStore,
    private readonly objects: () => ObjectCatalog,
    private readonly processor: () => CollectionProcessor,
    private readonly tasks: TaskQueue,
    private readonly blobs: BlobStore,
    private readonly clock: Clock,
    private readonly log: Logger,
    private readonly announcer: Announcer,
  ) {}

  async get(organizationId: string, bucketId: string, batchId: string): Promise<BatchRow> {
    const row = await this.store.find(organizationId, batchId);
    if (!row || row.bucket_id !== bucketId) throw new NotFoundError(`Batch '${batchId}' not found in this bucket`, { batch_id: batchId });
    return row;
  }

  async create(
    organizationId: string,
    namespaceId: string,
    bucketId: string,
    createdBy: string | null,
    input: { object_ids?: string[]; prefix?: string; metadata?: Record<string, unknown> },
    principalId: string | null = null,
  ): Promise<BatchRow> {
    const listed = await this.checkObjects(organizationId, bucketId, unique(input.object_ids ?? []), principalId);
    const objectIds = await this.withPrefix(organizationId, bucketId, listed, input.prefix, principalId);
    const now = this.clock.now();
    const row: BatchRow = {
      batch_id: newId('btch'),
      organization_id: organizationId,
      namespace_id: namespaceId,
      bucket_id: bucketId,
      status: 'DRAFT',
      type: 'BUCKET',
      object_ids: objectIds,
      collection_ids: null,
      error: null,
      error_summary: null,
      manifest_key: null,
      task_id: null,
      loaded_object_ids: null,
      internal_metadata: {},
      metadata: input.metadata ?? {},
      tier_tasks: [],
      current_tier: null,
      total_tiers: 1,
      dag_tiers: null,
      generation: 0,
      started_at: null,
      completed_at: null,
      progress_at: null,
      created_by: createdBy,
      created_at: now,
      updated_at: now,
    };
    await this.store.insert(row);
    return row;
  }

  async addObjects(
    organizationId: string,
    bucketId: string,
    batchId: string,
    input: { object_ids?: string[]; prefix?: string },
    principalId: string | null = null,
  ): Promise<BatchRow> {
    const batch = await this.get(organizationId, bucketId, batchId);
    if (batch.status !== 'DRAFT') throw new ConflictError(`Objects can only be added to a DRAFT batch; this one is ${batch.status}`, { status: batch.status });
    const added = await this.checkObjects(organizationId, bucketId, unique(input.object_ids ?? []), principalId);
    const all = await this.withPrefix(organizationId, bucketId, unique([...batch.object_ids, ...added]), input.prefix, principalId);
    const changes = { object_ids: all, updated_at: this.clock.now() };
    await this.store.update(batchId, changes);
    return { ...batch, ...changes };
  }

  async updateMetadata(organizationId: string, bucketId: string, batchId: string, metadata: Record<string, unknown>): Promise<BatchRow> {
    const batch = await this.get(organizationId, bucketId, batchId);
    const changes = { metadata, updated_at: this.clock.now() };
    await this.store.update(batchId, changes);
    return { ...batch, ...changes };
  }

  async delete(organizationId: string, bucketId: string, batchId: string): Promise<BatchRow> {
    const batch = await this.get(organizationId, bucketId, batchId);
    if (RUNNING.includes(batch.status)) throw new ConflictError(`Batch is ${batch.status}; cancel it before deleting it`, { status: batch.status });
    await this.store.delete(batchId);
    if (batch.manifest_key) await this.blobs.delete(batch.manifest_key);
    return batch;
  }

  /** DRAFT → PENDING: resolves the DAG, writes the manifest, queues tier 0 (in the same transaction). */
  async submit(organizationId: string, bucketId: string, batchId: string): Promise<BatchRow> {
    const batch = await this.get(organizationId, bucketId, batchId);
    if (batch.status !== 'DRAFT') throw new ConflictError(`Only a DRAFT batch can be submitted; this one is ${batch.status}`, { status: batch.status });
    if (batch.object_ids.length === 0) throw new InputError('A batch needs at least 1 object to be submitted; add objects first', { object_count: 0 });
    const found = await this.ownersOf(organizationId, bucketId, batch.object_ids);
    const loaded = batch.object_ids.filter((id) => found.has(id));
    if (loaded.length === 0) throw new InputError('None of the batch objects exists any more', { object_ids: batch.object_ids.slice(0, 20) });
    const plan = await this.processor().plan(organizationId, bucketId);
    if (plan.tiers.length === 0) {
      throw new ConflictError('No enabled collection reads this bucket: create a collection with this bucket as its source first', { bucket_id: bucketId });
    }
    const now = this.clock.now();
    const manifestKey = `${organizationId}/batches/${batchId}/manifest.json`;
    await this.blobs.put(
      manifestKey,
      Buffer.from(JSON.stringify({ batch_id: batchId, bucket_id: bucketId, object_ids: loaded, dag_tiers: plan.tiers, sources: plan.sources, submitted_at: now.toISOString() })),
      { contentType: 'application/json' },
    );
    return this.db.transaction(async (trx) => {
      const locked = await this.store.lock(trx, batchId);
      if (locked?.status !== 'DRAFT') throw new ConflictError('The batch was submitted concurrently', { status: locked?.status });
      const task = await this.queueTier(trx, { organization_id: organizationId, batch_id: batchId, generation: 0, tier: 0 });
      const changes: Partial<BatchRow> = {
        status: 'PENDING',
        loaded_object_ids: loaded,
        dag_tiers: plan.tiers,
        total_tiers: plan.tiers.length,
        collection_ids: plan.tiers.flat(),
        manifest_key: manifestKey,
        task_id: task,
        tier_tasks: [{ ...emptyTier(0, plan.tiers[0]!, [], null), task_id: task }],
        current_tier: null,
        updated_at: now,
      };
      await this.store.update(batchId, changes, trx);
      return { ...batch, ...changes };
    });
  }

  async cancel(organizationId: string, bucketId: string, batchId: string): Promise<BatchRow> {
    await this.get(organizationId, bucketId, batchId);
    const canceled = await this.db.transaction(async (trx) => {
      const batch = (await this.store.lock(trx, batchId))!;
      if (!RUNNING.includes(batch.status)) throw new ConflictError(`Only a PENDING or IN_PROGRESS batch can be canceled; this one is ${batch.status}`, { status: batch.status });
      const now = this.clock.now();
      await this.store.skipUnstarted(batchId, now, trx);
      const changes: Partial<BatchRow> = {
        status: 'CANCELED',
        tier_tasks: batch.tier_tasks.map((t) =>
          RUNNING.includes(t.status) ? { ...t, status: 'CANCELED', completed_at: now.toISOString() } : t,
        ),
        completed_at: now,
        updated_at: now,
      };
      await this.store.update(batchId, changes, trx);
      this.log.info({ batch_id: batchId, was: batch.status, current_tier: batch.current_tier }, 'batch canceled');
      return { ...batch, ...changes };
    });
    await this.announcer.announce(
      batchEnded('batch.canceled', canceled, { status: canceled.status, tierTasks: canceled.tier_tasks, errorSummary: canceled.error_summary }, { canceled_tier: canceled.current_tier }),
    );
    return canceled;
  }

  /**
   * Runs again, in a new generation, from the first tier that did not complete cleanly. Each tier of the
   * new run plans only the records without a final result (failed, canceled, never run): what earlier runs
   * wrote stays, and stays counted.
   */
  async retry(organizationId: string, bucketId: string, batchId: string): Promise<BatchRow> {
    await this.get(organizationId, bucketId, batchId);
    return this.db.transaction(async (trx) => {
      const batch = (await this.store.lock(trx, batchId))!;
      if (!RETRYABLE.includes(batch.status)) {
        throw new ConflictError(`Only a FAILED, COMPLETED_WITH_ERRORS or CANCELED batch can be retried; this one is ${batch.status}`, { status: batch.status });
      }
      const tiers = batch.dag_tiers ?? [];
      let tier = batch.tier_tasks.findIndex((t) => t.status !== 'COMPLETED');
      if (tier < 0) tier = Math.min(batch.tier_tasks.length, tiers.length - 1);
      const generation = batch.generation + 1;
      const task = await this.queueTier(trx, { organization_id: organizationId, batch_id: batchId, generation, tier });
      const previous = batch.tier_tasks[tier - 1];
      const now = this.clock.now();
      // The retried tier keeps its counters until its new run adds to them.
      const kept = batch.tier_tasks[tier] ?? emptyTier(tier, tiers[tier] ?? [], tier === 0 ? [] : (tiers[tier - 1] ?? []), previous?.task_id ?? null);
      const changes: Partial<BatchRow> = {
        status: 'PENDING',
        generation,
        error: null,
        error_summary: null,
        task_id: tier === 0 ? task : batch.task_id,
        tier_tasks: [...batch.tier_tasks.slice(0, tier), { ...kept, status: 'PENDING', task_id: task, completed_at: null, duration_ms: null }],
        // The new run's rate and ETA are measured from its own start.
        started_at: null,
        completed_at: null,
        updated_at: now,
      };
      await this.store.update(batchId, changes, trx);
      this.log.info({ batch_id: batchId, was: batch.status, generation, from_tier: tier }, 'batch retry queued');
      return { ...batch, ...changes };
    });
  }

  private async queueTier(trx: Knex, payload: TierTaskPayload): Promise<string> {
    const task = await this.tasks.enqueue(TIER_TASK, { ...payload }, {
      organizationId: payload.organization_id,
      dedupeKey: tierDedupeKey(payload.batch_id, payload.generation, payload.tier),
      transaction: trx,
    });
    return task.task_id;
  }

  /**
   * `ids` and every object whose key starts with `prefix` (none when it is absent), each once, refused past
   * MAX_BATCH_OBJECTS. The prefix's objects come from one query, read no further than the cap allows.
   */
  private async withPrefix(organizationId: string, bucketId: string, ids: string[], prefix: string | undefined, principalId: string | null): Promise<string[]> {
    let all = ids;
    if (prefix !== undefined) {
      const matched = await this.store.objectIdsWithPrefix(organizationId, bucketId, prefix, principalId, MAX_BATCH_OBJECTS + 1);
      all = unique([...ids, ...matched]);
      if (all.length > MAX_BATCH_OBJECTS) {
        throw new InputError(
          `A batch holds at most ${MAX_BATCH_OBJECTS} objects, and ${prefix === '' ? 'this bucket' : `the prefix '${prefix}'`} selects more: split the work into batches by longer key prefixes`,
          { max_objects: MAX_BATCH_OBJECTS, ...(prefix === '' ? {} : { prefix }) },
        );
      }
    }
    if (all.length > MAX_BATCH_OBJECTS) throw new InputError(`A batch holds at most ${MAX_BATCH_OBJECTS} objects: split the work into batches by key prefix`, { object_count: all.length });
    return all;
  }

  /** The owner of each of `ids` that is an object of the bucket, read 10,000 ids a statement. */
  private async ownersOf(organizationId: string, bucketId: string, ids: readonly string[]): Promise<Map<string, string | null>> {
    const owners = new Map<string, string | null>();
    for (let i = 0; i < ids.length; i += 10_000) {
      for (const [id, owner] of await this.objects().owners(organizationId, bucketId, ids.slice(i, i + 10_000))) owners.set(id, owner);
    }
    return owners;
  }

  /**
   * Every id must be an object of this bucket (and, for a user-scoped caller, one its principal owns: the
   * objects it cannot see are as unknown to it as ids that do not exist); the ids are returned in the order given.
   */
  private async checkObjects(organizationId: string, bucketId: string, ids: string[], principalId: string | null): Promise<string[]> {
    if (ids.length === 0) return [];
    const owners = await this.ownersOf(organizationId, bucketId, ids);
    const missing = ids.filter((id) => !owners.has(id) || (principalId !== null && owners.get(id) !== principalId));
    if (missing.length > 0) {
      throw new InputError(`${missing.length} object id(s) are not objects of this bucket: ${missing.slice(0, 10).join(', ')}${missing.length > 10 ? ', …' : ''}`, {
        missing_object_ids: missing.slice(0, 100),
      });
    }
    return ids;
  }
}

function unique(ids: readonly string[]): string[] {
  return [...new Set(ids)];
}
