/**
 * Batch processing as tasks. A tier task splits each of its collections' source records into chunks
 * (rows of batch_chunks, planned once even if the task is redelivered) and queues one chunk task each;
 * collections of one tier run side by side. A chunk task processes its records and records its outcome
 * once; the chunk that finishes a tier, under a lock on the batch row, aggregates the tier and either
 * queues the next tier or ends the batch. Every step is idempotent, so a worker killed at any point
 * loses nothing and duplicates nothing: its task runs again and finds the work done or redoes it in place.
 *
 * A retry is a new generation that plans, tier by tier, only the records without a final result in the
 * ledger (ledger.ts). A cancel skips the chunks not started; a running chunk checks the batch between
 * records, stops, and records what it did, so the batch's counters match the documents that exist.
 */
import type { Knex } from 'knex';
import type { Logger } from 'pino';
import type { Clock } from '../../../kernel/clock.js';
import type { Announcer } from '../../../kernel/events/announcer.js';
import type { EventInput } from '../../../kernel/events/event-bus.js';
import { emptyOutcome, type CollectionProcessor, type ProcessingOutcome } from '../../../kernel/processing.js';
import type { TaskContext, TaskQueue } from '../../../kernel/tasks/task-queue.js';
import { aggregateTier, ChunkTallies, emptyTier, errorSummary, mergeErrors } from './aggregate.js';
import { batchEnded } from './events.js';
import { settledRecords, tierLedger } from './ledger.js';
import { CHUNK_TASK, TIER_TASK, tierDedupeKey, type TierTaskPayload } from './service.js';
import type { BatchRow, BatchStore, ChunkKey, ChunkRow, LockedBatch } from './store.js';

export interface ChunkTaskPayload extends ChunkKey {
  organization_id: string;
}

export interface BatchRunnerOptions {
  /** Source records per chunk task. */
  chunkSize: number;
  /** How often a running chunk checks whether its batch was canceled (or retried). */
  cancelCheckMs: number;
}

const LIVE: readonly string[] = ['PENDING', 'IN_PROGRESS'];

export class BatchRunner {
  /** Each chunk's tally, for the tier aggregation every chunk end runs. */
  private readonly tallies = new ChunkTallies();

  constructor(
    private readonly db: Knex,
    private readonly store: BatchStore,
    private readonly processor: () => CollectionProcessor,
    private readonly tasks: TaskQueue,
    private readonly announcer: Announcer,
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
    if (!batch || batch.generation !== payload.generation || !LIVE.includes(batch.status)) {
      return { skipped: batch ? `batch is ${batch.status} (generation ${batch.generation})` : 'batch deleted' };
    }
    const collections = batch.dag_tiers?.[payload.tier] ?? [];
    // Earlier runs' final results stand: a retry plans only what has none (this run's own plan is kept as is).
    const earlier = tierLedger((await this.store.chunksOfTier(batch.batch_id, payload.tier)).filter((c) => c.generation < payload.generation));
    const planned: ChunkRow[] = [];
    for (const collectionId of collections) {
      const settled = settledRecords(earlier, collectionId);
      const records = (await this.processor().sourceRecords(batch.organization_id, collectionId, batch.loaded_object_ids ?? [])).filter((id) => !settled.has(id));
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
    const events: EventInput[] = [];
    await this.db.transaction(async (trx) => {
      const locked = await this.store.lockProgress(trx, batch.batch_id);
      if (!locked || locked.generation !== payload.generation || !LIVE.includes(locked.status)) return;
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
      if (locked.status === 'PENDING') {
        this.log.info(
          { batch_id: batch.batch_id, generation: payload.generation, objects: batch.loaded_object_ids?.length ?? 0, tiers: batch.total_tiers },
          payload.generation === 0 ? 'batch started' : 'batch retry started',
        );
      }
      // A tier with nothing (left) to process ends at once.
      if (chunks.length === 0) {
        const everyRun = await this.store.chunksOfTier(batch.batch_id, payload.tier, trx);
        await this.completeTier(trx, { ...locked, ...changes }, aggregateTier(info, everyRun, now, this.tallies), events);
      }
    });
    await this.announcer.announceAll(events);
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
    // Started under the batch row's lock, in one statement: a cancel either skips this chunk first, or sees it started and lets it stop itself.
    const started = await this.store.markStarted(key, this.clock.now());
    let status: ChunkRow['status'] = 'COMPLETED';
    let outcome: ProcessingOutcome;
    if (!started) {
      status = 'SKIPPED';
      outcome = emptyOutcome();
    } else {
      const stop = this.watchForStop(payload);
      try {
        outcome = await this.processor().process(
          {
            organizationId: payload.organization_id,
            collectionId: payload.collection_id,
            recordIds: chunk.record_ids,
            processingTier: payload.tier,
            origin: payload.batch_id,
          },
          stop.signal,
        );
        if (outcome.records_canceled > 0) status = 'CANCELED';
      } catch (err) {
        if (task.attempts < task.max_attempts) throw err;
        // The last attempt: the chunk ends FAILED (its records reported) so the tier, and the batch, can end.
        log.error({ err, batch_id: payload.batch_id, collection_id: payload.collection_id }, 'batch chunk failed on its last attempt');
        status = 'FAILED';
        outcome = {
          ...emptyOutcome(),
          records_failed: chunk.record_ids.length,
          records: Object.fromEntries(chunk.record_ids.map((id) => [id, { result: 'failed' as const, documents: 0, submitted: true }])),
          errors: [dependencyError(err, payload.collection_id, chunk.record_ids, task.attempts)],
        };
      } finally {
        stop.dispose();
      }
      this.logErrors(payload, outcome);
    }
    const events: EventInput[] = [];
    await this.db.transaction(async (trx) => {
      const locked = await this.store.lockProgress(trx, payload.batch_id);
      if (!locked) return;
      const now = this.clock.now();
      if (!(await this.store.finish(key, status, outcome, now, trx))) return;
      if (locked.generation !== payload.generation) {
        // An earlier run's chunk still changes what the ledger counts: the row says so (progress caches key on it).
        await this.store.update(payload.batch_id, { progress_at: now, updated_at: now }, trx);
        return;
      }
      const chunks = await this.store.chunksOfTier(payload.batch_id, payload.tier, trx);
      const base = locked.tier_tasks[payload.tier] ?? emptyTier(payload.tier, locked.dag_tiers?.[payload.tier] ?? [], [], null);
      const info = aggregateTier(base, chunks, now, this.tallies);
      const stillRunning = chunks.some((c) => c.generation === payload.generation && c.status === 'PENDING');
      if (locked.status !== 'IN_PROGRESS' || stillRunning) {
        const tierTasks = [...locked.tier_tasks];
        tierTasks[payload.tier] =
          locked.status === 'CANCELED' ? { ...info, status: 'CANCELED' } : { ...info, status: 'IN_PROGRESS', completed_at: null, duration_ms: null };
        await this.store.update(payload.batch_id, { tier_tasks: tierTasks, progress_at: now, updated_at: now }, trx);
        return;
      }
      await this.completeTier(trx, locked, info, events);
    });
    await this.announcer.announceAll(events);
    return { status, documents_written: outcome.documents_written, records: chunk.record_ids.length };
  }

  /** Aborts when the batch stops being this run's (canceled, retried, deleted): checked every cancelCheckMs. */
  private watchForStop(payload: ChunkTaskPayload): { signal: AbortSignal; dispose: () => void } {
    const controller = new AbortController();
    let checking = false;
    const timer = setInterval(() => {
      if (checking || controller.signal.aborted) return;
      checking = true;
      this.store
        .runState(payload.organization_id, payload.batch_id)
        .then((batch) => {
          if (!batch || batch.generation !== payload.generation || batch.status !== 'IN_PROGRESS') {
            this.log.info(
              { batch_id: payload.batch_id, collection_id: payload.collection_id, chunk_index: payload.chunk_index, batch_status: batch?.status ?? 'deleted' },
              'batch chunk stopping: its batch was canceled, retried or deleted',
            );
            controller.abort();
          }
        })
        .catch((err: unknown) => this.log.warn({ err, batch_id: payload.batch_id }, 'could not check whether the batch was canceled'))
        .finally(() => (checking = false));
    }, this.options.cancelCheckMs);
    timer.unref();
    return { signal: controller.signal, dispose: () => clearInterval(timer) };
  }

  private logErrors(payload: ChunkTaskPayload, outcome: ProcessingOutcome): void {
    if (outcome.errors.length === 0) return;
    this.log.warn(
      {
        batch_id: payload.batch_id,
        tier: payload.tier,
        collection_id: payload.collection_id,
        collection_name: outcome.errors[0]?.collection_name ?? null,
        records_failed: outcome.records_failed,
        errors: outcome.errors.slice(0, 5).map((e) => ({ error_type: e.error_type, extractor: e.component, message: e.message, affected_count: e.affected_count })),
      },
      'batch records failed',
    );
  }

  /** Ends a tier: the batch fails, goes on to the next tier, or completes. Runs under the batch row's lock. */
  private async completeTier(trx: Knex.Transaction, batch: LockedBatch, info: BatchRow['tier_tasks'][number], events: EventInput[]): Promise<void> {
    const now = this.clock.now();
    const tier = info.tier_num;
    const tierTasks = [...batch.tier_tasks.slice(0, tier), info];
    const allErrors = mergeErrors(tierTasks.flatMap((t) => t.errors));
    const changes: Partial<BatchRow> = { tier_tasks: tierTasks, progress_at: now, updated_at: now, error_summary: errorSummary(allErrors) };
    const documentsWritten = tierTasks.reduce((n, t) => n + t.documents_written, 0);
    if (info.status === 'FAILED') {
      const first = info.errors[0];
      const where = first?.collection_id ? `collection '${first.collection_name ?? first.collection_id}' (${first.collection_id})${first.component ? `, ${first.component}` : ''}: ` : '';
      Object.assign(changes, {
        status: 'FAILED',
        error: `tier ${tier} failed: ${where}${first?.message ?? 'every record failed'}`,
        completed_at: now,
      });
      events.push(batchEnded('batch.failed', batch, { status: 'FAILED', tierTasks, errorSummary: changes.error_summary! }, { error: changes.error, failed_tier: tier }));
      this.log.warn({ batch_id: batch.batch_id, tier, error: changes.error, documents_written: documentsWritten }, 'batch failed');
    } else if (tier + 1 < batch.total_tiers) {
      const next = tier + 1;
      const task = await this.tasks.enqueue(
        TIER_TASK,
        { organization_id: batch.organization_id, batch_id: batch.batch_id, generation: batch.generation, tier: next } satisfies TierTaskPayload,
        { organizationId: batch.organization_id, dedupeKey: tierDedupeKey(batch.batch_id, batch.generation, next), transaction: trx },
      );
      tierTasks.push({
        ...emptyTier(next, batch.dag_tiers?.[next] ?? [], batch.dag_tiers?.[tier] ?? [], info.task_id ?? null),
        task_id: task.task_id,
      });
    } else {
      // Every tier's outcome over every run: one tier still with failures makes the batch COMPLETED_WITH_ERRORS.
      const withErrors = tierTasks.some((t) => t.status !== 'COMPLETED');
      Object.assign(changes, { status: withErrors ? 'COMPLETED_WITH_ERRORS' : 'COMPLETED', completed_at: now });
      events.push(batchEnded('batch.completed', batch, { status: changes.status!, tierTasks, errorSummary: changes.error_summary! }));
      const skipped = tierTasks.reduce((n, t) => n + (t.documents_skipped ?? 0), 0);
      this.log[withErrors ? 'warn' : 'info'](
        { batch_id: batch.batch_id, status: changes.status, generation: batch.generation, documents_written: documentsWritten, documents_skipped: skipped, error_summary: changes.error_summary },
        'batch finished',
      );
    }
    await this.store.update(batch.batch_id, changes, trx);
  }

}

function dependencyError(err: unknown, collectionId: string, recordIds: string[], attempts: number): ProcessingOutcome['errors'][number] {
  return {
    error_type: 'dependency',
    message: `${err instanceof Error ? err.message : String(err)} (after ${attempts} attempts)`.slice(0, 2000),
    component: null,
    collection_id: collectionId,
    collection_name: null,
    stage: 'extract',
    traceback: err instanceof Error ? (err.stack ?? null) : null,
    timestamp: new Date().toISOString(),
    affected_document_ids: [...recordIds],
    affected_count: recordIds.length,
    recovery_suggestion: 'A service processing needs was unavailable; check GET /v1/health, then retry the batch.',
    metadata: { attempts },
  };
}
