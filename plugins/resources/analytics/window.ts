/** The time window every analytics report covers: `start_time` (inclusive) to `end_time` (exclusive). */
import { parseTimestamp } from '../../../kernel/dates.js';
import { InputError } from '../../../kernel/errors.js';
import { iso } from '../../../kernel/http/values.js';

export interface Window {
  start: Date;
  end: Date;
}

const DAY_MS = 24 * 3600 * 1000;
const DEFAULT_WINDOW_MS = 7 * DAY_MS;
/** Reports aggregate every row of the window: bound the work one request can ask for. */
export const MAX_WINDOW_DAYS = 366;

export function windowOf(now: Date, query: { start_time?: string; end_time?: string }): Window {
  const end = query.end_time ? parseTimestamp(query.end_time, ['query', 'end_time']) : now;
  const start = query.start_time ? parseTimestamp(query.start_time, ['query', 'start_time']) : new Date(end.getTime() - DEFAULT_WINDOW_MS);
  if (start.getTime() >= end.getTime()) {
    throw new InputError('start_time must be before end_time', { start_time: iso(start), end_time: iso(end) });
  }
  if (end.getTime() - start.getTime() > MAX_WINDOW_DAYS * DAY_MS) {
    throw new InputError(`an analytics window spans at most ${MAX_WINDOW_DAYS} days: ask for a shorter one, or several`, {
      start_time: iso(start),
      end_time: iso(end),
      max_days: MAX_WINDOW_DAYS,
    });
  }
  return { start, end };
}

/** The window as every report echoes it. */
export function windowFields(window: Window): { start_time: string; end_time: string } {
  return { start_time: iso(window.start), end_time: iso(window.end) };
}

/** A figure as reports give it: three decimals, null stays null. */
export function figure(value: number | string | null | undefined): number | null {
  if (value === null || value === undefined) return null;
  const n = Number(value);
  return Number.isFinite(n) ? Math.round(n * 1000) / 1000 : null;
}

/** part / whole, or null when whole is 0. */
export function rate(part: number, whole: number): number | null {
  return whole > 0 ? figure(part / whole) : null;
}

/**
 * SQL for the latency columns of AnalyticsLatency over a numeric expression (trusted SQL, never input), over
 * the rows `filter` selects when given, named with `prefix` (`run_avg_ms`, ...).
 */
export function latencySql(expression: string, filter?: string, prefix = ''): string {
  const only = filter ? ` filter (where ${filter})` : '';
  return [
    `(avg(${expression})${only})::float8 as ${prefix}avg_ms`,
    `(percentile_cont(0.5) within group (order by ${expression})${only})::float8 as ${prefix}p50_ms`,
    `(percentile_cont(0.95) within group (order by ${expression})${only})::float8 as ${prefix}p95_ms`,
    `(percentile_cont(0.99) within group (order by ${expression})${only})::float8 as ${prefix}p99_ms`,
    `(max(${expression})${only})::float8 as ${prefix}max_ms`,
  ].join(',\n  ');
}

export interface LatencyRow {
  avg_ms: number | string | null;
  p50_ms: number | string | null;
  p95_ms: number | string | null;
  p99_ms: number | string | null;
  max_ms: number | string | null;
}

/** AnalyticsLatency from the columns latencySql named (with the same `prefix`). */
export function latencyOf(row: object | undefined, prefix = '') {
  const column = (name: keyof LatencyRow) => (row as Record<string, LatencyRow[keyof LatencyRow]> | undefined)?.[`${prefix}${name}`];
  return {
    avg_ms: figure(column('avg_ms')),
    p50_ms: figure(column('p50_ms')),
    p95_ms: figure(column('p95_ms')),
    p99_ms: figure(column('p99_ms')),
    max_ms: figure(column('max_ms')),
  };
}

/** SQL truncating a timestamptz column to the UTC hour or day, as a timestamptz (`unit` is checked). */
export function periodSql(unit: 'hour' | 'day', column: string): string {
  if (unit !== 'hour' && unit !== 'day') throw new Error(`unknown period ${String(unit)}`);
  return `date_trunc('${unit}', ${column} at time zone 'UTC') at time zone 'UTC'`;
}
