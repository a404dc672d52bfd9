/**
 * The stall probe: for every running batch, how far it got, whether it still moves, and whether the
 * documents it wrote have their vectors — kept in `internal_metadata.last_health_check`.
 */
import type { Logger } from 'pino';
import type { Clock } from '../../../kernel/clock.js';
import type { ParsedFilter } from '../../../kernel/filters/filter.js';
import type { CollectionProcessor } from '../../../kernel/processing.js';
import type { VectorIndex } from '../../../kernel/vectors/vector-index.js';
import { progressOf } from './aggregate.js';
import type { BatchRow, BatchStore } from './store.js';

export interface HealthCheck {
  health_status: 'healthy' | 'stalled' | 'degraded';
  total_documents: number;
  processed_documents: number;
  enriched_documents: number;
  vector_populated_count: number;
  missing_features: string[];
  stall_duration_seconds: number;
  recommendations: string[];
  timestamp: string;
}

export class BatchHealthProbe {
  constructor(
    private readonly store: BatchStore,
    private readonly processor: () => CollectionProcessor,
    private readonly vectors: VectorIndex,
    private readonly clock: Clock,
    private readonly log: Logger,
    /** No progress for this long makes a running batch `stalled`. */
    private readonly stallAfterMs: number,
  ) {}

  /** Checks every running batch; returns how many were checked. */
  async run(): Promise<number> {
    const batches = await this.store.running();
    for (const batch of batches) {
      try {
        const check = await this.check(batch);
        await this.store.update(batch.batch_id, { internal_metadata: { ...batch.internal_metadata, last_health_check: check } });
      } catch (err) {
        this.log.warn({ err, batch_id: batch.batch_id }, 'batch health check failed');
      }
    }
    return batches.length;
  }

  async check(batch: BatchRow): Promise<HealthCheck> {
    const now = this.clock.now();
    const chunks = await this.store.allChunks(batch.batch_id);
    const progress = progressOf(batch, chunks, now);
    const lastMove = batch.progress_at ?? batch.started_at ?? batch.updated_at;
    const stallSeconds = Math.max(0, (now.getTime() - new Date(lastMove).getTime()) / 1000);
    const roots = batch.loaded_object_ids ?? [];
    const filter: ParsedFilter = {
      caseSensitive: true,
      root: { kind: 'group', and: [{ kind: 'condition', field: 'root_object_id', operator: 'in', value: roots }], or: [], not: [] },
    };
    let vectorCount = 0;
    const missing: string[] = [];
    const started = batch.tier_tasks.filter((t) => t.status !== 'PENDING');
    for (const tier of started) {
      for (const collectionId of tier.collection_ids) {
        const written = chunks
          .filter((c) => c.tier === tier.tier_num && c.collection_id === collectionId)
          .reduce((n, c) => n + (c.outcome?.documents_written ?? 0), 0);
        for (const { feature, index } of await this.processor().featureIndexes(batch.organization_id, collectionId).catch(() => [])) {
          const count = roots.length === 0 ? 0 : await this.vectors.count(index, filter).catch(() => 0);
          vectorCount += count;
          if (written > 0 && count === 0) missing.push(`${collectionId}.${feature}`);
        }
      }
    }
    const stalled = stallSeconds * 1000 >= this.stallAfterMs;
    const recommendations: string[] = [];
    if (stalled) {
      recommendations.push(
        `No progress for ${Math.round(stallSeconds)} s: check that a task runner is up (tessera serve or tessera worker) and GET /v1/health for inference.`,
      );
    }
    if (missing.length > 0) recommendations.push(`Documents were written without vectors for ${missing.join(', ')}: check the extractors' models.`);
    if ((progress.records_failed ?? 0) > 0) recommendations.push(`${(progress.records_failed ?? 0)} record(s) failed so far: see tier_tasks[].errors; retry the batch when it ends.`);
    return {
      health_status: stalled ? 'stalled' : missing.length > 0 || (progress.records_failed ?? 0) > 0 ? 'degraded' : 'healthy',
      total_documents: progress.records_total,
      processed_documents: progress.records_done,
      enriched_documents: progress.documents_written,
      vector_populated_count: vectorCount,
      missing_features: missing,
      stall_duration_seconds: Math.round(stallSeconds),
      recommendations,
      timestamp: now.toISOString(),
    };
  }
}
