/** Organization-wide figures: API latency and credits from the request log, and the retriever result cache. */
import type { Knex } from 'knex';
import { latencySql, periodSql, type LatencyRow, type Window } from './window.js';

export type ApiGrouping = 'endpoint' | 'status' | 'day';

export interface ApiRow extends LatencyRow {
  operation_id: string | null;
  method: string | null;
  path: string | null;
  status: number | null;
  period_start: Date | null;
  requests: number;
  errors: number;
}

/** Which namespaces a cache report covers: one, a list (a scoped key), or every one (null). */
export type NamespaceFilter = readonly string[] | null;

const REQUESTS = `count(*)::int as requests, (count(*) filter (where status >= 400))::int as errors, ${latencySql('latency_ms')}`;

export class PlatformAnalyticsQueries {
  constructor(private readonly db: Knex) {}

  private requests(organizationId: string, window: Window) {
    return this.db('request_log').where({ organization_id: organizationId }).where('created_at', '>=', window.start).where('created_at', '<', window.end);
  }

  async apiTotals(organizationId: string, window: Window): Promise<ApiRow> {
    return (await this.requests(organizationId, window).select(this.db.raw(REQUESTS)).first()) as ApiRow;
  }

  /** At most `limit + 1` rows (the extra one says there are more). */
  async apiRows(organizationId: string, window: Window, by: ApiGrouping, limit: number): Promise<ApiRow[]> {
    const q = this.requests(organizationId, window).limit(limit + 1);
    if (by === 'endpoint') {
      q.select('operation_id', 'method', 'path', 'status', this.db.raw(REQUESTS))
        .groupBy('operation_id', 'method', 'path', 'status')
        .orderBy([{ column: 'requests', order: 'desc' }, { column: 'path' }, { column: 'method' }, { column: 'status' }]);
    } else if (by === 'status') {
      q.select('status', this.db.raw(REQUESTS)).groupBy('status').orderBy([{ column: 'requests', order: 'desc' }, { column: 'status' }]);
    } else {
      q.select(this.db.raw(`${periodSql('day', 'created_at')} as period_start`), 'status', this.db.raw(REQUESTS))
        .groupByRaw('1, 2')
        .orderByRaw('1, 2');
    }
    return (await q) as ApiRow[];
  }

  /** Requests and credits per operation (and UTC day, when asked). */
  async creditsByOperation(organizationId: string, window: Window, byDay: boolean) {
    const q = this.requests(organizationId, window)
      .select('operation_id', this.db.raw('count(*)::int as requests'), this.db.raw('coalesce(sum(credits), 0)::float8 as credits'))
      .groupBy('operation_id');
    if (byDay) q.select(this.db.raw(`${periodSql('day', 'created_at')} as period_start`)).groupByRaw(periodSql('day', 'created_at'));
    return (await q) as Array<{ operation_id: string | null; requests: number; credits: number; period_start?: Date }>;
  }

  /** The organization's namespaces (id and name), for narrowing a report to those a scoped key may read. */
  async namespaces(organizationId: string): Promise<Array<{ namespace_id: string; namespace_name: string }>> {
    return (await this.db('namespaces').where({ organization_id: organizationId }).select('namespace_id', 'namespace_name')) as Array<{
      namespace_id: string;
      namespace_name: string;
    }>;
  }

  private inNamespaces(q: Knex.QueryBuilder, column: string, namespaces: NamespaceFilter): Knex.QueryBuilder {
    return namespaces === null ? q : q.whereIn(column, [...namespaces]);
  }

  /** Per retriever that could use the cache in the window: executions and hits (most executions first). */
  async cacheExecutions(organizationId: string, namespaces: NamespaceFilter, window: Window) {
    const q = this.db('retriever_executions as e')
      .join('retrievers as r', 'r.retriever_id', 'e.retriever_id')
      .where('e.organization_id', organizationId)
      .whereNotNull('e.cache_hit')
      .where('e.started_at', '>=', window.start)
      .where('e.started_at', '<', window.end)
      .select('e.retriever_id', 'r.retriever_name', 'r.namespace_id', 'r.cache_config')
      .select(this.db.raw('count(*)::int as cached_executions'), this.db.raw('(count(*) filter (where e.cache_hit))::int as hits'))
      .groupBy('e.retriever_id', 'r.retriever_name', 'r.namespace_id', 'r.cache_config')
      .orderBy([{ column: 'cached_executions', order: 'desc' }, { column: 'e.retriever_id' }]);
    return (await this.inNamespaces(q, 'e.namespace_id', namespaces)) as Array<{
      retriever_id: string;
      retriever_name: string;
      namespace_id: string;
      cache_config: unknown;
      cached_executions: number;
      hits: number;
    }>;
  }

  /** Entries stored now, per retriever: count, bytes and how many are past their expiry. */
  async cacheEntries(organizationId: string, namespaces: NamespaceFilter, now: Date) {
    const q = this.db('retriever_cache_entries')
      .where({ organization_id: organizationId })
      .select('retriever_id')
      .select(
        this.db.raw('count(*)::int as entries'),
        this.db.raw('coalesce(sum(size_bytes), 0)::bigint as bytes'),
        this.db.raw('(count(*) filter (where expires_at <= ?))::int as expired', [now]),
      )
      .groupBy('retriever_id');
    return (await this.inNamespaces(q, 'namespace_id', namespaces)) as Array<{ retriever_id: string; entries: number; bytes: string | number; expired: number }>;
  }

  async cacheEvictions(organizationId: string, namespaces: NamespaceFilter, window: Window) {
    const q = this.db('retriever_cache_evictions')
      .where({ organization_id: organizationId })
      .where('occurred_at', '>=', window.start)
      .where('occurred_at', '<', window.end)
      .select('reason', this.db.raw('coalesce(sum(entries), 0)::int as entries'))
      .groupBy('reason');
    return (await this.inNamespaces(q, 'namespace_id', namespaces)) as Array<{ reason: string; entries: number }>;
  }

  /** The cache settings of the retrievers in scope (for the average TTL of those that cache). */
  async cacheConfigs(organizationId: string, namespaces: NamespaceFilter) {
    const q = this.db('retrievers').where({ organization_id: organizationId }).select('retriever_id', 'cache_config');
    return (await this.inNamespaces(q, 'namespace_id', namespaces)) as Array<{ retriever_id: string; cache_config: unknown }>;
  }
}
