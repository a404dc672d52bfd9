import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pino } from 'pino';
import { ManualClock } from '../../../kernel/clock.js';
import { DatabaseTaskQueue } from '../../../kernel/tasks/task-queue.js';
import { DatabaseHandle } from '../../../kernel/tokens.js';
import { startTestKernel, type TestKernel } from '../../support/kernel.js';

describe('DatabaseTaskQueue', () => {
  let t: TestKernel;
  const clock = new ManualClock(new Date('2026-05-01T00:00:00Z'));
  const log = pino({ level: 'silent' });
  beforeAll(async () => {
    t = await startTestKernel();
  });
  afterAll(async () => {
    await t.stop();
  });
  const queue = (leaseMs = 60_000) =>
    new DatabaseTaskQueue(t.kernel.services.get(DatabaseHandle).db, clock, log, { leaseMs, pollMs: 10_000, concurrency: 1 });

  it('runs a task once and records its result', async () => {
    const q = queue();
    const seen: unknown[] = [];
    q.register('test.echo', async ({ task }) => {
      seen.push(task.payload);
      return { ok: true };
    });
    const task = await q.enqueue('test.echo', { n: 1 });
    expect(task.status).toBe('PENDING');
    expect(await q.drain()).toBe(1);
    expect(await q.drain()).toBe(0);
    expect(seen).toEqual([{ n: 1 }]);
    expect(await q.get(task.task_id)).toMatchObject({ status: 'COMPLETED', attempts: 1, result: { ok: true } });
  });

  it('retries a failing task with backoff and dead-letters it after max attempts', async () => {
    const q = queue();
    let calls = 0;
    q.register('test.flaky', async () => {
      calls += 1;
      throw new Error(`boom ${calls}`);
    });
    const task = await q.enqueue('test.flaky', {}, { maxAttempts: 3 });
    await q.drain();
    expect(await q.get(task.task_id)).toMatchObject({ status: 'PENDING', attempts: 1, last_error: 'boom 1' });
    await q.drain();
    expect(calls).toBe(1);
    for (let i = 0; i < 3; i++) {
      clock.advance(61_000);
      await q.drain();
    }
    expect(calls).toBe(3);
    expect(await q.get(task.task_id)).toMatchObject({ status: 'DEAD', attempts: 3, last_error: 'boom 3' });
  });

  it('hands a task whose worker died (lease ran out) to another worker', async () => {
    const crashed = queue(5_000);
    crashed.register('test.lease', async () => new Promise(() => undefined));
    const task = await crashed.enqueue('test.lease', {});
    // The first worker claims it and never finishes (as if its process was killed).
    void crashed.drain();
    for (let i = 0; i < 100 && (await crashed.get(task.task_id))?.status !== 'RUNNING'; i++) await new Promise((r) => setTimeout(r, 10));
    const rescuer = queue(5_000);
    const done: string[] = [];
    rescuer.register('test.lease', async ({ task: t2 }) => void done.push(t2.task_id));
    expect(await rescuer.drain()).toBe(0);
    clock.advance(6_000);
    expect(await rescuer.drain()).toBe(1);
    expect(done).toEqual([task.task_id]);
    expect(await rescuer.get(task.task_id)).toMatchObject({ status: 'COMPLETED', attempts: 2 });
  });

  it('returns the live task for a repeated dedupe key, and a new one once it finished', async () => {
    const q = queue();
    q.register('test.dedupe', async () => undefined);
    const first = await q.enqueue('test.dedupe', {}, { dedupeKey: 'only-one' });
    const second = await q.enqueue('test.dedupe', {}, { dedupeKey: 'only-one' });
    expect(second.task_id).toBe(first.task_id);
    await q.drain();
    const third = await q.enqueue('test.dedupe', {}, { dedupeKey: 'only-one' });
    expect(third.task_id).not.toBe(first.task_id);
  });

  it('creates a task enqueued in a transaction only if the transaction commits', async () => {
    const q = queue();
    q.register('test.outbox', async () => undefined);
    const db = t.kernel.services.get(DatabaseHandle).db;
    let rolledBack = '';
    await db
      .transaction(async (trx) => {
        rolledBack = (await q.enqueue('test.outbox', {}, { transaction: trx })).task_id;
        throw new Error('abort');
      })
      .catch(() => undefined);
    expect(await q.get(rolledBack)).toBeUndefined();
    let committed = '';
    await db.transaction(async (trx) => {
      committed = (await q.enqueue('test.outbox', {}, { transaction: trx })).task_id;
    });
    expect(await q.get(committed)).toMatchObject({ status: 'PENDING' });
  });
});
