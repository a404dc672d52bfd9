/**
 * What every TaskQueue must do, whatever carries its tasks: run a task once and record its result, retry
 * with backoff and end DEAD after max attempts, hand a dead worker's task to another worker once its lease
 * ran out, honour dedupe keys, and create a task enqueued in a transaction only if it commits. Each test
 * file calls taskQueueContract() inside a describe whose hooks build the harness.
 */
import { expect, it } from 'vitest';
import type { Knex } from 'knex';
import type { ManualClock } from '../../../kernel/clock.js';
import type { TaskQueue } from '../../../kernel/tasks/task-queue.js';

export interface TaskQueueHarness {
  /** The database every queue of the harness shares. */
  db(): Knex;
  /** The clock every queue of the harness reads; tests move it instead of sleeping. */
  clock: ManualClock;
  /** A new queue over the shared database (not started: the contract drives it with drain()). */
  queue(options: { leaseMs: number }): Promise<TaskQueue>;
  /** Makes a queue behave as if its process had died: nothing it holds stays alive. */
  crash(queue: TaskQueue): Promise<void>;
}

export function taskQueueContract(h: TaskQueueHarness): void {
  const queue = (leaseMs = 60_000) => h.queue({ leaseMs });

  it('runs a task once and records its result', async () => {
    const q = await queue();
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
    const q = await queue();
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
      h.clock.advance(61_000);
      await q.drain();
    }
    expect(calls).toBe(3);
    expect(await q.get(task.task_id)).toMatchObject({ status: 'DEAD', attempts: 3, last_error: 'boom 3' });
  });

  it('hands a task whose worker died (lease ran out) to another worker', async () => {
    const crashed = await queue(5_000);
    crashed.register('test.lease', async () => new Promise(() => undefined));
    const task = await crashed.enqueue('test.lease', {});
    // The first worker claims it and never finishes (as if its process was killed).
    void crashed.drain();
    for (let i = 0; i < 100 && (await crashed.get(task.task_id))?.status !== 'RUNNING'; i++) await new Promise((r) => setTimeout(r, 10));
    expect((await crashed.get(task.task_id))?.status).toBe('RUNNING');
    await h.crash(crashed);
    const rescuer = await queue(5_000);
    const done: string[] = [];
    rescuer.register('test.lease', async ({ task: t2 }) => void done.push(t2.task_id));
    expect(await rescuer.drain()).toBe(0);
    h.clock.advance(6_000);
    expect(await rescuer.drain()).toBe(1);
    expect(done).toEqual([task.task_id]);
    expect(await rescuer.get(task.task_id)).toMatchObject({ status: 'COMPLETED', attempts: 2 });
  });

  it('returns the live task for a repeated dedupe key, and a new one once it finished', async () => {
    const q = await queue();
    q.register('test.dedupe', async () => undefined);
    const first = await q.enqueue('test.dedupe', {}, { dedupeKey: 'only-one' });
    const second = await q.enqueue('test.dedupe', {}, { dedupeKey: 'only-one' });
    expect(second.task_id).toBe(first.task_id);
    await q.drain();
    const third = await q.enqueue('test.dedupe', {}, { dedupeKey: 'only-one' });
    expect(third.task_id).not.toBe(first.task_id);
  });

  it('keeps one task for a dedupe key enqueued by many callers at once', async () => {
    const q = await queue();
    q.register('test.dedupe_race', async () => undefined);
    const tasks = await Promise.all(Array.from({ length: 8 }, () => q.enqueue('test.dedupe_race', {}, { dedupeKey: 'raced' })));
    expect(new Set(tasks.map((t) => t.task_id)).size).toBe(1);
    expect(await q.drain()).toBe(1);
  });

  it('creates a task enqueued in a transaction only if the transaction commits', async () => {
    const q = await queue();
    const ran: string[] = [];
    q.register('test.outbox', async ({ task }) => void ran.push(task.task_id));
    const db = h.db();
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
    expect(await q.drain()).toBe(1);
    expect(ran).toEqual([committed]);
  });

  it('does not run a delayed task before its time', async () => {
    const q = await queue();
    const ran: string[] = [];
    q.register('test.delayed', async ({ task }) => void ran.push(task.task_id));
    const task = await q.enqueue('test.delayed', {}, { delayMs: 30_000 });
    expect(await q.drain()).toBe(0);
    h.clock.advance(29_000);
    expect(await q.drain()).toBe(0);
    h.clock.advance(1_000);
    expect(await q.drain()).toBe(1);
    expect(ran).toEqual([task.task_id]);
  });
}
