/**
 * Background work that must not be lost: async upload confirmation, cleanup, batch tiers. Every task is a
 * row in the database (the source of truth for its status). Two transports bring tasks to workers: this
 * file's DatabaseTaskQueue, which claims due tasks with `FOR UPDATE SKIP LOCKED` and a lease (a crashed
 * worker's task is picked up again when its lease ends, and several processes can run tasks from one
 * database), and NatsTaskQueue (nats-task-queue.ts), which delivers them through a JetStream work queue.
 */
import type { Knex } from 'knex';
import type { DatabaseNotices } from '../db/database.js';
import type { Logger } from 'pino';
import type { Clock } from '../clock.js';
import type { Migration } from '../db/migrations.js';
import { defaultRetryDelayMs, TaskStore } from './task-store.js';

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
  {
    // The NATS transport's outbox: which tasks JetStream holds a message for, and which dead letters are out.
    name: '0002_tasks_delivery',
    async up(db) {
      await db.schema.alterTable('tasks', (t) => {
        t.timestamp('published_at', { useTz: true });
        t.integer('publication').notNullable().defaultTo(0);
        t.timestamp('dead_lettered_at', { useTz: true });
      });
      await db.raw("create index tasks_outbox on tasks (run_at) where published_at is null and status in ('PENDING', 'RUNNING')");
    },
  },
  {
    // Engine analytics: when the latest attempt started and ended, and the time every attempt ran in all.
    name: '0006_task_timings',
    async up(db) {
      await db.schema.alterTable('tasks', (t) => {
        t.timestamp('started_at', { useTz: true });
        t.timestamp('finished_at', { useTz: true });
        t.double('busy_ms').notNullable().defaultTo(0);
      });
      await db.raw('create index tasks_organization_created on tasks (organization_id, created_at) where organization_id is not null');
    },
  },
];

export interface TaskRunnerOptions {
  /** How long a claimed task is reserved before another worker may take it over. */
  leaseMs: number;
  pollMs: number;
  concurrency: number;
  /**
   * This runner is the only one (the embedded database serves one process): tasks left RUNNING by a
   * process that died are taken back at start instead of after their lease.
   */
  soleRunner?: boolean;
  /**
   * The threads sharing the embedded database (kernel/db/pglite-thread.ts): an enqueue in one wakes the
   * sole runner in another (the task thread), which otherwise would find the task only at its next poll.
   */
  notices?: DatabaseNotices;
}

const ENQUEUED_NOTICE = 'tasks.enqueued';

/**
 * The longest a sole runner sleeps with nothing to do. It is woken by every enqueue (after its transaction
 * commits), and at the time of every delayed task and retry it knows of, so idle polls only back a wake-up
 * that was missed: they need not compete with requests for the embedded database's one connection.
 */
const SOLE_RUNNER_IDLE_MAX_MS = 5_000;

export class DatabaseTaskQueue implements TaskQueue {
  private readonly handlers = new Map<string, TaskHandler>();
  private readonly store: TaskStore;
  private timer: NodeJS.Timeout | undefined;
  /** When the scheduled pump runs (epoch ms). */
  private timerAt = Infinity;
  /** The sole runner's next idle poll delay: doubles from pollMs while polls find nothing. */
  private idleMs: number;
  private running = 0;
  private stopped = true;
  private readonly inFlight = new Set<Promise<void>>();

  constructor(
    db: Knex,
    clock: Clock,
    private readonly log: Logger,
    private readonly options: TaskRunnerOptions = { leaseMs: 60_000, pollMs: 500, concurrency: 2 },
  ) {
    this.store = new TaskStore(db, clock);
    this.idleMs = options.pollMs;
    options.notices?.onNotice((topic, payload) => {
      if (topic !== ENQUEUED_NOTICE) return;
      const delayMs = typeof payload === 'number' ? payload : 0;
      if (delayMs > 0) this.wakeIn(delayMs);
      else this.wake();
    });
  }

  register(type: string, handler: TaskHandler): void {
    if (this.handlers.has(type)) throw new Error(`task type '${type}' has two handlers`);
    this.handlers.set(type, handler);
    this.wake();
  }

  async enqueue(type: string, payload: Record<string, unknown>, options: EnqueueOptions = {}): Promise<TaskRow> {
    const { task } = await this.store.insert(type, payload, options);
    const due = () => {
      this.options.notices?.notify(ENQUEUED_NOTICE, options.delayMs ?? 0);
      if (options.delayMs) this.wakeIn(options.delayMs);
      else this.wake();
    };
    // Inside a transaction the task can be claimed only once it commits.
    const committed = (options.transaction as Partial<Knex.Transaction> | undefined)?.executionPromise;
    if (committed) committed.then(due, () => undefined);
    else due();
    return task;
  }

  get(taskId: string): Promise<TaskRow | undefined> {
    return this.store.get(taskId);
  }

  start(): void {
    this.stopped = false;
    if (this.options.soleRunner) {
      this.store.releaseRunning().then(
        (released) => {
          if (released > 0) this.log.warn({ released }, 'took back tasks a stopped process left running');
          this.wake();
        },
        (err: unknown) => this.log.error({ err }, 'could not take back tasks left running'),
      );
      return;
    }
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
    this.idleMs = this.options.pollMs;
    if (!this.stopped) this.schedule(0);
  }

  /** Pumps in `delay` ms at the latest (a delayed task or a retry falls due then). */
  private wakeIn(delay: number): void {
    if (!this.stopped && Date.now() + delay < this.timerAt) this.schedule(delay);
  }

  private schedule(delay: number): void {
    clearTimeout(this.timer);
    this.timerAt = Date.now() + delay;
    this.timer = setTimeout(() => {
      this.timerAt = Infinity;
      void this.pump();
    }, delay);
    this.timer.unref();
  }

  private async pump(): Promise<void> {
    if (this.stopped) return;
    let idle = true;
    try {
      while (!this.stopped && this.running < this.options.concurrency) {
        const task = await this.claim();
        if (!task) break;
        idle = false;
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
    if (this.stopped) return;
    if (!this.options.soleRunner) return this.wakeIn(this.options.pollMs);
    if (!idle || this.running > 0) this.idleMs = this.options.pollMs;
    this.wakeIn(this.idleMs);
    this.idleMs = Math.min(this.idleMs * 2, Math.max(SOLE_RUNNER_IDLE_MAX_MS, this.options.pollMs));
  }

  /** Takes one due task (pending, or running with an expired lease) whose type this process handles. */
  private claim(): Promise<TaskRow | undefined> {
    return this.store.claimDue([...this.handlers.keys()], this.options.leaseMs);
  }

  private async execute(task: TaskRow): Promise<void> {
    const handler = this.handlers.get(task.type)!;
    const log = this.log.child({ task_id: task.task_id, task_type: task.type });
    // A long task keeps its lease while this process is alive; only a dead process's task is taken over.
    const heartbeat = setInterval(() => {
      this.store.extendLease(task, this.options.leaseMs).catch((err: unknown) => log.warn({ err }, 'could not extend a task lease'));
    }, Math.max(50, Math.floor(this.options.leaseMs / 3)));
    heartbeat.unref();
    try {
      const result = await handler({ task, log });
      clearInterval(heartbeat);
      await this.store.complete(task, result ?? {});
    } catch (err) {
      clearInterval(heartbeat);
      const message = err instanceof Error ? err.message : String(err);
      const dead = task.attempts >= task.max_attempts;
      log.warn({ err, attempts: task.attempts, dead }, 'task failed');
      const retryInMs = defaultRetryDelayMs(task.attempts);
      await this.store.fail(task, message, retryInMs);
      if (!dead) this.wakeIn(retryInMs);
    }
  }
}
