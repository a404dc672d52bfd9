import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pino } from 'pino';
import { ManualClock } from '../../../kernel/clock.js';
import { DatabaseTaskQueue } from '../../../kernel/tasks/task-queue.js';
import { DatabaseHandle, TaskQueue } from '../../../kernel/tokens.js';
import { startTestKernel, type TestKernel } from '../../support/kernel.js';
import { taskQueueContract } from './contract.js';

describe('DatabaseTaskQueue', () => {
  let t: TestKernel;
  const clock = new ManualClock(new Date('2026-05-01T00:00:00Z'));
  const log = pino({ level: 'silent' });
  beforeAll(async () => {
    // The database queue's own kernel, also when NATS_URL is set (nats-task-queue.test.ts covers that case).
    t = await startTestKernel({ withoutNats: true });
  });
  afterAll(async () => {
    await t.stop();
  });

  it('is the task queue of a kernel started without NATS', () => {
    expect(t.kernel.services.get(TaskQueue)).toBeInstanceOf(DatabaseTaskQueue);
  });

  taskQueueContract({
    db: () => t.kernel.services.get(DatabaseHandle).db,
    clock,
    queue: async ({ leaseMs }) =>
      new DatabaseTaskQueue(t.kernel.services.get(DatabaseHandle).db, clock, log, { leaseMs, pollMs: 10_000, concurrency: 1 }),
    // A database worker keeps nothing alive: its lease simply runs out.
    crash: async () => undefined,
  });
});
