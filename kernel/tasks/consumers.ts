/**
 * Who takes tasks, and what waits for them. Every process that runs tasks (`tessera serve` with
 * TESSERA_RUN_TASKS on, `tessera worker`) keeps a row in `task_consumers` fresh while it runs, whichever
 * transport brings it tasks (the database runner or NATS JetStream), so any process sharing the database
 * can tell whether anyone is taking tasks and how long the oldest due task has been waiting.
 */
import { hostname } from 'node:os';
import type { Knex } from 'knex';
import type { Logger } from 'pino';
import type { Clock } from '../clock.js';
import type { Migration } from '../db/migrations.js';
import { newId } from '../ids.js';

/** How often a consumer refreshes its row; one silent for three beats is taken for gone. */
export const CONSUMER_HEARTBEAT_MS = 5_000;
const CONSUMER_GONE_AFTER_MS = 3 * CONSUMER_HEARTBEAT_MS;

export const taskConsumerMigrations: Migration[] = [
  {
    name: '0003_task_consumers',
    async up(db) {
      await db.schema.createTable('task_consumers', (t) => {
        t.text('consumer_id').primary();
        t.text('host').notNullable();
        t.integer('pid').notNullable();
        t.text('transport').notNullable();
        t.timestamp('started_at', { useTz: true }).notNullable();
        t.timestamp('heartbeat_at', { useTz: true }).notNullable();
      });
    },
  },
];

/** The task queue as seen from outside: what waits, and whether anyone takes it. */
export interface TaskBacklogReport {
  /** Due tasks not taken yet. */
  queued: number;
  /** Seconds the oldest of them has been due (null when none waits). */
  oldest_queued_age_seconds: number | null;
  /** Processes taking tasks now. */
  live_consumers: number;
  /** Tasks have waited longer than the warning threshold and no process takes them. */
  waiting_for_worker: boolean;
}

export class TaskBacklog {
  constructor(
    private readonly db: Knex,
    private readonly clock: Clock,
    /** A due task waiting this long with no live consumer means nobody will run it. */
    private readonly waitWarnMs: number,
  ) {}

  async liveConsumers(): Promise<number> {
    const since = new Date(this.clock.now().getTime() - CONSUMER_GONE_AFTER_MS);
    const row = (await this.db('task_consumers').where('heartbeat_at', '>=', since).count({ n: '*' }).first()) as { n: number | string } | undefined;
    return Number(row?.n ?? 0);
  }

  /** The whole queue, or only tasks whose dedupe key starts with `dedupePrefix` (e.g. one batch's tasks). */
  async report(dedupePrefix?: string): Promise<TaskBacklogReport> {
    const now = this.clock.now();
    const live = await this.liveConsumers();
    const q = this.db('tasks').where({ status: 'PENDING' }).where('run_at', '<=', now);
    if (dedupePrefix !== undefined) q.whereRaw("dedupe_key like ? escape '\\'", [`${dedupePrefix.replace(/[\\%_]/g, (c) => `\\${c}`)}%`]);
    const row = (await q.count({ n: '*' }).min({ oldest: 'run_at' }).first()) as { n: number | string; oldest: Date | string | null } | undefined;
    const queued = Number(row?.n ?? 0);
    const age = row?.oldest ? Math.max(0, (now.getTime() - new Date(row.oldest).getTime()) / 1000) : null;
    return {
      queued,
      oldest_queued_age_seconds: age === null ? null : Math.round(age * 10) / 10,
      live_consumers: live,
      waiting_for_worker: live === 0 && age !== null && age * 1000 >= this.waitWarnMs,
    };
  }
}

/** This process's row in `task_consumers`, kept fresh from start() until stop(). */
export class TaskConsumerPresence {
  private readonly consumerId = newId('tcon');
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly db: Knex,
    private readonly clock: Clock,
    private readonly log: Logger,
    private readonly transport: string,
  ) {}

  async start(): Promise<void> {
    const now = this.clock.now();
    await this.db('task_consumers').insert({
      consumer_id: this.consumerId,
      host: hostname(),
      pid: process.pid,
      transport: this.transport,
      started_at: now,
      heartbeat_at: now,
    });
    this.timer = setInterval(() => {
      this.beat().catch((err: unknown) => this.log.warn({ err }, 'could not refresh this task consumer'));
    }, CONSUMER_HEARTBEAT_MS);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    this.timer = undefined;
    await this.db('task_consumers').where({ consumer_id: this.consumerId }).delete();
    // Rows of processes that died without stopping go once they are long silent.
    await this.db('task_consumers').where('heartbeat_at', '<', new Date(this.clock.now().getTime() - 10 * CONSUMER_GONE_AFTER_MS)).delete();
  }

  private async beat(): Promise<void> {
    const now = this.clock.now();
    const updated = await this.db('task_consumers').where({ consumer_id: this.consumerId }).update({ heartbeat_at: now });
    if (updated === 0) {
      await this.db('task_consumers').insert({ consumer_id: this.consumerId, host: hostname(), pid: process.pid, transport: this.transport, started_at: now, heartbeat_at: now });
    }
  }
}
