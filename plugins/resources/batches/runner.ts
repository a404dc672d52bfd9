/**
 * Batch processing as tasks. A tier task splits each of its collections' source records into chunks
 * (rows of batch_chunks, planned once even if the task is redelivered) and queues one chunk task each;
 * collections of one tier run side by side. A chunk task processes its records and records its outcome
 * once; the chunk that finishes a tier, under a lock on the batch row, aggregates the tier and either
 * queues the next tier or ends the batch. Every step is idempotent, so a worker killed at any point
 * loses nothing and duplicates nothing: its task runs again and finds the work done or redoes it in place.
 */
import type { Knex } from 'knex';
import type { Logger } from 'pino';
import type { Clock } from '../../../kernel/clock.js';
import type { EventBus } from '../../../kernel/events/event-bus.js';
import { emptyOutcome, type CollectionProcessor, type ProcessingOutcome } from '../../../kernel/processing.js';
import type { TaskContext, TaskQueue } from '../../../kernel/tasks/task-queue.js';
import { aggregateTier, emptyTier, errorSummary, mergeErrors } from './aggregate.js';
import { CHUNK_TASK, TIER_TASK, tierDedupeKey, type TierTaskPayload } from './service.js';
import type { BatchRow, BatchStore, ChunkKey, ChunkRow } from './store.js';

export interface ChunkTaskPayload extends ChunkKey {
  organization_id: string;
}

interface PendingEvent {
  type: string;
  organization_id: string;
  data: Record<string, unknown>;
}

export interface BatchRunnerOptions {
  /** Source records per chunk task. */
  chunkSize: number;
}

export class BatchRunner {
  constructor(
    private readonly db: Knex,
    private readonly store: BatchStore,
    private readonly processor: () => CollectionProcessor,
    private readonly tasks: TaskQueue,
    private readonly events: EventBus,
    private readonly clock: Clock,
    private readonly log: Logger,
    private readonly options: BatchRunnerOptions,
  ) {}

  register(): void {
    this.tasks.register(TIER_TASK, (ctx) => this.runTier(ctx));
    this.tasks.register(CHUNK_TASK, (ctx) => this.runChunk(ctx));
  }

  private async runTier({ task }: TaskContext): Promise<Record<string, unknown>> {
    const payload = task.payload as unknown as TierTaskPayload;
    const batch = await this.store.find(payload.organization_id, payload.batch_id);
    if (!batch || batch.generation !== payload.generation || !['PENDING', 'IN_PROGRESS'].includes(batch.status)) {
      return { skipped: batch ? `batch is ${batch.status} (generation ${batch.generation})` : 'batch deleted' };
    }
    const collections = batch.dag_tiers?.[payload.tier] ?? [];
    const planned: ChunkRow[] = [];
    for (const collectionId of collections) {
      const records =
        payload.retry_of === null
          ? await this.processor().sourceRecords(batch.organization_id, collectionId, batch.loaded_object_ids ?? [])
          : await this.failedRecords(batch.batch_id, payload.retry_of, payload.tier, collectionId);
      for (let i = 0; i * this.options.chunkSize < records.length; i++) {
        planned.push({
          batch_id: batch.batch_id,
          generation: payload.generation,
          tier: payload.tier,
          collection_id: collectionId,
          chunk_index: i,
          record_ids: records.slice(i * this.options.chunkSize, (i + 1) * this.options.chunkSize),
          status: 'PENDING',
          task_id: null,
          outcome: null,
          started_at: null,
          completed_at: null,
        });
      }
    }
    const events: PendingEvent[] = [];
    await this.db.transaction(async (trx) => {
      const locked = await this.store.lock(trx, batch.batch_id);
      if (!locked || locked.generation !== payload.generation || !['PENDING', 'IN_PROGRESS'].includes(locked.status)) return;
      await this.store.insertChunks(planned, trx);
      const chunks = await this.store.chunksOf(batch.batch_id, payload.generation, payload.tier, trx);
      for (const chunk of chunks.filter((c) => c.status === 'PENDING')) {
        const chunkPayload: ChunkTaskPayload = {
          organization_id: batch.organization_id,
          batch_id: chunk.batch_id,
          generation: chunk.generation,
          tier: chunk.tier,
          collection_id: chunk.collection_id,
          chunk_index: chunk.chunk_index,
        };
        await this.tasks.enqueue(CHUNK_TASK, { ...chunkPayload }, {
          organizationId: batch.organization_id,
          dedupeKey: `batch:${chunk.batch_id}:${chunk.generation}:chunk:${chunk.tier}:${chunk.collection_id}:${chunk.chunk_index}`,
          transaction: trx,
        });
      }
      const now = this.clock.now();
      const base = locked.tier_tasks[payload.tier] ?? emptyTier(payload.tier, collections, [], null);
      const info = { ...base, status: 'IN_PROGRESS' as const, task_id: task.task_id, started_at: base.started_at ?? now.toISOString() };
      const tierTasks = [...locked.tier_tasks.slice(0, payload.tier), info];
      const changes: Partial<BatchRow> = {
        status: 'IN_PROGRESS',
        current_tier: payload.tier,
        tier_tasks: tierTasks,
        started_at: locked.started_at ?? now,
        progress_at: now,
        updated_at: now,
      };
      await this.store.update(batch.batch_id, changes, trx);
      // A tier with nothing to process (no source documents) ends at once.
      if (chunks.length === 0) await this.completeTier(trx, { ...locked, ...changes }, aggregateTier(info, [], now), events);
    });
    await this.publish(events);
    return { chunks: planned.length };
  }

  private async runChunk({ task, log }: TaskContext): Promise<Record<string, unknown>> {
    const payload = task.payload as unknown as ChunkTaskPayload;
    const key: ChunkKey = {
      batch_id: payload.batch_id,
      generation: payload.generation,
      tier: payload.tier,
      collection_id: payload.collection_id,
      chunk_index: payload.chunk_index,
    };
    const chunk = await this.store.chunk(key);
    if (!chunk || chunk.status !== 'PENDING') return { skipped: chunk ? `chunk already ${chunk.status}` : 'chunk gone' };
    const batch = await this.store.find(payload.organization_id, payload.batch_id);
    let status: ChunkRow['status'] = 'COMPLETED';
    let outcome: ProcessingOutcome;
    if (!batch || batch.generation !== payload.generation || batch.status !== 'IN_PROGRESS') {
      status = 'SKIPPED';
      outcome = emptyOutcome();
    } else {
      await this.store.markStarted(key, this.clock.now());
      try {
        outcome = await this.processor().process({
          organizationId: payload.organization_id,
          collectionId: payload.collection_id,
          recordIds: chunk.record_ids,
          processingTier: payload.tier,
          origin: payload.batch_id,
        });
      } catch (err) {
        if (task.attempts < task.max_attempts) throw err;
        // The last attempt: the chunk ends FAILED (its records reported) so the tier, and the batch, can end.
        log.error({ err, batch_id: payload.batch_id }, 'batch chunk failed on its last attempt');
        status = 'FAILED';
        outcome = { ...emptyOutcome(), records_failed: chunk.record_ids.length, errors: [dependencyError(err, chunk.record_ids, task.attempts)] };
      }
    }
    const events: PendingEvent[] = [];
    await this.db.transaction(async (trx) => {
      const locked = await this.store.lock(trx, payload.batch_id);
      if (!locked) return;
      const now = this.clock.now();
      if (!(await this.store.finish(key, status, outcome, now, trx))) return;
      if (locked.generation !== payload.generation) return;
      const chunks = await this.store.chunksOf(payload.batch_id, payload.generation, payload.tier, trx);
      const base = locked.tier_tasks[payload.tier] ?? emptyTier(payload.tier, locked.dag_tiers?.[payload.tier] ?? [], [], null);
      const info = aggregateTier(base, chunks, now);
      if (locked.status !== 'IN_PROGRESS' || info.status === 'IN_PROGRESS') {
        const tierTasks = [...locked.tier_tasks];
        tierTasks[payload.tier] = locked.status === 'CANCELED' ? { ...info, status: 'CANCELED' } : { ...info, status: 'IN_PROGRESS', completed_at: null, duration_ms: null };
        await this.store.update(payload.batch_id, { tier_tasks: tierTasks, progress_at: now, updated_at: now }, trx);
        return;
      }
      await this.completeTier(trx, locked, info, events);
    });
    await this.publish(events);
    return { status, documents_written: outcome.documents_written, records: chunk.record_ids.length };
  }

  /** Ends a tier: the batch fails, goes on to the next tier, or completes. Runs under the batch row's lock. */
  private async completeTier(trx: Knex.Transaction, batch: BatchRow, info: BatchRow['tier_tasks'][number], events: PendingEvent[]): Promise<void> {
    const now = this.clock.now();
    const tier = info.tier_num;
    const tierTasks = [...batch.tier_tasks.slice(0, tier), info];
    const allErrors = mergeErrors(tierTasks.flatMap((t) => t.errors));
    const changes: Partial<BatchRow> = { tier_tasks: tierTasks, progress_at: now, updated_at: now, error_summary: errorSummary(allErrors) };
    if (info.status === 'FAILED') {
      Object.assign(changes, {
        status: 'FAILED',
        error: `tier ${tier} failed: ${info.errors[0]?.message ?? 'every record failed'}`,
        completed_at: now,
      });
      events.push(this.event('batch.failed', batch, { error: changes.error, failed_tier: tier }));
    } else if (tier + 1 < batch.total_tiers) {
      const next = tier + 1;
      const task = await this.tasks.enqueue(
        TIER_TASK,
        { organization_id: batch.organization_id, batch_id: batch.batch_id, generation: batch.generation, tier: next, retry_of: null } satisfies TierTaskPayload,
        { organizationId: batch.organization_id, dedupeKey: tierDedupeKey(batch.batch_id, batch.generation, next), transaction: trx },
      );
      tierTasks.push({
        ...emptyTier(next, batch.dag_tiers?.[next] ?? [], batch.dag_tiers?.[tier] ?? [], info.task_id ?? null),
        task_id: task.task_id,
      });
    } else {
      const withErrors = tierTasks.some((t) => t.status === 'COMPLETED_WITH_ERRORS' || t.errors.length > 0);
      Object.assign(changes, { status: withErrors ? 'COMPLETED_WITH_ERRORS' : 'COMPLETED', completed_at: now });
      events.push(
        this.event('batch.completed', batch, {
          status: changes.status,
          documents_written: tierTasks.reduce((n, t) => n + t.documents_written, 0),
          error_summary: changes.error_summary,
        }),
      );
    }
    await this.store.update(batch.batch_id, changes, trx);
  }

  /** The records of a generation's run of a tier that did not get through: failed chunks and failed records. */
  private async failedRecords(batchId: string, generation: number, tier: number, collectionId: string): Promise<string[]> {
    const chunks = (await this.store.chunksOf(batchId, generation, tier)).filter((c) => c.collection_id === collectionId);
    const ids = new Set<string>();
    for (const chunk of chunks) {
      if (chunk.status !== 'COMPLETED') for (const id of chunk.record_ids) ids.add(id);
      for (const error of chunk.outcome?.errors ?? []) for (const id of error.affected_document_ids) ids.add(id);
    }
    return [...ids];
  }

  private event(type: string, batch: BatchRow, data: Record<string, unknown>): PendingEvent {
    return { type, organization_id: batch.organization_id, data: { batch_id: batch.batch_id, bucket_id: batch.bucket_id, namespace_id: batch.namespace_id, ...data } };
  }

  private async publish(events: PendingEvent[]): Promise<void> {
    for (const event of events) {
      try {
        await this.events.publish(event);
      } catch (err) {
        this.log.warn({ err, type: event.type }, 'could not publish a batch event');
      }
    }
  }
}

function dependencyError(err: unknown, recordIds: string[], attempts: number): ProcessingOutcome['errors'][number] {
  return {
    error_type: 'dependency',
    message: `${err instanceof Error ? err.message : String(err)} (after ${attempts} attempts)`.slice(0, 2000),
    component: null,
    stage: 'extract',
    traceback: err instanceof Error ? (err.stack ?? null) : null,
    timestamp: new Date().toISOString(),
    affected_document_ids: [...recordIds],
    affected_count: recordIds.length,
    recovery_suggestion: 'A service processing needs was unavailable; check GET /v1/health, then retry the batch.',
    metadata: { attempts },
  };
}
