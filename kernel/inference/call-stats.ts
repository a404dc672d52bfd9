/**
 * Model latency and throughput for `/v1/analytics/inference/performance`. The inference client reports
 * every call (one request to a worker, retries included); this process adds them up per minute, model and
 * method in memory — with a histogram of latencies, so percentiles over any window can be read back — and
 * writes one row per group to `inference_call_stats` every FLUSH_EVERY_MS and at shutdown. Models serve
 * every organization alike: the figures are the deployment's, not one organization's.
 */
import type { Knex } from 'knex';
import type { Logger } from 'pino';
import type { Clock } from '../clock.js';
import type { Migration } from '../db/migrations.js';

/** Upper bounds (ms) of the latency histogram's buckets; a last bucket holds everything slower. */
export const LATENCY_BUCKETS_MS = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1_000, 2_000, 5_000, 10_000, 30_000] as const;
const FLUSH_EVERY_MS = 30_000;
/** Groups held before a write is forced (bounds memory whatever the number of models). */
const MAX_GROUPS = 1_000;

export const inferenceCallStatsMigrations: Migration[] = [
  {
    name: '0007_inference_call_stats',
    async up(db) {
      await db.schema.createTable('inference_call_stats', (t) => {
        t.bigIncrements('id').primary();
        t.timestamp('minute', { useTz: true }).notNullable();
        t.text('model').notNullable();
        t.text('method').notNullable();
        t.integer('calls').notNullable();
        t.integer('items').notNullable();
        t.integer('errors').notNullable();
        t.double('total_ms').notNullable();
        t.double('max_ms').notNullable();
        // Calls per LATENCY_BUCKETS_MS bucket (one more entry for the slowest).
        t.jsonb('histogram').notNullable();
        t.index(['minute']);
      });
    },
  },
];

export interface InferenceCall {
  method: string;
  model: string;
  items: number;
  ms: number;
  ok: boolean;
}

/** One model and method's calls over some time (a minute here; any window in the analytics). */
export interface InferenceCallFigures {
  model: string;
  method: string;
  calls: number;
  items: number;
  errors: number;
  total_ms: number;
  max_ms: number;
  histogram: number[];
}

interface Group extends InferenceCallFigures {
  minute: Date;
}

export function bucketOf(ms: number): number {
  const index = LATENCY_BUCKETS_MS.findIndex((bound) => ms <= bound);
  return index === -1 ? LATENCY_BUCKETS_MS.length : index;
}

export class InferenceCallStats {
  private groups = new Map<string, Group>();
  private timer: NodeJS.Timeout | undefined;
  private writing: Promise<void> = Promise.resolve();

  constructor(
    private readonly db: Knex,
    private readonly clock: Clock,
    private readonly log: Logger,
  ) {}

  record(call: InferenceCall): void {
    const now = this.clock.now().getTime();
    const minute = new Date(now - (now % 60_000));
    const key = `${minute.getTime()}\u0000${call.model}\u0000${call.method}`;
    let group = this.groups.get(key);
    if (!group) {
      group = { minute, model: call.model, method: call.method, calls: 0, items: 0, errors: 0, total_ms: 0, max_ms: 0, histogram: new Array<number>(LATENCY_BUCKETS_MS.length + 1).fill(0) };
      this.groups.set(key, group);
    }
    group.calls += 1;
    group.items += call.items;
    if (!call.ok) group.errors += 1;
    group.total_ms += call.ms;
    group.max_ms = Math.max(group.max_ms, call.ms);
    group.histogram[bucketOf(call.ms)]! += 1;
    if (this.groups.size >= MAX_GROUPS) void this.flush();
  }

  start(): void {
    this.timer = setInterval(() => void this.flush(), FLUSH_EVERY_MS);
    this.timer.unref();
  }

  /** Writes what was recorded so far; a refused write is logged and its figures dropped (they are statistics). */
  flush(): Promise<void> {
    const groups = [...this.groups.values()];
    this.groups = new Map();
    if (groups.length === 0) return this.writing;
    this.writing = this.writing.then(async () => {
      try {
        await this.db('inference_call_stats').insert(groups.map((g) => ({ ...g, histogram: JSON.stringify(g.histogram) })));
      } catch (err) {
        this.log.warn({ err, groups: groups.length }, 'inference call statistics could not be written; dropped');
      }
    });
    return this.writing;
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.flush();
  }
}
