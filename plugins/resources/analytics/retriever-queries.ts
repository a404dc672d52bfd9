/**
 * Figures of one saved retriever, from its recorded executions and interactions within a window. A
 * user-scoped key (`principalId`) counts only the executions it ran, and the interactions tied to them.
 */
import type { Knex } from 'knex';
import { latencySql, periodSql, type LatencyRow, type Window } from './window.js';

export interface ExecutionTotals extends LatencyRow {
  executions: number;
  completed: number;
  failed: number;
  budget_exceeded: number;
  cached_executions: number;
  cache_hits: number;
  avg_results: number | null;
  credits: number;
  distinct_inputs: number;
}

export interface ExecutionPeriod extends ExecutionTotals {
  period_start: Date;
}

export interface StageFigures {
  stage_name: string;
  stage_id: string;
  executions: number;
  completed: number;
  failed: number;
  skipped: number;
  optimized_away: number;
  cache_hits: number;
  avg_ms: number | null;
  p50_ms: number | null;
  p95_ms: number | null;
  max_ms: number | null;
  total_ms: number;
  avg_input_count: number | null;
  avg_output_count: number | null;
  avg_inference_calls: number | null;
}

export type SignalGrouping = 'position' | 'document' | 'session';

export interface SignalGroupRow {
  key: string | number | null;
  interactions: number;
  first_at: Date;
  last_at: Date;
}

export interface SlowExecutionRow {
  execution_id: string;
  retriever_version: number;
  status: 'completed' | 'failed' | 'budget_exceeded';
  duration_ms: number;
  started_at: Date;
  inputs: unknown;
  total_results: number;
  cache_hit: boolean | null;
  error: string | null;
  stage_statistics: { stages?: Record<string, { stage_id?: string; status?: string; duration_ms?: number }> } | string;
}

const TOTALS = `count(*)::int as executions,
  (count(*) filter (where status = 'completed'))::int as completed,
  (count(*) filter (where status = 'failed'))::int as failed,
  (count(*) filter (where status = 'budget_exceeded'))::int as budget_exceeded,
  count(cache_hit)::int as cached_executions,
  (count(*) filter (where cache_hit))::int as cache_hits,
  avg(total_results)::float8 as avg_results,
  coalesce(sum((stage_statistics->>'credits_used')::float8), 0)::float8 as credits,
  count(distinct inputs)::int as distinct_inputs,
  ${latencySql('duration_ms')}`;

/** A stage's time counts when it ran (not when skipped or folded away by the optimizer). */
const RAN = `s.value->>'status' in ('completed', 'failed')`;
const STAGE_MS = `(s.value->>'duration_ms')::float8`;

const STAGES = `s.key as stage_name, coalesce(s.value->>'stage_id', '') as stage_id,
  count(*)::int as executions,
  (count(*) filter (where s.value->>'status' = 'completed'))::int as completed,
  (count(*) filter (where s.value->>'status' = 'failed'))::int as failed,
  (count(*) filter (where s.value->>'status' = 'skipped'))::int as skipped,
  (count(*) filter (where s.value->>'status' = 'optimized_away'))::int as optimized_away,
  (count(*) filter (where s.value->>'cache_hit' = 'true'))::int as cache_hits,
  (avg(${STAGE_MS}) filter (where ${RAN}))::float8 as avg_ms,
  (percentile_cont(0.5) within group (order by ${STAGE_MS}) filter (where ${RAN}))::float8 as p50_ms,
  (percentile_cont(0.95) within group (order by ${STAGE_MS}) filter (where ${RAN}))::float8 as p95_ms,
  (max(${STAGE_MS}) filter (where ${RAN}))::float8 as max_ms,
  coalesce(sum(${STAGE_MS}) filter (where ${RAN}), 0)::float8 as total_ms,
  (avg((s.value->>'input_count')::float8) filter (where ${RAN}))::float8 as avg_input_count,
  (avg((s.value->>'output_count')::float8) filter (where ${RAN}))::float8 as avg_output_count,
  (avg((s.value->>'inference_calls')::float8) filter (where ${RAN}))::float8 as avg_inference_calls`;

export class RetrieverAnalyticsQueries {
  constructor(private readonly db: Knex) {}

  private executions(retrieverId: string, principalId: string | null, window: Window) {
    const q = this.db('retriever_executions')
      .where({ retriever_id: retrieverId })
      .where('started_at', '>=', window.start)
      .where('started_at', '<', window.end);
    if (principalId) q.where({ principal_id: principalId });
    return q;
  }

  async totals(retrieverId: string, principalId: string | null, window: Window): Promise<ExecutionTotals> {
    return (await this.executions(retrieverId, principalId, window).select(this.db.raw(TOTALS)).first()) as ExecutionTotals;
  }

  async periods(retrieverId: string, principalId: string | null, window: Window, unit: 'hour' | 'day'): Promise<ExecutionPeriod[]> {
    return (await this.executions(retrieverId, principalId, window)
      .select(this.db.raw(`${periodSql(unit, 'started_at')} as period_start`), this.db.raw(TOTALS))
      .groupByRaw('1')
      .orderBy('period_start')) as ExecutionPeriod[];
  }

  async stages(retrieverId: string, principalId: string | null, window: Window): Promise<StageFigures[]> {
    const q = this.db('retriever_executions as e')
      .crossJoin(this.db.raw(`jsonb_each(coalesce(e.stage_statistics->'stages', '{}'::jsonb)) as s`))
      .where('e.retriever_id', retrieverId)
      .where('e.started_at', '>=', window.start)
      .where('e.started_at', '<', window.end)
      .select(this.db.raw(STAGES))
      .groupByRaw('1, 2')
      .orderByRaw('1, 2');
    if (principalId) q.where('e.principal_id', principalId);
    return (await q) as StageFigures[];
  }

  async slowest(retrieverId: string, principalId: string | null, window: Window, limit: number): Promise<SlowExecutionRow[]> {
    return (await this.executions(retrieverId, principalId, window)
      .select('execution_id', 'retriever_version', 'status', 'duration_ms', 'started_at', 'inputs', 'total_results', 'cache_hit', 'error', 'stage_statistics')
      .orderBy([{ column: 'duration_ms', order: 'desc' }, { column: 'execution_id', order: 'asc' }])
      .limit(limit)) as SlowExecutionRow[];
  }

  /** The retriever's interactions in the window (a user-scoped key: those tied to executions it ran). */
  private interactions(retrieverId: string, principalId: string | null, window: Window) {
    const q = this.db('retriever_interactions as i')
      .where('i.retriever_id', retrieverId)
      .where('i.created_at', '>=', window.start)
      .where('i.created_at', '<', window.end);
    if (principalId) {
      q.whereIn('i.execution_id', this.db('retriever_executions').select('execution_id').where({ retriever_id: retrieverId, principal_id: principalId }));
    }
    return q;
  }

  async signalTotals(retrieverId: string, principalId: string | null, window: Window) {
    const totals = (await this.interactions(retrieverId, principalId, window)
      .select(
        this.db.raw('count(*)::int as interactions'),
        this.db.raw('count(distinct i.session_id)::int as sessions'),
        this.db.raw('count(distinct i.document_id)::int as documents'),
      )
      .first()) as { interactions: number; sessions: number; documents: number };
    const counts = (await this.interactions(retrieverId, principalId, window)
      .crossJoin(this.db.raw('jsonb_array_elements_text(i.interaction_types) as t(type)'))
      .select('t.type', this.db.raw('count(*)::int as n'))
      .groupBy('t.type')) as Array<{ type: string; n: number }>;
    return { ...totals, counts: Object.fromEntries(counts.map((c) => [c.type, Number(c.n)])) };
  }

  /** At most `limit + 1` groups (the extra one says there are more), in the grouping's order. */
  async signalGroups(retrieverId: string, principalId: string | null, window: Window, by: SignalGrouping, limit: number): Promise<SignalGroupRow[]> {
    const column = SIGNAL_COLUMN[by];
    const q = this.interactions(retrieverId, principalId, window)
      .select(
        this.db.raw(`${column} as key`),
        this.db.raw('count(*)::int as interactions'),
        this.db.raw('min(i.created_at) as first_at'),
        this.db.raw('max(i.created_at) as last_at'),
      )
      .groupByRaw('1')
      .limit(limit + 1);
    if (by === 'position') q.whereNotNull('i.position').orderByRaw('1 asc');
    else if (by === 'document') q.orderByRaw('2 desc, 1 asc');
    else q.orderByRaw('4 desc, 1 asc nulls last');
    return (await q) as SignalGroupRow[];
  }

  /** Interactions per type within each of the given groups. */
  async signalCounts(retrieverId: string, principalId: string | null, window: Window, by: SignalGrouping, keys: ReadonlyArray<string | number | null>) {
    const column = SIGNAL_COLUMN[by];
    const present = keys.filter((k): k is string | number => k !== null);
    const q = this.interactions(retrieverId, principalId, window)
      .crossJoin(this.db.raw('jsonb_array_elements_text(i.interaction_types) as t(type)'))
      .select(this.db.raw(`${column} as key`), 't.type', this.db.raw('count(*)::int as n'))
      .groupByRaw('1, 2')
      .where((w) => {
        if (present.length > 0) w.whereIn(column, present);
        if (present.length < keys.length) w.orWhereNull(column);
        if (keys.length === 0) w.whereRaw('false');
      });
    return (await q) as Array<{ key: string | number | null; type: string; n: number }>;
  }
}

const SIGNAL_COLUMN: Record<SignalGrouping, string> = { position: 'i.position', document: 'i.document_id', session: 'i.session_id' };
