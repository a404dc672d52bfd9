/**
 * A tier's TierTaskInfo is computed from its chunks' outcomes (each chunk's outcome is stored once, so a
 * redelivered chunk never counts twice; see ledger.ts for how runs of a retried batch add up), and the
 * batch's progress from all its chunks.
 */
import type { components } from '../../../generated/openapi.js';
import type { ProcessingError, StageSample } from '../../../kernel/processing.js';
import { entriesOf, tierLedger, visitResults, type LedgerEntry, type LedgerState, type RecordVisit, type TierLedger } from './ledger.js';
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
    documents_skipped: 0,
    skipped_reasons: {},
    extractor_jobs: [],
  };
}

/** What a tier's records add up to: one count per (collection, record), by its latest result. */
interface TierTally {
  pending: number;
  /** Never run, or stopped, because of a cancel. */
  stopped: number;
  /** Failed, or gone before it ran. */
  failed: number;
  written: number;
  /** Left out by the collection's source filter (a final result, like written and skipped). */
  filtered: number;
  fetched: number;
  afterFilter: number;
  submitted: number;
  documents: number;
  skipped: number;
  skipReasons: Record<string, number>;
}

function tally(): TierTally {
  return { pending: 0, stopped: 0, failed: 0, written: 0, filtered: 0, fetched: 0, afterFilter: 0, submitted: 0, documents: 0, skipped: 0, skipReasons: {} };
}

/** One chunk's records counted by their result in it. */
function tallyChunk(chunk: ChunkRow): TierTally {
  const t = tally();
  visitResults(chunk, (_, r) => count(t, r));
  return t;
}

function addTally(t: TierTally, add: Readonly<TierTally>): void {
  t.pending += add.pending;
  t.stopped += add.stopped;
  t.failed += add.failed;
  t.written += add.written;
  t.filtered += add.filtered;
  t.fetched += add.fetched;
  t.afterFilter += add.afterFilter;
  t.submitted += add.submitted;
  t.documents += add.documents;
  t.skipped += add.skipped;
  for (const [reason, n] of Object.entries(add.skipReasons)) t.skipReasons[reason] = (t.skipReasons[reason] ?? 0) + n;
}

/**
 * A value computed from one chunk, kept while the chunk is read as the same record list, status and outcome
 * (the batch store hands out the same objects for a chunk it already read): a chunk's records are visited
 * once when it is planned and once when it ends, not again at every poll of the batch and every other
 * chunk's end (10,000 records were visited again 5-9 ms of the HTTP thread a poll; with 200 chunks of 500,
 * a 100,000-record tier visited 20 million records to aggregate its chunk ends).
 */
export class ChunkMemo<T> {
  private readonly byRecords = new WeakMap<readonly string[], { status: ChunkRow['status']; outcome: ChunkRow['outcome']; value: T }>();

  constructor(private readonly compute: (chunk: ChunkRow) => T) {}

  of(chunk: ChunkRow): T {
    const kept = this.byRecords.get(chunk.record_ids);
    if (kept && kept.status === chunk.status && kept.outcome === chunk.outcome) return kept.value;
    const value = this.compute(chunk);
    this.byRecords.set(chunk.record_ids, { status: chunk.status, outcome: chunk.outcome, value });
    return value;
  }
}

/** Each chunk's tier tally, for aggregating a tier's chunks (see ChunkMemo). */
export class ChunkTallies extends ChunkMemo<Readonly<TierTally>> {
  constructor() {
    super(tallyChunk);
  }
}

function count(t: TierTally, entry: Readonly<RecordVisit>): void {
  const state = entry.state;
  if (state === 'pending') t.pending += 1;
  else if (state === 'unrun' || state === 'canceled') t.stopped += 1;
  else if (state === 'failed' || state === 'gone') t.failed += 1;
  else if (state === 'written') t.written += 1;
  else if (state === 'filtered') t.filtered += 1;
  const ran = state !== 'pending' && state !== 'unrun';
  if (ran && state !== 'gone') t.fetched += 1;
  if (ran && state !== 'gone' && state !== 'filtered') t.afterFilter += 1;
  if (entry.submitted) t.submitted += 1;
  t.documents += entry.documents;
  if (state === 'skipped') {
    t.skipped += 1;
    const reason = entry.skip_reason ?? 'no_input_field';
    t.skipReasons[reason] = (t.skipReasons[reason] ?? 0) + 1;
  }
}

/**
 * IN_PROGRESS while a record waits for its chunk; CANCELED when a record never ran (or was stopped) because
 * of a cancel; FAILED when records failed and none was processed; COMPLETED_WITH_ERRORS when some failed;
 * else COMPLETED (skipped and filtered records are not failures).
 */
function statusOf(t: TierTally): BatchStatus {
  if (t.pending > 0) return 'IN_PROGRESS';
  if (t.stopped > 0) return 'CANCELED';
  if (t.failed > 0 && t.written === 0) return 'FAILED';
  if (t.failed > 0) return 'COMPLETED_WITH_ERRORS';
  return 'COMPLETED';
}

/** A tier's status from its ledger (see statusOf). */
export function tierStatus(ledger: TierLedger): BatchStatus {
  const t = tally();
  for (const [, , entry] of entriesOf(ledger)) count(t, entry);
  return statusOf(t);
}

/**
 * Whether a tier's chunks all come from one run. Its chunks then split its records, each record in one
 * chunk per collection (planning chunks a tier's records once per run), so each chunk's results are their
 * records' latest: no ledger of the tier to build.
 */
function oneRun(chunks: readonly ChunkRow[]): boolean {
  const first = chunks[0];
  return first !== undefined && chunks.every((c) => c.generation === first.generation);
}

/**
 * A tier's tally, and which of a chunk's records it gave their latest result (asked only about the ids of
 * errors): from the ledger of the tier, or — one run — chunk by chunk, each chunk's own records.
 */
function readTier(chunks: readonly ChunkRow[], tallies: ChunkTallies): { t: TierTally; latest: (chunk: ChunkRow, id: string) => boolean } {
  const t = tally();
  if (!oneRun(chunks)) {
    const ledger = tierLedger(chunks);
    for (const [, , entry] of entriesOf(ledger)) count(t, entry);
    return { t, latest: (chunk, id) => ledger.get(chunk.collection_id)?.get(id)?.chunk === chunk };
  }
  for (const chunk of chunks) addTally(t, tallies.of(chunk));
  const records = new Map<ChunkRow, Set<string>>();
  const latest = (chunk: ChunkRow, id: string) => {
    let ids = records.get(chunk);
    if (!ids) records.set(chunk, (ids = new Set(chunk.record_ids)));
    return ids.has(id);
  };
  return { t, latest };
}

/** What merging needs of an error (processing errors, and the stored tier errors). */
interface ErrorLike {
  error_type: string;
  message: string;
  component?: string | null;
  collection_id?: string | null;
  stage?: string | null;
  affected_document_ids: string[];
  affected_count: number;
}

export function mergeErrors<E extends ErrorLike>(errors: readonly E[]): E[] {
  const merged: E[] = [];
  for (const error of errors) {
    const same = merged.find(
      (e) =>
        e.error_type === error.error_type &&
        e.message === error.message &&
        e.component === error.component &&
        e.stage === error.stage &&
        (e.collection_id ?? null) === (error.collection_id ?? null),
    );
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

/**
 * Recomputes a tier's counters, jobs, errors and performance from its chunks of every generation. Counters
 * count (collection, source record) pairs by their latest result: documents written by an earlier run stay
 * counted, a record run again is counted once. Errors are those of records whose latest run failed.
 */
export function aggregateTier(base: TierTaskInfo, chunks: readonly ChunkRow[], now: Date, tallies: ChunkTallies = new ChunkTallies()): TierTaskInfo {
  // A chunk finishing aggregates its whole tier: over a one-run tier this is counted chunk by chunk, with no
  // ledger entry made per record (for 10,000 records in 20 chunks, the ledger made the 20 aggregations cost ~0.5 s).
  const { t, latest } = readTier(chunks, tallies);
  const info: TierTaskInfo = {
    ...base,
    source_documents_fetched: t.fetched,
    documents_after_source_filter: t.afterFilter,
    documents_missing_input_fields: t.skipReasons.no_input_field ?? 0,
    documents_submitted_to_engine: t.submitted,
    documents_written: t.documents,
    documents_skipped: t.skipped,
    skipped_reasons: t.skipReasons,
  };
  const errors: ProcessingError[] = [];
  const jobs = new Map<string, ExtractorJob & { ms: number }>();
  const stages = new Map<string, StageSample[]>();
  for (const chunk of chunks) {
    const o = chunk.outcome;
    if (!o) continue;
    // Only failures still standing: the ids this chunk's run gave their latest result.
    const standing = (error: ProcessingError): ProcessingError | undefined => {
      const ids = error.affected_document_ids.filter((id) => latest(chunk, id));
      if (ids.length === 0) return undefined;
      return ids.length === error.affected_document_ids.length ? error : { ...error, affected_document_ids: ids, affected_count: ids.length };
    };
    errors.push(...o.errors.map(standing).filter((e): e is ProcessingError => e !== undefined));
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
        documents_skipped: 0,
        errors: [],
        error: null,
        ms: 0,
      };
      if (!entry.collection_ids.includes(chunk.collection_id)) entry.collection_ids.push(chunk.collection_id);
      entry.documents_written += job.documents_written;
      entry.documents_skipped = (entry.documents_skipped ?? 0) + (job.documents_skipped ?? 0);
      entry.ms += job.duration_ms;
      entry.errors.push(...job.errors.map(standing).filter((e): e is ProcessingError => e !== undefined));
      jobs.set(job.extractor_type, entry);
    }
    for (const [name, sample] of Object.entries(o.stages)) stages.set(name, [...(stages.get(name) ?? []), sample]);
  }
  const status = statusOf(t);
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
    .map(([stage_name, samples]) => {
      const total = samples.reduce((n, s) => n + s.total_ms, 0);
      const count = samples.reduce((n, s) => n + s.count, 0);
      return {
        stage_name,
        avg_time_ms: round(count > 0 ? total / count : 0),
        max_time_ms: round(Math.max(...samples.map((s) => s.max_ms))),
        total_time_ms: round(total),
        wall_time_ms: round(wallTime(samples)),
        execution_count: count,
      };
    })
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
 * How long a stage was busy by the clock: the union of the spans (first start to last end) it had in each
 * chunk. Chunks run side by side overlap, so this is at most the summed time. Samples without spans (stored
 * before spans were recorded) count their summed time.
 */
function wallTime(samples: readonly StageSample[]): number {
  const spans = samples
    .filter((s) => s.first_started_ms !== undefined && s.last_ended_ms !== undefined)
    .map((s) => [s.first_started_ms!, Math.max(s.first_started_ms!, s.last_ended_ms!)] as const)
    .sort((a, b) => a[0] - b[0]);
  let wall = samples.filter((s) => s.first_started_ms === undefined || s.last_ended_ms === undefined).reduce((n, s) => n + s.total_ms, 0);
  let current: [number, number] | undefined;
  for (const [start, end] of spans) {
    if (current && start <= current[1]) current[1] = Math.max(current[1], end);
    else {
      if (current) wall += current[1] - current[0];
      current = [start, end];
    }
  }
  if (current) wall += current[1] - current[0];
  // Spans are whole milliseconds: the stage was busy at least as long as its longest run.
  return Math.max(wall, ...samples.map((s) => s.max_ms));
}

/**
 * Progress in source records — objects at tier 0, source documents at later tiers — each counted once
 * however many collections of its tier read it. A record is done when every collection reading it has a
 * final result for it (written, skipped, filtered, failed or gone). `percent` is done / total of the tiers
 * started so far (a later tier adds its records when it starts), `rate_per_second` the records done by the
 * current run (a retry starts a new run) per second since it started, and `eta_seconds` the records left
 * at that rate: the three always agree.
 */
/** What the batch's chunks say about its records, counted once per record across the tier's collections. */
export interface ProgressCounts {
  total: number;
  done: number;
  /** Done by this run (the batch's current generation): the rate is theirs. */
  doneThisRun: number;
  failed: number;
  skipped: number;
  written: number;
}

/** Each chunk's progress counts (see ChunkMemo). */
export class ChunkCounts extends ChunkMemo<ChunkCount> {
  constructor() {
    super(countChunk);
  }
}

/** What one chunk's results add to the counts (all but `doneThisRun`, which depends on the batch's run). */
type ChunkCount = Omit<ProgressCounts, 'doneThisRun'>;

/** A chunk's progress counts, from its tier tally: records by state, the same classification as the tier's counters. */
function countChunk(chunk: ChunkRow): ChunkCount {
  const t = tallyChunk(chunk);
  // Final results: written, skipped, filtered, failed and gone (counted with failed); pending and stopped are not.
  const done = t.written + t.skipped + t.filtered + t.failed;
  return { total: done + t.pending + t.stopped, done, failed: t.failed, skipped: t.skipped, written: t.documents };
}

export function countProgress(batch: Pick<BatchRow, 'generation'>, chunks: readonly ChunkRow[], kept: ChunkCounts = new ChunkCounts()): ProgressCounts {
  const byTier = new Map<number, ChunkRow[]>();
  for (const c of chunks) byTier.set(c.tier, [...(byTier.get(c.tier) ?? []), c]);
  const counts: ProgressCounts = { total: 0, done: 0, doneThisRun: 0, failed: 0, skipped: 0, written: 0 };
  for (const tierChunks of byTier.values()) {
    if (countedChunkByChunk(batch, tierChunks, counts, kept)) continue;
    const units = new Map<string, LedgerEntry[]>();
    for (const [, id, entry] of entriesOf(tierLedger(tierChunks))) {
      const entries = units.get(id);
      if (entries) entries.push(entry);
      else units.set(id, [entry]);
      counts.written += entry.documents;
    }
    for (const entries of units.values()) {
      counts.total += 1;
      if (!entries.every((e) => FINAL.has(e.state))) continue;
      counts.done += 1;
      if (entries.some((e) => e.chunk.generation === batch.generation)) counts.doneThisRun += 1;
      if (entries.some((e) => e.state === 'failed' || e.state === 'gone')) counts.failed += 1;
      else if (entries.some((e) => e.state === 'skipped') && !entries.some((e) => e.state === 'written')) counts.skipped += 1;
    }
  }
  return counts;
}

/**
 * The common tier: one collection, one run. Its chunks then split its records (each record in exactly one
 * chunk), so each record's one result is counted as its chunk gives it, with no ledger of the tier to build:
 * a client polling a running batch of 10,000 records no longer has 10,000 entries made for each poll.
 * False (nothing counted) for any other tier.
 */
function countedChunkByChunk(batch: Pick<BatchRow, 'generation'>, chunks: readonly ChunkRow[], counts: ProgressCounts, kept: ChunkCounts): boolean {
  const first = chunks[0];
  if (!first || chunks.some((c) => c.collection_id !== first.collection_id || c.generation !== first.generation)) return false;
  for (const chunk of chunks) {
    const add = kept.of(chunk);
    counts.total += add.total;
    counts.written += add.written;
    counts.done += add.done;
    if (chunk.generation === batch.generation) counts.doneThisRun += add.done;
    counts.failed += add.failed;
    counts.skipped += add.skipped;
  }
  return true;
}

export function progressOf(batch: BatchRow, chunks: readonly ChunkRow[], now: Date): BatchProgress {
  return progressFrom(batch, countProgress(batch, chunks), now);
}

/** The progress body: the counts, with percent, rate and ETA as of `now`. */
export function progressFrom(batch: BatchRow, counts: ProgressCounts, now: Date): BatchProgress {
  const { total, done, doneThisRun } = counts;
  const terminal = TERMINAL.includes(batch.status);
  const percent = total > 0 ? (done / total) * 100 : batch.status === 'COMPLETED' || batch.status === 'COMPLETED_WITH_ERRORS' ? 100 : 0;
  const started = batch.started_at ? new Date(batch.started_at) : null;
  const end = terminal && batch.completed_at ? new Date(batch.completed_at) : now;
  const seconds = started ? Math.max(0.001, (end.getTime() - started.getTime()) / 1000) : null;
  const rate = seconds && doneThisRun > 0 ? doneThisRun / seconds : null;
  const eta = terminal ? 0 : rate ? (total - done) / rate : null;
  return {
    records_total: total,
    records_done: done,
    records_failed: counts.failed,
    records_skipped: counts.skipped,
    documents_written: counts.written,
    percent: round(percent),
    rate_per_second: rate === null ? null : round(rate),
    eta_seconds: eta === null ? null : round(eta),
    started_at: started ? started.toISOString() : null,
    updated_at: batch.progress_at ? new Date(batch.progress_at).toISOString() : null,
  };
}

/** Batches whose counts are kept at most. */
const COUNTED_BATCHES = 256;

/**
 * Progress counts of recently read batches, each kept while its batch row says nothing changed. Every chunk
 * that finishes moves the row's `updated_at` in the same transaction, so a row with the same generation,
 * status and times has the same chunk results: a client polling a running batch of 10,000 records no longer
 * has every chunk outcome read and counted again (about 7 ms of the HTTP thread per poll).
 */
export class ProgressCountCache {
  private readonly entries = new Map<string, { version: string; counts: ProgressCounts }>();
  private readonly chunks = new ChunkCounts();

  async counts(batch: BatchRow, chunksOf: () => Promise<readonly ChunkRow[]>): Promise<ProgressCounts> {
    const version = [batch.generation, batch.status, timeOf(batch.updated_at), timeOf(batch.progress_at)].join('|');
    const hit = this.entries.get(batch.batch_id);
    if (hit?.version === version) return hit.counts;
    const counts = countProgress(batch, await chunksOf(), this.chunks);
    this.entries.delete(batch.batch_id);
    this.entries.set(batch.batch_id, { version, counts });
    if (this.entries.size > COUNTED_BATCHES) this.entries.delete(this.entries.keys().next().value as string);
    return counts;
  }
}

function timeOf(value: Date | string | null): number | null {
  return value === null ? null : new Date(value).getTime();
}

const TERMINAL: readonly BatchStatus[] = ['COMPLETED', 'COMPLETED_WITH_ERRORS', 'FAILED', 'CANCELED'];
const FINAL: ReadonlySet<LedgerState> = new Set(['written', 'skipped', 'filtered', 'failed', 'gone']);

function round(n: number): number {
  return Math.round(n * 100) / 100;
}
