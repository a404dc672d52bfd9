/**
 * Model figures from `inference_call_stats` (kernel/inference/call-stats.ts): per-minute groups summed over a
 * window, latency percentiles read from the summed histogram.
 */
import type { Knex } from 'knex';
import { LATENCY_BUCKETS_MS, type InferenceCallFigures } from '../../../kernel/inference/call-stats.js';
import { figure, rate, type Window } from './window.js';

export type InferenceGroup = InferenceCallFigures;

/** The upper bound of the bucket where the q-quantile falls, at most the slowest call; null without calls. */
export function histogramQuantile(histogram: readonly number[], q: number, maxMs: number): number | null {
  const calls = histogram.reduce((a, b) => a + b, 0);
  if (calls === 0) return null;
  const rank = Math.ceil(q * calls);
  let seen = 0;
  for (const [index, count] of histogram.entries()) {
    seen += count;
    if (seen >= rank) return Math.min(LATENCY_BUCKETS_MS[index] ?? maxMs, maxMs);
  }
  return maxMs;
}

export function inferenceFigures(group: Omit<InferenceGroup, 'model' | 'method'>) {
  return {
    calls: group.calls,
    items: group.items,
    errors: group.errors,
    error_rate: rate(group.errors, group.calls),
    latency: {
      avg_ms: group.calls > 0 ? figure(group.total_ms / group.calls) : null,
      p50_ms: figure(histogramQuantile(group.histogram, 0.5, group.max_ms)),
      p95_ms: figure(histogramQuantile(group.histogram, 0.95, group.max_ms)),
      p99_ms: figure(histogramQuantile(group.histogram, 0.99, group.max_ms)),
      max_ms: group.calls > 0 ? figure(group.max_ms) : null,
    },
    items_per_call: rate(group.items, group.calls),
    items_per_second: group.total_ms > 0 ? figure((group.items * 1000) / group.total_ms) : null,
  };
}

/** Adds groups up (histograms bucket by bucket). */
export function sumGroups(groups: readonly Omit<InferenceGroup, 'model' | 'method'>[]): Omit<InferenceGroup, 'model' | 'method'> {
  const total = { calls: 0, items: 0, errors: 0, total_ms: 0, max_ms: 0, histogram: new Array<number>(LATENCY_BUCKETS_MS.length + 1).fill(0) };
  for (const g of groups) {
    total.calls += g.calls;
    total.items += g.items;
    total.errors += g.errors;
    total.total_ms += g.total_ms;
    total.max_ms = Math.max(total.max_ms, g.max_ms);
    g.histogram.forEach((count, index) => {
      if (index < total.histogram.length) total.histogram[index]! += count;
    });
  }
  return total;
}

export class InferenceAnalyticsQueries {
  constructor(private readonly db: Knex) {}

  /** Per model and method over the window, most calls first (histograms summed in SQL, bucket by bucket). */
  async groups(window: Window): Promise<InferenceGroup[]> {
    const buckets = LATENCY_BUCKETS_MS.length + 1;
    const rows = (await this.db('inference_call_stats')
      .where('minute', '>=', window.start)
      .where('minute', '<', window.end)
      .select(
        'model',
        'method',
        this.db.raw('sum(calls)::int as calls'),
        this.db.raw('sum(items)::int as items'),
        this.db.raw('sum(errors)::int as errors'),
        this.db.raw('sum(total_ms)::float8 as total_ms'),
        this.db.raw('max(max_ms)::float8 as max_ms'),
        this.db.raw(`array[${Array.from({ length: buckets }, (_, i) => `sum((histogram->>${i})::int)::int`).join(', ')}] as histogram`),
      )
      .groupBy('model', 'method')
      .orderBy([{ column: 'calls', order: 'desc' }, { column: 'model' }, { column: 'method' }])) as InferenceGroup[];
    return rows.map((row) => ({ ...row, total_ms: Number(row.total_ms), max_ms: Number(row.max_ms), histogram: row.histogram.map(Number) }));
  }
}
