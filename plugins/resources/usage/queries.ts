/** Usage figures computed from the request log, within one organization and one time window. */
import type { Knex } from 'knex';

export interface Window {
  start: Date;
  end: Date;
}

export interface Totals {
  requests: number;
  credits: number;
  errors: number;
  endpoints: number;
  avg_latency_ms: number;
  p95_latency_ms: number;
}

const TOTALS = `count(*)::int as requests,
  coalesce(sum(credits), 0)::float8 as credits,
  (count(*) filter (where status >= 400))::int as errors,
  count(distinct operation_id)::int as endpoints,
  coalesce(avg(latency_ms), 0)::float8 as avg_latency_ms,
  coalesce(percentile_cont(0.95) within group (order by latency_ms), 0)::float8 as p95_latency_ms`;

export class UsageQueries {
  constructor(private readonly db: Knex) {}

  private inWindow(organizationId: string, window: Window) {
    return this.db('request_log')
      .where({ organization_id: organizationId })
      .where('created_at', '>=', window.start)
      .where('created_at', '<', window.end);
  }

  async totals(organizationId: string, window: Window, keyId?: string): Promise<Totals> {
    const q = this.inWindow(organizationId, window).select(this.db.raw(TOTALS));
    if (keyId) q.where({ key_id: keyId });
    return (await q.first()) as Totals;
  }

  async byEndpoint(organizationId: string, window: Window, keyId: string) {
    return (await this.inWindow(organizationId, window)
      .where({ key_id: keyId })
      .groupBy('operation_id', 'method', 'path')
      .select('operation_id', 'method', 'path', this.db.raw(TOTALS))
      .orderBy([{ column: 'requests', order: 'desc' }, { column: 'path', order: 'asc' }])) as Array<
      Totals & { operation_id: string | null; method: string; path: string }
    >;
  }

  async byKey(organizationId: string, window: Window) {
    return (await this.inWindow(organizationId, window)
      .groupBy('key_id')
      .select('key_id', this.db.raw(TOTALS))
      .select(this.db.raw('(select name from api_keys k where k.key_id = request_log.key_id) as key_name'))
      .orderBy('requests', 'desc')) as Array<Totals & { key_id: string | null; key_name: string | null }>;
  }

  async byDay(organizationId: string, window: Window, keyId?: string) {
    const q = this.inWindow(organizationId, window)
      .select(this.db.raw(`to_char(created_at at time zone 'UTC', 'YYYY-MM-DD') as date`), this.db.raw(TOTALS))
      .groupByRaw('1')
      .orderBy('date');
    if (keyId) q.where({ key_id: keyId });
    return (await q) as Array<Totals & { date: string }>;
  }

  async byStatusClass(organizationId: string, window: Window, keyId: string): Promise<Record<string, number>> {
    const rows = (await this.inWindow(organizationId, window)
      .where({ key_id: keyId })
      .select(this.db.raw(`(status / 100)::int || 'xx' as class`), this.db.raw('count(*)::int as requests'))
      .groupByRaw('1')) as Array<{ class: string; requests: number }>;
    return Object.fromEntries(rows.map((r) => [r.class, Number(r.requests)]));
  }
}
