/**
 * A tier's TierTaskInfo is computed from its chunks' outcomes (each chunk's outcome is stored once, so a
 * redelivered chunk never counts twice), and the batch's progress from all its chunks.
 */
import type { components } from '../../../generated/openapi.js';
import type { ProcessingError, StageSample } from '../../../kernel/processing.js';
import type { BatchRow, BatchStatus, ChunkRow, TierTaskInfo } from './store.js';

type ExtractorJob = components['schemas']['ExtractorJob'];
export type BatchProgress = components['schemas']['BatchProgress'];

const MAX_ERRORS_PER_TIER = 200;
const MAX_AFFECTED_IDS = 1000;

export function emptyTier(tier: number, collectionIds: string[], sourceCollectionIds: string[], parentTaskId: string | null): TierTaskInfo {
  return {
    tier_num: tier,
    source_type: tier === 0 ? 'bucket' : 'collection',
    task_id: null,
    status: 'PENDING',
    collection_ids: collectionIds,
    source_collection_ids: sourceCollectionIds,
    parent_task_id: parentTaskId,
    started_at: null,
    completed_at: null,
    duration_ms: null,
    errors: [],
    error_summary: null,
    performance: null,
    ray_job_id: null,
    celery_task_id: null,
    source_documents_fetched: 0,
    documents_after_source_filter: 0,
    documents_missing_input_fields: 0,
    documents_submitted_to_engine: 0,
    documents_written: 0,
    extractor_jobs: [],
  };
}

/** The status a tier has once every chunk ended (or IN_PROGRESS while one has not). */
export function tierStatus(chunks: readonly ChunkRow[]): BatchStatus {
  if (chunks.some((c) => c.status === 'PENDING')) return 'IN_PROGRESS';
  if (chunks.some((c) => c.status === 'SKIPPED')) return 'CANCELED';
  if (chunks.some((c) => c.status === 'FAILED')) return 'FAILED';
  const records = chunks.reduce((n, c) => n + c.record_ids.length, 0);
  const failed = chunks.reduce((n, c) => n + (c.outcome?.records_failed ?? 0), 0);
  if (records > 0 && failed >= records) return 'FAILED';
  if (chunks.some((c) => (c.outcome?.errors.length ?? 0) > 0)) return 'COMPLETED_WITH_ERRORS';
  return 'COMPLETED';
}

/** What merging needs of an error (processing errors, and the stored tier errors). */
interface ErrorLike {
  error_type: string;
  message: string;
  component?: string | null;
  stage?: string | null;
  affected_document_ids: string[];
  affected_count: number;
}

export function mergeErrors<E extends ErrorLike>(errors: readonly E[]): E[] {
  const merged: E[] = [];
  for (const error of errors) {
    const same = merged.find((e) => e.error_type === error.error_type && e.message === error.message && e.component === error.component && e.stage === error.stage);
    if (same) {
      same.affected_count += error.affected_count;
      for (const id of error.affected_document_ids) if (same.affected_document_ids.length < MAX_AFFECTED_IDS) same.affected_document_ids.push(id);
      continue;
    }
    if (merged.length >= MAX_ERRORS_PER_TIER) continue;
    merged.push({ ...error, affected_document_ids: error.affected_document_ids.slice(0, MAX_AFFECTED_IDS) });
  }
  return merged;
}

export function errorSummary(errors: readonly ErrorLike[]): Record<string, number> | null {
  if (errors.length === 0) return null;
  const summary: Record<string, number> = {};
  for (const e of errors) summary[e.error_type] = (summary[e.error_type] ?? 0) + e.affected_count;
  return summary;
}

/** Recomputes a tier's counters, jobs, errors and performance from its chunks. */
export function aggregateTier(base: TierTaskInfo, chunks: readonly ChunkRow[], now: Date): TierTaskInfo {
  const info: TierTaskInfo = {
    ...base,
    source_documents_fetched: 0,
    documents_after_source_filter: 0,
    documents_missing_input_fields: 0,
    documents_submitted_to_engine: 0,
    documents_written: 0,
  };
  const errors: ProcessingError[] = [];
  const jobs = new Map<string, ExtractorJob & { ms: number }>();
  const stages = new Map<string, StageSample>();
  for (const chunk of chunks) {
    const o = chunk.outcome;
    if (!o) continue;
    info.source_documents_fetched += o.source_documents_fetched;
    info.documents_after_source_filter += o.documents_after_source_filter;
    info.documents_missing_input_fields += o.documents_missing_input_fields;
    info.documents_submitted_to_engine += o.documents_submitted_to_engine;
    info.documents_written += o.documents_written;
    errors.push(...o.errors);
    for (const job of o.extractors) {
      const entry = jobs.get(job.extractor_type) ?? {
        extractor_type: job.extractor_type,
        collection_ids: [],
        ray_job_id: null,
        celery_task_id: null,
        status: 'IN_PROGRESS',
        started_at: chunk.started_at ? new Date(chunk.started_at).toISOString() : null,
        completed_at: null,
        duration_ms: 0,
        documents_written: 0,
        errors: [],
        error: null,
        ms: 0,
      };
      if (!entry.collection_ids.includes(chunk.collection_id)) entry.collection_ids.push(chunk.collection_id);
      entry.documents_written += job.documents_written;
      entry.ms += job.duration_ms;
      entry.errors.push(...job.errors);
      jobs.set(job.extractor_type, entry);
    }
    for (const [name, sample] of Object.entries(o.stages)) {
      const s = stages.get(name) ?? { total_ms: 0, max_ms: 0, count: 0 };
      s.total_ms += sample.total_ms;
      s.max_ms = Math.max(s.max_ms, sample.max_ms);
      s.count += sample.count;
      stages.set(name, s);
    }
  }
  const status = chunks.length === 0 ? base.status : tierStatus(chunks);
  const finished = status !== 'IN_PROGRESS' && status !== 'PENDING';
  info.status = status;
  info.errors = mergeErrors(errors);
  info.error_summary = errorSummary(info.errors);
  info.extractor_jobs = [...jobs.values()].map(({ ms, ...job }) => {
    const jobErrors = mergeErrors(job.errors);
    return {
      ...job,
      errors: jobErrors,
      error: jobErrors[0]?.message ?? null,
      duration_ms: Math.round(ms),
      status: finished ? (jobErrors.length === 0 ? 'COMPLETED' : job.documents_written > 0 ? 'COMPLETED_WITH_ERRORS' : 'FAILED') : 'IN_PROGRESS',
      completed_at: finished ? now.toISOString() : null,
    };
  });
  if (finished) {
    info.completed_at = now.toISOString();
    info.duration_ms = info.started_at ? now.getTime() - new Date(info.started_at).getTime() : null;
  }
  const records = chunks.reduce((n, c) => n + (c.outcome ? c.record_ids.length : 0), 0);
  const bottlenecks = [...stages.entries()]
    .map(([stage_name, s]) => ({
      stage_name,
      avg_time_ms: round(s.count > 0 ? s.total_ms / s.count : 0),
      max_time_ms: round(s.max_ms),
      total_time_ms: round(s.total_ms),
      execution_count: s.count,
    }))
    .sort((a, b) => b.total_time_ms - a.total_time_ms);
  const wall = info.started_at ? now.getTime() - new Date(info.started_at).getTime() : 0;
  info.performance =
    stages.size === 0
      ? null
      : {
          avg_latency_ms: round(records > 0 ? bottlenecks.reduce((n, b) => n + b.total_time_ms, 0) / records : 0),
          stage_count: stages.size,
          timestamp: now.toISOString(),
          total_time_ms: wall,
          bottlenecks,
        };
  return info;
}

/**
 * Source records done / total for the tiers started so far; `percent` counts finished tiers plus the
 * running tier's share, so it never goes back when a later tier adds its records to the total.
 */
export function progressOf(batch: BatchRow, chunks: readonly ChunkRow[], now: Date): BatchProgress {
  const latest = new Map<number, number>();
  for (const c of chunks) latest.set(c.tier, Math.max(latest.get(c.tier) ?? 0, c.generation));
  const current = chunks.filter((c) => latest.get(c.tier) === c.generation);
  const total = current.reduce((n, c) => n + c.record_ids.length, 0);
  const done = current.filter((c) => c.status !== 'PENDING').reduce((n, c) => n + c.record_ids.length, 0);
  const failed = current.reduce((n, c) => n + (c.status === 'FAILED' ? c.record_ids.length : (c.outcome?.records_failed ?? 0)), 0);
  const written = current.reduce((n, c) => n + (c.outcome?.documents_written ?? 0), 0);
  const tiers = Math.max(1, batch.total_tiers);
  const finishedTiers = batch.tier_tasks.filter((t) => ['COMPLETED', 'COMPLETED_WITH_ERRORS', 'FAILED', 'CANCELED'].includes(t.status)).length;
  const terminal = ['COMPLETED', 'COMPLETED_WITH_ERRORS', 'FAILED', 'CANCELED'].includes(batch.status);
  let percent: number;
  if (batch.status === 'COMPLETED' || batch.status === 'COMPLETED_WITH_ERRORS') percent = 100;
  else if (batch.status === 'DRAFT' || batch.status === 'PENDING') percent = 0;
  else {
    const running = batch.current_tier === null ? [] : current.filter((c) => c.tier === batch.current_tier);
    const runningTotal = running.reduce((n, c) => n + c.record_ids.length, 0);
    const runningDone = running.filter((c) => c.status !== 'PENDING').reduce((n, c) => n + c.record_ids.length, 0);
    const share = runningTotal > 0 ? runningDone / runningTotal : 0;
    percent = Math.min(100, ((Math.min(finishedTiers, tiers) + (terminal ? 0 : share)) / tiers) * 100);
  }
  const started = batch.started_at ? new Date(batch.started_at) : null;
  const end = terminal && batch.completed_at ? new Date(batch.completed_at) : now;
  const seconds = started ? Math.max(0.001, (end.getTime() - started.getTime()) / 1000) : null;
  const rate = seconds && done > 0 ? done / seconds : null;
  const eta = terminal ? 0 : seconds && percent > 0 ? (seconds * (100 - percent)) / percent : null;
  return {
    records_total: total,
    records_done: done,
    records_failed: failed,
    documents_written: written,
    percent: round(percent),
    rate_per_second: rate === null ? null : round(rate),
    eta_seconds: eta === null ? null : round(eta),
    started_at: started ? started.toISOString() : null,
    updated_at: batch.progress_at ? new Date(batch.progress_at).toISOString() : null,
  };
}

function round(n: number): number {
  return Math.round(n * 100) / 100;
}
