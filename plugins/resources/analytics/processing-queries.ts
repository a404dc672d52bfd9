/** Figures of background work: the organization's tasks (engine) and its batch chunks per extractor. */
import type { Knex } from 'knex';
import type { NamespaceFilter } from './platform-queries.js';
import { latencySql, periodSql, type LatencyRow, type Window } from './window.js';

const RUN_MS = `(extract(epoch from (finished_at - started_at)) * 1000)::float8`;
const WAIT_MS = `greatest(extract(epoch from (started_at - run_at)) * 1000, 0)::float8`;
const FINISHED = `status in ('COMPLETED', 'DEAD', 'FAILED') and started_at is not null and finished_at is not null`;

const TASKS = `count(*)::int as tasks,
  (count(*) filter (where status = 'COMPLETED'))::int as completed,
  (count(*) filter (where status in ('DEAD', 'FAILED')))::int as failed,
  (count(*) filter (where status = 'PENDING'))::int as waiting,
  (count(*) filter (where status = 'RUNNING'))::int as running,
  coalesce(sum(greatest(attempts - 1, 0)), 0)::int as retries,
  coalesce(sum(busy_ms), 0)::float8 as busy_ms,
  ${latencySql(RUN_MS, FINISHED, 'run_')},
  ${latencySql(WAIT_MS, 'started_at is not null', 'wait_')}`;

type Prefixed<P extends string> = { [K in keyof LatencyRow as `${P}${K & string}`]: LatencyRow[K] };

export type TaskFiguresRow = {
  tasks: number;
  completed: number;
  failed: number;
  waiting: number;
  running: number;
  retries: number;
  busy_ms: number;
} & Prefixed<'run_'> & Prefixed<'wait_'>;

export interface ExtractorRow {
  collection_id?: string;
  batches?: number;
  chunks: number;
  objects: number;
  documents_written: number;
  documents_skipped: number;
  failed_objects: number;
  total_ms: number;
  retries: number;
}

export class ProcessingAnalyticsQueries {
  constructor(private readonly db: Knex) {}

  private tasks(organizationId: string, window: Window) {
    return this.db('tasks').where({ organization_id: organizationId }).where('created_at', '>=', window.start).where('created_at', '<', window.end);
  }

  async taskTotals(organizationId: string, window: Window): Promise<TaskFiguresRow> {
    return (await this.tasks(organizationId, window).select(this.db.raw(TASKS)).first()) as TaskFiguresRow;
  }

  async tasksByType(organizationId: string, window: Window): Promise<Array<TaskFiguresRow & { task_type: string }>> {
    return (await this.tasks(organizationId, window)
      .select(this.db.raw('type as task_type'), this.db.raw(TASKS))
      .groupBy('type')
      .orderBy([{ column: 'tasks', order: 'desc' }, { column: 'task_type' }])) as Array<TaskFiguresRow & { task_type: string }>;
  }

  async tasksByDay(organizationId: string, window: Window): Promise<Array<TaskFiguresRow & { period_start: Date }>> {
    return (await this.tasks(organizationId, window)
      .select(this.db.raw(`${periodSql('day', 'created_at')} as period_start`), this.db.raw(TASKS))
      .groupByRaw('1')
      .orderBy('period_start')) as Array<TaskFiguresRow & { period_start: Date }>;
  }

  /** The organization's unfinished tasks now, whenever they were created. */
  async queue(organizationId: string, now: Date): Promise<{ due: number; scheduled: number; running: number }> {
    const row = (await this.db('tasks')
      .where({ organization_id: organizationId })
      .whereIn('status', ['PENDING', 'RUNNING'])
      .select(
        this.db.raw(`(count(*) filter (where status = 'PENDING' and run_at <= ?))::int as due`, [now]),
        this.db.raw(`(count(*) filter (where status = 'PENDING' and run_at > ?))::int as scheduled`, [now]),
        this.db.raw(`(count(*) filter (where status = 'RUNNING'))::int as running`),
      )
      .first()) as { due: number; scheduled: number; running: number };
    return row;
  }

  /** Per collection (most objects first, at most `limit`), the chunks the extractor ran on in the window. */
  async extractorChunks(organizationId: string, namespaces: NamespaceFilter, extractor: string, window: Window, limit: number): Promise<ExtractorRow[]> {
    const q = this.chunkJobs(organizationId, namespaces, extractor, window)
      .select('c.collection_id', this.db.raw(EXTRACTOR))
      .groupBy('c.collection_id')
      .orderBy([{ column: 'objects', order: 'desc' }, { column: 'c.collection_id' }])
      .limit(limit);
    return (await q) as ExtractorRow[];
  }

  async extractorTotals(organizationId: string, namespaces: NamespaceFilter, extractor: string, window: Window): Promise<ExtractorRow> {
    return (await this.chunkJobs(organizationId, namespaces, extractor, window)
      .select(this.db.raw('count(distinct c.batch_id)::int as batches'), this.db.raw(EXTRACTOR))
      .first()) as ExtractorRow;
  }

  private chunkJobs(organizationId: string, namespaces: NamespaceFilter, extractor: string, window: Window) {
    const q = this.db('batch_chunks as c')
      .join('batches as b', 'b.batch_id', 'c.batch_id')
      .crossJoin(this.db.raw(`jsonb_array_elements(coalesce(c.outcome->'extractors', '[]'::jsonb)) as j`))
      .leftJoin('tasks as t', 't.task_id', 'c.task_id')
      .where('b.organization_id', organizationId)
      .whereRaw(`j->>'extractor_type' = ?`, [extractor])
      .where('c.completed_at', '>=', window.start)
      .where('c.completed_at', '<', window.end);
    if (namespaces !== null) q.whereIn('b.namespace_id', [...namespaces]);
    return q;
  }
}

const EXTRACTOR = `count(*)::int as chunks,
  coalesce(sum(jsonb_array_length(c.record_ids)), 0)::int as objects,
  coalesce(sum((j->>'documents_written')::int), 0)::int as documents_written,
  coalesce(sum(coalesce((j->>'documents_skipped')::int, 0)), 0)::int as documents_skipped,
  coalesce(sum((select coalesce(sum((e->>'affected_count')::int), 0) from jsonb_array_elements(coalesce(j->'errors', '[]'::jsonb)) e)), 0)::int as failed_objects,
  coalesce(sum((j->>'duration_ms')::float8), 0)::float8 as total_ms,
  coalesce(sum(greatest(coalesce(t.attempts, 1) - 1, 0)), 0)::int as retries`;
