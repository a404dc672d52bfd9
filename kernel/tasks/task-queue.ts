/**
 * Background work that must not be lost: async upload confirmation, cleanup, batch tiers. Every task is a
 * row in the database (the source of truth for its status); the runner claims due tasks with
 * `FOR UPDATE SKIP LOCKED` and a lease, so a crashed worker's task is picked up again when its lease
 * ends, and several processes can run tasks from one database.
 */
import type { Knex } from 'knex';
import type { Logger } from 'pino';
import type { Clock } from '../clock.js';
import type { Migration } from '../db/migrations.js';
import { newId } from '../ids.js';

export type TaskStatus = 'PENDING' | 'RUNNING' | 'COMPLETED' | 'FAILED' | 'DEAD';

export interface TaskRow {
  task_id: string;
  organization_id: string | null;
  type: string;
  payload: Record<string, unknown>;
  status: TaskStatus;
  attempts: number;
  max_attempts: number;
  run_at: Date;
  locked_until: Date | null;
  last_error: string | null;
  result: Record<string, unknown> | null;
  dedupe_key: string | null;
  created_at: Date;
  updated_at: Date;
}

export interface EnqueueOptions {
  organizationId?: string | null;
  /** A second enqueue with the same key (while the first is not finished) returns the first task. */
  dedupeKey?: string;
  delayMs?: number;
  maxAttempts?: number;
  /** Enqueue inside this transaction: the task exists only if the transaction commits. */
  transaction?: Knex;
}

export interface TaskContext {
  task: TaskRow;
  log: Logger;
}

export type TaskHandler = (ctx: TaskContext) => Promise<Record<string, unknown> | void>;

export interface TaskQueue {
  enqueue(type: string, payload: Record<string, unknown>, options?: EnqueueOptions): Promise<TaskRow>;
  /** One handler per task type; registered before start(). */
  register(type: string, handler: TaskHandler): void;
  get(taskId: string): Promise<TaskRow | undefined>;
  /** Runs due tasks until none is left (tests, and the CLI's one-shot mode). */
  drain(): Promise<number>;
  start(): void;
  stop(): Promise<void>;
}

export const taskMigrations: Migration[] = [
  {
    name: '0001_tasks',
    async up(db) {
      await db.schema.createTable('tasks', (t) => {
        t.text('task_id').primary();
        t.text('organization_id');
        t.text('type').notNullable();
        t.jsonb('payload').notNullable();
        t.text('status').notNullable();
        t.integer('attempts').notNullable().defaultTo(0);
        t.integer('max_attempts').notNullable().defaultTo(5);
        t.timestamp('run_at', { useTz: true }).notNullable();
        t.timestamp('locked_until', { useTz: true });
        t.text('last_error');
        t.jsonb('result');
        t.text('dedupe_key');
        t.timestamp('created_at', { useTz: true }).notNullable();
        t.timestamp('updated_at', { useTz: true }).notNullable();
        t.index(['status', 'run_at']);
      });
      await db.raw(
        "create unique index tasks_dedupe_live on tasks (dedupe_key) where dedupe_key is not null and status in ('PENDING', 'RUNNING')",
      );
    },
  },
];

export interface TaskRunnerOptions {
  /** How long a claimed task is reserved before another worker may take it over. */
  leaseMs: number;
  pollMs: number;
  concurrency: number;
}

export class DatabaseTaskQueue implements TaskQueue {
  private readonly handlers = new Map<string, TaskHandler>();
  private timer: NodeJS.Timeout | undefined;
  private running = 0;
  private stopped = true;
  private readonly inFlight = new Set<Promise<void>>();

  constructor(
    private readonly db: Knex,
    private readonly clock: Clock,
    private readonly log: Logger,
    private readonly options: TaskRunnerOptions = { leaseMs: 60_000, pollMs: 500, concurrency: 2 },
  ) {}

  register(type: string, handler: TaskHandler): void {
    if (this.handlers.has(type)) throw new Error(`task type '${type}' has two handlers`);
    this.handlers.set(type, handler);
  }

  async enqueue(type: string, payload: Record<string, unknown>, options: EnqueueOptions = {}): Promise<TaskRow> {
    const now = this.clock.now();
    const db = options.transaction ?? this.db;
    if (options.dedupeKey) {
      const live = await db<TaskRow>('tasks').where({ dedupe_key: options.dedupeKey }).whereIn('status', ['PENDING', 'RUNNING']).first();
      if (live) return live;
    }
    const row = {
      task_id: newId('task'),
      organization_id: options.organizationId ?? null,
      type,
      payload: JSON.stringify(payload),
      status: 'PENDING',
      attempts: 0,
      max_attempts: options.maxAttempts ?? 5,
      run_at: new Date(now.getTime() + (options.delayMs ?? 0)),
      locked_until: null,
      last_error: null,
      result: null,
      dedupe_key: options.dedupeKey ?? null,
      created_at: now,
      updated_at: now,
    };
    await db('tasks').insert(row);
    this.wake();
    return (await db<TaskRow>('tasks').where({ task_id: row.task_id }).first())!;
  }

  get(taskId: string): Promise<TaskRow | undefined> {
    return this.db<TaskRow>('tasks').where({ task_id: taskId }).first();
  }

  start(): void {
    this.stopped = false;
    this.schedule(0);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await Promise.allSettled([...this.inFlight]);
  }

  async drain(): Promise<number> {
    let ran = 0;
    for (;;) {
      const task = await this.claim();
      if (!task) return ran;
      await this.execute(task);
      ran += 1;
    }
  }

  private wake(): void {
    if (!this.stopped) this.schedule(0);
  }

  private schedule(delay: number): void {
    clearTimeout(this.timer);
    this.timer = setTimeout(() => void this.pump(), delay);
    this.timer.unref();
  }

  private async pump(): Promise<void> {
    if (this.stopped) return;
    try {
      while (!this.stopped && this.running < this.options.concurrency) {
        const task = await this.claim();
        if (!task) break;
        this.running += 1;
        const run = this.execute(task).finally(() => {
          this.running -= 1;
          this.inFlight.delete(run);
          this.wake();
        });
        this.inFlight.add(run);
      }
    } catch (err) {
      this.log.error({ err }, 'task runner could not claim work');
    }
    if (!this.stopped) this.schedule(this.options.pollMs);
  }

  /** Takes one due task (pending, or running with an expired lease) whose type this process handles. */
  private async claim(): Promise<TaskRow | undefined> {
    if (this.handlers.size === 0) return undefined;
    const now = this.clock.now();
    const leaseEnd = new Date(now.getTime() + this.options.leaseMs);
    const types = [...this.handlers.keys()];
    const rows = (await this.db.raw(
      `update tasks set status = 'RUNNING', attempts = attempts + 1, locked_until = ?, updated_at = ?
       where task_id = (
         select task_id from tasks
         where type = any(?) and ((status = 'PENDING' and run_at <= ?) or (status = 'RUNNING' and locked_until < ?))
         order by run_at
         for update skip locked
         limit 1)
       returning *`,
      [leaseEnd, now, types, now, now],
    )) as { rows: TaskRow[] };
    return rows.rows[0];
  }

  private async execute(task: TaskRow): Promise<void> {
    const handler = this.handlers.get(task.type)!;
    const log = this.log.child({ task_id: task.task_id, task_type: task.type });
    try {
      const result = await handler({ task, log });
      await this.db('tasks')
        .where({ task_id: task.task_id })
        .update({ status: 'COMPLETED', result: JSON.stringify(result ?? {}), locked_until: null, last_error: null, updated_at: this.clock.now() });
    } catch (err) {
      const message = err instanceof Error ? err.message : String(err);
      const dead = task.attempts >= task.max_attempts;
      const backoffMs = Math.min(60_000, 1000 * 2 ** (task.attempts - 1));
      log.warn({ err, attempts: task.attempts, dead }, 'task failed');
      await this.db('tasks')
        .where({ task_id: task.task_id })
        .update({
          status: dead ? 'DEAD' : 'PENDING',
          last_error: message.slice(0, 2000),
          locked_until: null,
          run_at: new Date(this.clock.now().getTime() + backoffMs),
          updated_at: this.clock.now(),
        });
    }
  }
}
