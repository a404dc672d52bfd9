/**
 * The task queue over NATS JetStream. The `tasks` table stays the record (status, attempts, result, dedupe,
 * transactional enqueue); JetStream does the delivery: a WorkQueue stream, one durable pull consumer per
 * task type, explicit acks with the lease as ack wait, `working()` heartbeats while a handler runs,
 * naks with a delay for retries, and dead letters on `<prefix>.tasks.dead`.
 *
 * Nothing is lost between the two: the table is also an outbox. A task is published only once its
 * transaction committed, `published_at` records that JetStream stored it, and a sweeper publishes what is
 * due and unpublished (NATS was unreachable, the process died before publishing, a delayed task came due)
 * or whose message vanished. Message ids (`<task>.<attempt>.<publication>`) make a double publication
 * land once; a delivery only runs a task after claiming its row, so a duplicate never runs it twice.
 */
import type { Knex } from 'knex';
import type { Logger } from 'pino';
import {
  connect,
  JSONCodec,
  type Consumer,
  type ConsumerMessages,
  type JetStreamClient,
  type JetStreamManager,
  type JsMsg,
  type NatsConnection,
} from 'nats';
import type { Clock } from '../clock.js';
import { assertTaskType, ensureTaskConsumer, ensureTaskStream, taskSubjects, type TaskSubjects } from './jetstream.js';
import type { EnqueueOptions, TaskHandler, TaskQueue, TaskRow } from './task-queue.js';
import { defaultRetryDelayMs, TaskStore, type TaskRecord } from './task-store.js';

export interface NatsTaskQueueOptions {
  /** How long a delivered task is reserved for its worker: the consumer's ack wait and the row's lease. */
  leaseMs: number;
  /** Handlers running at a time, per task type. */
  concurrency: number;
  /** How often the outbox is swept for tasks to publish. */
  sweepMs: number;
  /**
   * A due task published this long ago, while its type's consumer holds no message at all, lost its message
   * (stream purged, deliveries used up): it is published again. Also how often that is checked.
   */
  lostAfterMs: number;
  /**
   * The consumers' max deliveries: the default max attempts plus room for deliveries that only find a task
   * not due yet or leased to a live worker. A backstop: the row's attempts decide when a task is dead.
   */
  maxDeliver: number;
  /** Delay before the next attempt after attempt `attempt` failed. */
  retryDelayMs: (attempt: number) => number;
  /** How long one pull request waits for a message (at least 1000). */
  pullExpiresMs: number;
  /** How long a publication waits for JetStream's acknowledgement. */
  publishTimeoutMs: number;
}

export interface NatsTaskQueueSetup extends Partial<NatsTaskQueueOptions> {
  db: Knex;
  clock: Clock;
  log: Logger;
  /** A NATS URL (the queue opens, and on stop closes, its own connection) or a connection the caller owns. */
  nats: string | NatsConnection;
  /** Subject and stream prefix (config.natsPrefix). */
  prefix: string;
}

const DEFAULTS: NatsTaskQueueOptions = {
  leaseMs: 60_000,
  concurrency: 2,
  sweepMs: 1_000,
  lostAfterMs: 30_000,
  maxDeliver: 20,
  retryDelayMs: defaultRetryDelayMs,
  pullExpiresMs: 10_000,
  publishTimeoutMs: 5_000,
};

/** What a work message carries: the row holds everything else. */
interface TaskMessage {
  task_id: string;
  type: string;
}

/** What a dead letter carries: enough to inspect the task without the database. */
export interface DeadLetter {
  task_id: string;
  type: string;
  organization_id: string | null;
  payload: Record<string, unknown>;
  attempts: number;
  max_attempts: number;
  last_error: string | null;
  created_at: string;
  dead_at: string;
}

const taskCodec = JSONCodec<TaskMessage>();
const deadLetterCodec = JSONCodec<DeadLetter>();
/** Shortest nak delay, so a message that cannot run yet does not bounce straight back. */
const MIN_NAK_MS = 100;
/** A lease counts as over a moment after its end, so the worker's own last write lands first. */
const LEASE_MARGIN_MS = 100;
const SWEEP_BATCH = 200;

export class NatsTaskQueue implements TaskQueue {
  private readonly handlers = new Map<string, TaskHandler>();
  private readonly store: TaskStore;
  private readonly subjects: TaskSubjects;
  private readonly js: JetStreamClient;
  private readonly consumers = new Map<string, Promise<Consumer>>();
  private phase: 'idle' | 'running' | 'stopped' = 'idle';
  private stopping: Promise<void> | undefined;
  private sweepTimer: NodeJS.Timeout | undefined;
  private sweeping: Promise<void> = Promise.resolve();
  private lastLostCheck = Date.now();
  private outboxFailing = false;
  private readonly fetches = new Set<ConsumerMessages>();
  private readonly loops = new Set<Promise<void>>();
  /** Handlers and publications under way: stop() waits for them. */
  private readonly inFlight = new Set<Promise<unknown>>();
  private readonly pauses = new Set<() => void>();

  private constructor(
    private readonly nc: NatsConnection,
    private readonly ownsConnection: boolean,
    private readonly jsm: JetStreamManager,
    private readonly prefix: string,
    private readonly clock: Clock,
    private readonly log: Logger,
    private readonly options: NatsTaskQueueOptions,
    db: Knex,
  ) {
    this.store = new TaskStore(db, clock);
    this.subjects = taskSubjects(prefix);
    this.js = nc.jetstream();
  }

  /** Connects (or uses the given connection) and makes sure the task stream exists. */
  static async create(setup: NatsTaskQueueSetup): Promise<NatsTaskQueue> {
    const { db, clock, log, nats, prefix, ...overrides } = setup;
    const options: NatsTaskQueueOptions = { ...DEFAULTS, ...definedOnly(overrides) };
    if (options.pullExpiresMs < 1000) throw new Error('pullExpiresMs must be at least 1000');
    const owned = typeof nats === 'string';
    const nc = owned ? await connect({ servers: nats, name: `tessera-tasks-${process.pid}`, maxReconnectAttempts: -1 }) : nats;
    try {
      const jsm = await nc.jetstreamManager();
      await ensureTaskStream(jsm, prefix);
      return new NatsTaskQueue(nc, owned, jsm, prefix, clock, log, options, db);
    } catch (err) {
      if (owned) await nc.close();
      throw err;
    }
  }

  register(type: string, handler: TaskHandler): void {
    assertTaskType(type);
    if (this.handlers.has(type)) throw new Error(`task type '${type}' has two handlers`);
    this.handlers.set(type, handler);
    if (this.phase === 'running') this.startConsuming(type);
  }

  async enqueue(type: string, payload: Record<string, unknown>, options: EnqueueOptions = {}): Promise<TaskRow> {
    assertTaskType(type);
    const { task, created } = await this.store.insert(type, payload, options);
    // A delayed task is published by the sweeper once it is due, so it never runs before run_at.
    if (created && task.run_at.getTime() <= this.clock.now().getTime()) {
      void afterCommit(options.transaction).then((committed) => {
        if (committed) this.track(this.publish(task).catch((err: unknown) => this.publishFailed(err, [task])));
      });
    }
    return task;
  }

  get(taskId: string): Promise<TaskRow | undefined> {
    return this.store.get(taskId);
  }

  start(): void {
    if (this.phase === 'stopped') throw new Error('a stopped task queue cannot start again');
    if (this.phase === 'running') return;
    this.phase = 'running';
    for (const type of this.handlers.keys()) this.startConsuming(type);
    this.scheduleSweep(0);
  }

  stop(): Promise<void> {
    this.stopping ??= this.shutdown();
    return this.stopping;
  }

  /**
   * Runs due tasks until none is left: first what JetStream holds for this process's types (taken without
   * waiting), then what the table says is due (unpublished tasks, retries whose delay has passed).
   */
  async drain(): Promise<number> {
    let ran = 0;
    const seen = new Set<number>();
    const exhausted = new Set<string>();
    for (;;) {
      const pulled = await this.pullWithoutWaiting(seen, exhausted);
      if (pulled) {
        seen.add(pulled.seq);
        if (await this.track(this.deliver(pulled))) ran += 1;
        continue;
      }
      const task = await this.store.claimDue([...this.handlers.keys()], this.options.leaseMs);
      if (!task) return ran;
      if (await this.track(this.execute(task, undefined))) ran += 1;
    }
  }

  // --- delivery --------------------------------------------------------------------------------------

  private startConsuming(type: string): void {
    for (let i = 0; i < this.options.concurrency; i++) {
      const loop = this.consumeLoop(type).finally(() => this.loops.delete(loop));
      this.loops.add(loop);
    }
  }

  /** One puller of a type: one message at a time, run to its end before the next pull. */
  private async consumeLoop(type: string): Promise<void> {
    let failures = 0;
    // A closed connection never comes back (reconnects are unlimited): nothing left to pull from.
    while (this.phase === 'running' && !this.nc.isClosed()) {
      try {
        const consumer = await this.consumer(type);
        if (this.phase !== 'running') return;
        const batch = await consumer.fetch({ max_messages: 1, expires: this.options.pullExpiresMs, bind: true });
        this.fetches.add(batch);
        try {
          if (this.phase !== 'running') void batch.close();
          for await (const msg of batch) {
            // Pulled while stopping: hand it straight to another worker.
            if (this.phase !== 'running') msg.nak();
            else await this.track(this.deliver(msg));
          }
        } finally {
          this.fetches.delete(batch);
        }
        failures = 0;
      } catch (err) {
        if (this.phase !== 'running' || this.nc.isClosed()) return;
        failures += 1;
        this.consumers.delete(type);
        this.log.warn({ err, task_type: type }, 'could not pull tasks; retrying');
        await this.pause(Math.min(30_000, 250 * 2 ** failures));
      }
    }
  }

  /** Settles one message; true when it ran a handler. */
  private async deliver(msg: JsMsg): Promise<boolean> {
    let ref: TaskMessage;
    try {
      ref = taskCodec.decode(msg.data);
    } catch (err) {
      this.log.warn({ err, subject: msg.subject }, 'dropping a task message that is not JSON');
      msg.term();
      return false;
    }
    try {
      const task = await this.store.claim(ref.task_id, this.options.leaseMs);
      if (task) return await this.execute(task, msg);
      await this.settleUnclaimable(ref.task_id, msg);
      return false;
    } catch (err) {
      // The database did not answer: try again later; the row still says what is left to do.
      this.log.error({ err, task_id: ref.task_id }, 'could not process a task message');
      msg.nak(Math.max(MIN_NAK_MS, this.options.sweepMs));
      return false;
    }
  }

  /** A message whose task could not be claimed: finished, not due yet, or leased to a live worker. */
  private async settleUnclaimable(taskId: string, msg: JsMsg): Promise<void> {
    const row = await this.store.get(taskId);
    // No row: its transaction rolled back (or it was deleted). A row that commits later is still unpublished.
    if (!row) return msg.term();
    switch (row.status) {
      case 'COMPLETED':
      case 'FAILED':
        return msg.ack();
      case 'DEAD':
        // A redelivery after the end (the term was lost): make sure the dead letter is out, and drop it.
        await this.deadLetter(row);
        return msg.ack();
      case 'PENDING':
        return this.postpone(msg, row.task_id, row.run_at.getTime() - this.clock.now().getTime());
      case 'RUNNING':
        return this.postpone(msg, row.task_id, (row.locked_until?.getTime() ?? 0) + LEASE_MARGIN_MS - this.clock.now().getTime());
    }
  }

  /**
   * Brings the message back in `waitMs`. A message with no delivery left cannot come back: it is
   * acknowledged and the task handed to the outbox, which publishes it afresh once it is due.
   */
  private async postpone(msg: JsMsg, taskId: string, waitMs: number): Promise<void> {
    if (msg.info.deliveryCount < this.options.maxDeliver) {
      msg.nak(Math.max(MIN_NAK_MS, waitMs));
      return;
    }
    await this.store.republish(taskId);
    msg.ack();
  }

  /** Runs a claimed task and settles its row and message; true when the handler ran. */
  private async execute(task: TaskRecord, msg: JsMsg | undefined): Promise<boolean> {
    const log = this.log.child({ task_id: task.task_id, task_type: task.type });
    if (task.attempts > task.max_attempts) {
      // Its worker vanished during the last attempt (the lease ran out): no attempt is left.
      log.warn({ attempts: task.max_attempts }, 'task lost its worker during its last attempt');
      const dead = await this.store.bury(task, task.last_error ?? 'its worker stopped during the last attempt');
      await this.deadLetter(dead);
      msg?.term();
      return false;
    }
    const handler = this.handlers.get(task.type);
    if (!handler) throw new Error(`no handler for task type '${task.type}'`);
    const heartbeat = this.keepAlive(task, msg, log);
    let outcome: { result: Record<string, unknown> } | { error: unknown };
    try {
      outcome = { result: (await handler({ task, log })) ?? {} };
    } catch (error) {
      outcome = { error };
    } finally {
      heartbeat.stop();
    }
    if ('result' in outcome) {
      await this.store.complete(task, outcome.result);
      msg?.ack();
      return true;
    }
    const message = outcome.error instanceof Error ? outcome.error.message : String(outcome.error);
    const delayMs = this.options.retryDelayMs(task.attempts);
    const row = await this.store.fail(task, message, delayMs);
    log.warn({ err: outcome.error, attempts: task.attempts, dead: row.status === 'DEAD' }, 'task failed');
    if (row.status === 'DEAD') {
      await this.deadLetter(row);
      msg?.term();
    } else if (msg) {
      await this.postpone(msg, task.task_id, delayMs);
    }
    return true;
  }

  /**
   * While a handler runs, tells JetStream it is alive and extends the row's lease, so a long task is neither
   * redelivered nor taken over. A worker cut off from NATS for good stops both: it is treated as dead.
   */
  private keepAlive(task: TaskRow, msg: JsMsg | undefined, log: Logger): { stop(): void } {
    const timer = setInterval(
      () => {
        if (this.nc.isClosed()) return clearInterval(timer);
        msg?.working();
        this.store.extendLease(task, this.options.leaseMs).catch((err: unknown) => log.warn({ err }, 'could not extend the task lease'));
      },
      Math.max(100, Math.floor(this.options.leaseMs / 3)),
    );
    timer.unref();
    return { stop: () => clearInterval(timer) };
  }

  private consumer(type: string): Promise<Consumer> {
    let found = this.consumers.get(type);
    if (!found) {
      found = ensureTaskConsumer(this.jsm, this.prefix, type, { ackWaitMs: this.options.leaseMs, maxDeliver: this.options.maxDeliver }).then(
        (name) => this.js.consumers.get(this.subjects.stream, name),
      );
      const entry = found;
      entry.catch(() => {
        if (this.consumers.get(type) === entry) this.consumers.delete(type);
      });
      this.consumers.set(type, entry);
    }
    return found;
  }

  /**
   * One message of any of this process's types that JetStream can hand over right now. A type that hands
   * over a message already seen in this drain (it could not run then) is not pulled again in this drain:
   * the table serves its due tasks.
   */
  private async pullWithoutWaiting(seen: ReadonlySet<number>, exhausted: Set<string>): Promise<JsMsg | undefined> {
    if (this.nc.isClosed()) return undefined;
    for (const type of this.handlers.keys()) {
      if (exhausted.has(type)) continue;
      try {
        await this.consumer(type);
        // The legacy pull is the client's only request that returns at once when nothing is there.
        const msg = await this.js.pull(this.subjects.stream, this.subjects.consumer(type));
        if (!seen.has(msg.seq)) return msg;
        exhausted.add(type);
        msg.nak(MIN_NAK_MS);
      } catch {
        // Nothing there (404/408) or NATS unreachable: the table still knows what is due.
      }
    }
    return undefined;
  }

  // --- the outbox ------------------------------------------------------------------------------------

  private async publish(task: TaskRecord): Promise<void> {
    const message: TaskMessage = { task_id: task.task_id, type: task.type };
    await this.js.publish(this.subjects.work(task.type), taskCodec.encode(message), {
      msgID: `${task.task_id}.${task.attempts}.${task.publication}`,
      timeout: this.options.publishTimeoutMs,
    });
    await this.store.markPublished(task.task_id, task.publication);
  }

  /** Warns once per outage (the sweeper retries every sweepMs); the recovery is noted too. */
  private publishFailed(err: unknown, tasks: readonly TaskRow[]): void {
    const fields = { err, tasks: tasks.map((t) => t.task_id) };
    if (this.outboxFailing) this.log.debug(fields, 'tasks still not published');
    else this.log.warn(fields, 'tasks not published yet; the outbox sweeper will publish them');
    this.outboxFailing = true;
  }

  private async deadLetter(row: TaskRecord): Promise<void> {
    if (row.dead_lettered_at) return;
    const letter: DeadLetter = {
      task_id: row.task_id,
      type: row.type,
      organization_id: row.organization_id,
      payload: row.payload,
      attempts: row.attempts,
      max_attempts: row.max_attempts,
      last_error: row.last_error,
      created_at: new Date(row.created_at).toISOString(),
      dead_at: this.clock.now().toISOString(),
    };
    try {
      await this.js.publish(this.subjects.dead, deadLetterCodec.encode(letter), {
        msgID: `${row.task_id}.dead`,
        timeout: this.options.publishTimeoutMs,
      });
      await this.store.markDeadLettered(row.task_id);
    } catch (err) {
      this.log.warn({ err, task_id: row.task_id }, 'dead letter not published yet; the outbox sweeper will');
    }
  }

  private scheduleSweep(delayMs: number): void {
    clearTimeout(this.sweepTimer);
    this.sweepTimer = setTimeout(() => {
      this.sweeping = this.sweep()
        .catch((err: unknown) => {
          this.log.warn({ err }, 'task outbox sweep failed');
          return false;
        })
        .then((more) => {
          if (this.phase === 'running') this.scheduleSweep(more ? 0 : this.options.sweepMs);
        });
    }, delayMs);
    this.sweepTimer.unref();
  }

  /** Publishes what is due and unpublished, dead letters not out yet, and recovers lost messages; true when more is waiting. */
  private async sweep(): Promise<boolean> {
    const types = [...this.handlers.keys()];
    if (types.length === 0) return false;
    const due = await this.store.unpublished(types, SWEEP_BATCH);
    const failed: TaskRecord[] = [];
    await Promise.all(due.map((task) => this.publish(task).catch(() => void failed.push(task))));
    if (failed.length > 0) {
      this.publishFailed(undefined, failed);
      return false;
    }
    if (this.outboxFailing && due.length > 0) this.log.info({ tasks: due.length }, 'the outbox published its waiting tasks');
    this.outboxFailing = false;
    for (const row of await this.store.undeadLettered(types, SWEEP_BATCH)) await this.deadLetter(row);
    if (Date.now() - this.lastLostCheck >= this.options.lostAfterMs) {
      this.lastLostCheck = Date.now();
      if (await this.recoverLostMessages(types)) return true;
    }
    return due.length === SWEEP_BATCH;
  }

  /**
   * For each type whose consumer holds nothing (no message waiting, none delivered and unacknowledged),
   * a due task published a while ago has no message any more: back to the outbox with it.
   */
  private async recoverLostMessages(types: readonly string[]): Promise<boolean> {
    const before = new Date(this.clock.now().getTime() - this.options.lostAfterMs);
    let recovered = 0;
    for (const type of types) {
      const info = await this.jsm.consumers.info(this.subjects.stream, this.subjects.consumer(type)).catch(() => undefined);
      if (!info || info.num_pending > 0 || info.num_ack_pending > 0) continue;
      const lost = await this.store.requeueLost(type, before);
      if (lost > 0) this.log.warn({ task_type: type, tasks: lost }, 'publishing again tasks whose messages were lost');
      recovered += lost;
    }
    return recovered > 0;
  }

  // --- lifecycle -------------------------------------------------------------------------------------

  private async shutdown(): Promise<void> {
    this.phase = 'stopped';
    clearTimeout(this.sweepTimer);
    for (const wake of this.pauses) wake();
    for (const batch of this.fetches) void batch.close();
    await Promise.allSettled([...this.loops]);
    await Promise.allSettled([...this.inFlight]);
    await this.sweeping;
    if (this.ownsConnection && !this.nc.isClosed()) await this.nc.drain().catch(() => this.nc.close());
  }

  private track<T>(work: Promise<T>): Promise<T> {
    this.inFlight.add(work);
    void work.finally(() => this.inFlight.delete(work)).catch(() => undefined);
    return work;
  }

  /** Waits, unless stop() comes first. */
  private pause(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.pauses.delete(done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      timer.unref();
      this.pauses.add(done);
    });
  }
}

/**
 * Resolves true once the transaction the task was written in has committed (at once without one), false
 * if it rolled back. Waits for the outermost transaction: a savepoint's release commits nothing.
 */
function afterCommit(db: Knex | undefined): Promise<boolean> {
  if (!db || !isTransaction(db)) return Promise.resolve(true);
  let root: Knex.Transaction = db;
  while (root.parentTransaction) root = root.parentTransaction;
  return root.executionPromise.then(
    () => true,
    () => false,
  );
}

function isTransaction(db: Knex): db is Knex.Transaction {
  return 'executionPromise' in db && (db as Knex.Transaction).executionPromise instanceof Promise;
}

function definedOnly<T extends object>(value: T): Partial<T> {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as Partial<T>;
}
