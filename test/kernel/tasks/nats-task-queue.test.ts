/**
 * NatsTaskQueue against the real NATS server (NATS_URL, JetStream on) and the test kernel's database:
 * the shared contract, then what only a JetStream transport has to prove (redelivery after a crash,
 * heartbeats, dead letters, the outbox across rollbacks, stops and outages). Every queue here uses a
 * prefix of this run; its stream and consumers are deleted afterwards.
 */
import { randomBytes } from 'node:crypto';
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect, JSONCodec, type NatsConnection } from 'nats';
import { pino } from 'pino';
import { ManualClock, systemClock } from '../../../kernel/clock.js';
import type { TaskQueue } from '../../../kernel/tasks/task-queue.js';
import { NatsTaskQueue, type DeadLetter, type NatsTaskQueueOptions } from '../../../kernel/tasks/nats-task-queue.js';
import { deleteTaskStream, taskSubjects } from '../../../kernel/tasks/jetstream.js';
import { DatabaseHandle, TaskQueue as TaskQueueToken } from '../../../kernel/tokens.js';
import { startTestKernel, type TestKernel } from '../../support/kernel.js';
import { capturingLogger } from '../../support/logs.js';
import { taskQueueContract } from './contract.js';

const natsUrl = process.env.NATS_URL;
const log = pino({ level: 'silent' });

/** Polls until the condition holds (each wait short; the limit only ends a test that would hang). */
async function until(condition: () => Promise<boolean> | boolean, what: string, limitMs = 30_000): Promise<void> {
  const end = Date.now() + limitMs;
  while (!(await condition())) {
    if (Date.now() > end) throw new Error(`gave up waiting: ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe.skipIf(!natsUrl)('NatsTaskQueue', () => {
  let t: TestKernel;
  const prefix = `tq${randomBytes(5).toString('hex')}`;
  const subjects = taskSubjects(prefix);
  const connections: NatsConnection[] = [];
  const queues: NatsTaskQueue[] = [];
  /** Queues whose handler never returns: stop() would wait for it forever, so they are only cut off. */
  const abandoned = new Set<TaskQueue>();
  let admin: NatsConnection;

  beforeAll(async () => {
    t = await startTestKernel();
    admin = await connect({ servers: natsUrl });
  });
  afterAll(async () => {
    try {
      // A failed test may leave a handler hanging: stop what stops soon, and clean up regardless.
      const stopped = Promise.allSettled(queues.filter((q) => !abandoned.has(q)).map((q) => q.stop()));
      await Promise.race([stopped, sleep(5_000)]);
      await Promise.allSettled([...connections, admin].filter(Boolean).map((nc) => nc.close()));
    } finally {
      await deleteTaskStream(natsUrl!, prefix);
      // The kernel's own queue is a NatsTaskQueue too, on the kernel's prefix.
      await t.stop().finally(() => deleteTaskStream(natsUrl!, t.config.natsPrefix));
    }
  });

  const db = () => t.kernel.services.get(DatabaseHandle).db;
  const byQueue = new Map<TaskQueue, NatsConnection>();

  /** A queue on a connection of its own (so a test can cut it like a dying process would). */
  async function open(options: Partial<NatsTaskQueueOptions> & { clock?: ManualClock } = {}): Promise<NatsTaskQueue> {
    const { clock, ...rest } = options;
    const nc = await connect({ servers: natsUrl });
    connections.push(nc);
    const q = await NatsTaskQueue.create({ db: db(), clock: clock ?? systemClock, log, nats: nc, prefix, ...rest });
    queues.push(q);
    byQueue.set(q, nc);
    return q;
  }

  /** Like a killed process: its connection drops, so no ack, no heartbeat and no lease extension follows. */
  async function crash(q: TaskQueue): Promise<void> {
    abandoned.add(q);
    await byQueue.get(q)!.close();
  }

  async function consumerState(type: string): Promise<{ waiting: number; unacked: number }> {
    const jsm = await admin.jetstreamManager();
    const info = await jsm.consumers.info(subjects.stream, subjects.consumer(type));
    return { waiting: info.num_pending, unacked: info.num_ack_pending };
  }

  /** The work queue holds nothing for this type any more: every message of it was acknowledged or ended. */
  async function workQueueEmpty(type: string): Promise<boolean> {
    const state = await consumerState(type);
    return state.waiting === 0 && state.unacked === 0;
  }

  async function lastDeadLetter(): Promise<DeadLetter | undefined> {
    const jsm = await admin.jetstreamManager();
    const stored = await jsm.streams.getMessage(subjects.stream, { last_by_subj: subjects.dead }).catch(() => undefined);
    return stored ? JSONCodec<DeadLetter>().decode(stored.data) : undefined;
  }

  const publishedAt = async (taskId: string): Promise<Date | null> =>
    ((await db()('tasks').where({ task_id: taskId }).first('published_at')) as { published_at: Date | null }).published_at;

  it('is the task queue of a kernel started with NATS_URL, and runs the kernel\'s own tasks', async () => {
    const tasks = t.kernel.services.get(TaskQueueToken);
    expect(tasks).toBeInstanceOf(NatsTaskQueue);
    const cleanup = await tasks.enqueue('uploads.cleanup', {});
    await until(async () => (await tasks.get(cleanup.task_id))?.status === 'COMPLETED', 'the kernel ran the task');
    expect(await tasks.get(cleanup.task_id)).toMatchObject({ status: 'COMPLETED', attempts: 1 });
    expect(await publishedAt(cleanup.task_id)).not.toBeNull();
  });

  it('brings a type\'s consumer up to the lease of the queue that runs it', async () => {
    const ackWait = async () => {
      const jsm = await admin.jetstreamManager();
      return (await jsm.consumers.info(subjects.stream, subjects.consumer('nats.settings'))).config.ack_wait;
    };
    const first = await open({ leaseMs: 1_000 });
    first.register('nats.settings', async () => undefined);
    await first.drain();
    expect(await ackWait()).toBe(1_000 * 1e6);
    const second = await open({ leaseMs: 2_000 });
    second.register('nats.settings', async () => undefined);
    await second.drain();
    expect(await ackWait()).toBe(2_000 * 1e6);
  });

  describe('contract', () => {
    const clock = new ManualClock(new Date('2026-05-01T00:00:00Z'));
    taskQueueContract({
      db,
      clock,
      queue: ({ leaseMs }) => open({ clock, leaseMs, concurrency: 1 }),
      crash,
    });
  });

  it('redelivers the task of a worker that died and completes it exactly once', async () => {
    const leaseMs = 1_000;
    const dying = await open({ leaseMs });
    let dyingRuns = 0;
    dying.register('nats.crash', async () => {
      dyingRuns += 1;
      return new Promise(() => undefined);
    });
    dying.start();
    const task = await dying.enqueue('nats.crash', { n: 1 });
    await until(() => dyingRuns === 1, 'the first worker took the task');
    await crash(dying);

    const rescuer = await open({ leaseMs });
    const rescued: string[] = [];
    rescuer.register('nats.crash', async ({ task: t2 }) => {
      rescued.push(t2.task_id);
      return { by: 'rescuer' };
    });
    rescuer.start();
    await until(async () => (await rescuer.get(task.task_id))?.status === 'COMPLETED', 'the task completed');
    await until(() => workQueueEmpty('nats.crash'), 'the message was acknowledged');
    await rescuer.stop();
    expect(dyingRuns).toBe(1);
    expect(rescued).toEqual([task.task_id]);
    expect(await rescuer.get(task.task_id)).toMatchObject({ status: 'COMPLETED', attempts: 2, result: { by: 'rescuer' } });
  });

  it('keeps a task that outlives its lease with its worker, and a duplicate message waits for it', async () => {
    const leaseMs = 1_000;
    const q = await open({ leaseMs });
    let runs = 0;
    let release!: () => void;
    const released = new Promise<void>((r) => (release = r));
    q.register('nats.long', async () => {
      runs += 1;
      await released;
      return { done: true };
    });
    q.start();
    const task = await q.enqueue('nats.long', {});
    await until(() => runs === 1, 'the task started');
    // A second message for the same task, as a sweeper that thought the first lost would publish it.
    const js = admin.jetstream();
    await js.publish(subjects.work('nats.long'), JSONCodec().encode({ task_id: task.task_id, type: 'nats.long' }), { msgID: `${task.task_id}.dup` });
    // Several leases go by: without heartbeats the task would be redelivered and taken over.
    await sleep(leaseMs * 3.5);
    const midway = await q.get(task.task_id);
    release();
    expect(midway).toMatchObject({ status: 'RUNNING', attempts: 1 });
    await until(async () => (await q.get(task.task_id))?.status === 'COMPLETED', 'the task completed');
    await until(() => workQueueEmpty('nats.long'), 'both messages were acknowledged');
    await q.stop();
    expect(runs).toBe(1);
    expect(await q.get(task.task_id)).toMatchObject({ status: 'COMPLETED', attempts: 1 });
  });

  it('ends a task that keeps failing as DEAD and publishes its dead letter', async () => {
    const q = await open({ leaseMs: 5_000, retryDelayMs: () => 50 });
    let calls = 0;
    q.register('nats.poison', async () => {
      calls += 1;
      throw new Error(`poison ${calls}`);
    });
    q.start();
    const task = await q.enqueue('nats.poison', { id: 7 }, { maxAttempts: 3, organizationId: 'org_x' });
    await until(async () => (await q.get(task.task_id))?.status === 'DEAD', 'the task died');
    await until(async () => (await lastDeadLetter())?.task_id === task.task_id, 'the dead letter was published');
    await until(() => workQueueEmpty('nats.poison'), 'the work message was ended');
    await q.stop();
    expect(calls).toBe(3);
    expect(await q.get(task.task_id)).toMatchObject({ status: 'DEAD', attempts: 3, last_error: 'poison 3' });
    expect(await lastDeadLetter()).toMatchObject({
      task_id: task.task_id,
      type: 'nats.poison',
      organization_id: 'org_x',
      payload: { id: 7 },
      attempts: 3,
      max_attempts: 3,
      last_error: 'poison 3',
    });
  });

  it('gives a task every attempt it is allowed even past the consumer\'s max deliveries', async () => {
    const q = await open({ leaseMs: 5_000, retryDelayMs: () => 50, maxDeliver: 2, sweepMs: 100 });
    let calls = 0;
    q.register('nats.stubborn', async () => {
      calls += 1;
      throw new Error(`stubborn ${calls}`);
    });
    q.start();
    const task = await q.enqueue('nats.stubborn', {}, { maxAttempts: 5 });
    await until(async () => (await q.get(task.task_id))?.status === 'DEAD', 'the task died');
    await until(() => workQueueEmpty('nats.stubborn'), 'its messages were settled');
    await q.stop();
    expect(calls).toBe(5);
    expect(await q.get(task.task_id)).toMatchObject({ status: 'DEAD', attempts: 5, last_error: 'stubborn 5' });
  });

  it('ends a task whose worker died during its last attempt without running it again', async () => {
    const leaseMs = 1_000;
    const dying = await open({ leaseMs });
    let started = false;
    dying.register('nats.last', async () => {
      started = true;
      return new Promise(() => undefined);
    });
    dying.start();
    const task = await dying.enqueue('nats.last', {}, { maxAttempts: 1 });
    await until(() => started, 'the only attempt started');
    await crash(dying);
    const other = await open({ leaseMs });
    let reruns = 0;
    other.register('nats.last', async () => void (reruns += 1));
    other.start();
    await until(async () => (await other.get(task.task_id))?.status === 'DEAD', 'the task died');
    await until(async () => (await lastDeadLetter())?.task_id === task.task_id, 'the dead letter was published');
    await other.stop();
    expect(reruns).toBe(0);
    expect(await other.get(task.task_id)).toMatchObject({ status: 'DEAD', attempts: 1 });
  });

  it('never runs a task enqueued in a rolled-back transaction, and runs a committed one after the commit', async () => {
    const q = await open({ leaseMs: 5_000 });
    const ran: string[] = [];
    q.register('nats.tx', async ({ task }) => void ran.push(task.task_id));
    q.start();
    await until(() => consumerState('nats.tx').then(() => true, () => false), 'the queue set up its consumer');
    let rolledBack = '';
    await db()
      .transaction(async (trx) => {
        rolledBack = (await q.enqueue('nats.tx', {}, { transaction: trx })).task_id;
        throw new Error('abort');
      })
      .catch(() => undefined);
    let nested = '';
    let messagesInside: { waiting: number; unacked: number } | undefined;
    await db().transaction(async (outer) => {
      // A savepoint's release commits nothing: publication waits for the outer commit.
      await outer.transaction(async (inner) => {
        nested = (await q.enqueue('nats.tx', { nested: true }, { transaction: inner })).task_id;
      });
      await sleep(200);
      messagesInside = await consumerState('nats.tx');
    });
    let committed = '';
    await db().transaction(async (trx) => {
      committed = (await q.enqueue('nats.tx', {}, { transaction: trx })).task_id;
    });
    await until(async () => (await q.get(committed))?.status === 'COMPLETED' && (await q.get(nested))?.status === 'COMPLETED', 'both ran');
    await until(() => workQueueEmpty('nats.tx'), 'their messages were acknowledged');
    await q.stop();
    expect(messagesInside).toEqual({ waiting: 0, unacked: 0 });
    expect(ran.sort()).toEqual([committed, nested].sort());
    expect(await q.get(rolledBack)).toBeUndefined();
  });

  it('runs a task enqueued while the queue was stopped once a queue starts (the outbox publishes it)', async () => {
    // A queue on its own connection: stop() closes it, so the enqueue below cannot publish.
    const stopped = await NatsTaskQueue.create({ db: db(), clock: systemClock, log, nats: natsUrl!, prefix, leaseMs: 5_000 });
    stopped.register('nats.later', async () => undefined);
    stopped.start();
    await stopped.stop();
    const task = await stopped.enqueue('nats.later', { n: 2 });
    await sleep(100);
    expect(await publishedAt(task.task_id)).toBeNull();

    const q = await open({ leaseMs: 5_000, sweepMs: 100 });
    const ran: unknown[] = [];
    q.register('nats.later', async ({ task: t2 }) => void ran.push(t2.payload));
    q.start();
    await until(async () => (await q.get(task.task_id))?.status === 'COMPLETED', 'the task ran');
    await q.stop();
    expect(ran).toEqual([{ n: 2 }]);
    expect(await publishedAt(task.task_id)).not.toBeNull();
  });

  it('runs a delayed task no earlier than its run_at', async () => {
    const q = await open({ leaseMs: 5_000, sweepMs: 100 });
    let ranAt: Date | undefined;
    q.register('nats.delayed', async () => void (ranAt = new Date()));
    q.start();
    const task = await q.enqueue('nats.delayed', {}, { delayMs: 1_200 });
    await until(async () => (await q.get(task.task_id))?.status === 'COMPLETED', 'the task ran');
    await q.stop();
    expect(ranAt!.getTime()).toBeGreaterThanOrEqual(task.run_at.getTime());
    expect((await publishedAt(task.task_id))!.getTime()).toBeGreaterThanOrEqual(task.run_at.getTime());
  });

  it('publishes again a task whose message was lost from the stream', async () => {
    const q = await open({ leaseMs: 5_000, sweepMs: 100, lostAfterMs: 300 });
    const ran: string[] = [];
    q.register('nats.lost', async ({ task }) => void ran.push(task.task_id));
    const task = await q.enqueue('nats.lost', {});
    await until(async () => (await publishedAt(task.task_id)) !== null, 'the task was published');
    const jsm = await admin.jetstreamManager();
    await jsm.streams.purge(subjects.stream, { filter: subjects.work('nats.lost') });
    q.start();
    await until(async () => (await q.get(task.task_id))?.status === 'COMPLETED', 'the task ran');
    await q.stop();
    expect(ran).toEqual([task.task_id]);
    expect(await db()('tasks').where({ task_id: task.task_id }).first('publication')).toMatchObject({ publication: 1 });
  });

  it('loses no task while NATS is unreachable for a moment', async () => {
    const proxy = await startProxy(new URL(natsUrl!));
    const captured = capturingLogger('debug');
    const nc = await connect({ servers: `nats://127.0.0.1:${proxy.port}`, reconnectTimeWait: 100, maxReconnectAttempts: -1 });
    connections.push(nc);
    const q = await NatsTaskQueue.create({
      db: db(),
      clock: systemClock,
      log: captured.logger,
      nats: nc,
      prefix,
      leaseMs: 5_000,
      sweepMs: 100,
      publishTimeoutMs: 300,
      pullExpiresMs: 1_000,
    });
    queues.push(q);
    const ran: string[] = [];
    q.register('nats.outage', async ({ task }) => void ran.push(task.task_id));
    q.start();
    await until(() => consumerState('nats.outage').then(() => true, () => false), 'the queue set up its consumer');
    await proxy.cut();
    const task = await q.enqueue('nats.outage', {});
    await until(() => captured.lines.some((l) => l.includes('not published yet')), 'the publication failed');
    expect(await publishedAt(task.task_id)).toBeNull();
    expect(ran).toEqual([]);
    await proxy.restore();
    await until(async () => (await q.get(task.task_id))?.status === 'COMPLETED', 'the task ran after NATS came back');
    await until(() => workQueueEmpty('nats.outage'), 'its message was acknowledged');
    await q.stop();
    await proxy.close();
    expect(ran).toEqual([task.task_id]);
  });
});

/** A TCP relay in front of NATS that a test can cut and restore, as a network outage would. */
async function startProxy(target: URL): Promise<{ port: number; cut(): Promise<void>; restore(): Promise<void>; close(): Promise<void> }> {
  const sockets = new Set<net.Socket>();
  let server: net.Server;
  const listen = (port: number) =>
    new Promise<number>((resolve, reject) => {
      server = net.createServer((client) => {
        const upstream = net.connect(Number(target.port || 4222), target.hostname);
        for (const s of [client, upstream]) {
          sockets.add(s);
          s.on('close', () => sockets.delete(s));
          s.on('error', () => {
            client.destroy();
            upstream.destroy();
          });
        }
        client.pipe(upstream).pipe(client);
      });
      server.once('error', reject);
      server.listen(port, '127.0.0.1', () => resolve((server.address() as net.AddressInfo).port));
    });
  const cut = async () => {
    await new Promise<void>((resolve) => {
      server.close(() => resolve());
      for (const s of sockets) s.destroy();
    });
  };
  const port = await listen(0);
  return {
    port,
    cut,
    restore: async () => void (await listen(port)),
    close: cut,
  };
}
