/**
 * SharedRateLimiter beyond the contract: several instances (one per API process) on one database never
 * allow more than the limit together and lose none of it; slices spare round trips; ended windows are
 * swept; unused slices are given back at shutdown; an unreachable database fails open.
 */
import { randomBytes } from 'node:crypto';
import type { Knex } from 'knex';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../../kernel/clock.js';
import { HOUR_MS, MINUTE_MS } from '../../../kernel/auth/rate-limiter.js';
import { SharedRateLimiter } from '../../../kernel/auth/shared-rate-limiter.js';
import { DatabaseHandle } from '../../../kernel/tokens.js';
import { startTestKernel, type TestKernel } from '../../support/kernel.js';

const START = new Date('2026-03-01T00:00:10Z');

describe('SharedRateLimiter', () => {
  let t: TestKernel;
  let db: Knex;
  let subjects = 0;
  const fresh = (name: string) => `shared:${name}:${++subjects}:${Date.now()}`;
  const counter = async (subject: string) =>
    ((await db('rate_limit_counters').where({ subject }).select('count', 'window_start')) as Array<{ count: number; window_start: number }>);

  beforeAll(async () => {
    t = await startTestKernel();
    db = t.kernel.services.get(DatabaseHandle).db;
  });
  afterAll(async () => {
    await t?.stop();
  });

  /** Consumes on each limiter in turn until every one of them has refused; returns what each allowed. */
  async function drain(limiters: SharedRateLimiter[], subject: string, limit: number, windowMs = MINUTE_MS): Promise<number[]> {
    const allowed = limiters.map(() => 0);
    const done = limiters.map(() => false);
    while (done.includes(false)) {
      for (const [i, limiter] of limiters.entries()) {
        if (done[i]) continue;
        if ((await limiter.consume(subject, limit, windowMs)).allowed) allowed[i]! += 1;
        else done[i] = true;
      }
    }
    return allowed;
  }

  it('two processes with a small limit share it exactly, one round trip per allowed request', async () => {
    const clock = new ManualClock(START);
    const a = new SharedRateLimiter(db, clock);
    const b = new SharedRateLimiter(db, clock);
    const subject = fresh('small');
    const allowed = await drain([a, b], subject, 7);
    expect(allowed[0]! + allowed[1]!).toBe(7);
    expect(Math.min(...allowed)).toBeGreaterThanOrEqual(3);
    // One claim per allowed request, and one more by the process that did not see the counter fill up.
    expect(a.claims + b.claims).toBe(7 + 1);
    expect(await counter(subject)).toEqual([expect.objectContaining({ count: 7 })]);
    // Refused from now on without asking the database, by both.
    const before = a.claims + b.claims;
    for (const limiter of [a, b, a, b]) expect((await limiter.consume(subject, 7)).allowed).toBe(false);
    expect(a.claims + b.claims).toBe(before);
    expect(await a.exhausted(subject, 7)).toBe(true);
  });

  it('three processes with a large limit take slices: never more than the limit together, none lost, few round trips', async () => {
    const clock = new ManualClock(START);
    const limiters = [new SharedRateLimiter(db, clock), new SharedRateLimiter(db, clock), new SharedRateLimiter(db, clock)];
    const subject = fresh('large');
    const allowed = await drain(limiters, subject, 3_000, HOUR_MS);
    expect(allowed.reduce((sum, n) => sum + n, 0)).toBe(3_000);
    const claims = limiters.reduce((sum, l) => sum + l.claims, 0);
    // Slices of at most 60 (3000 / 50), smaller near the end: far fewer round trips than requests.
    expect(claims).toBeLessThan(300);
    expect(await counter(subject)).toEqual([expect.objectContaining({ count: 3_000 })]);
  });

  it('a process may refuse early while another holds part of a slice, which the holder still uses', async () => {
    const clock = new ManualClock(START);
    const holder = new SharedRateLimiter(db, clock);
    const other = new SharedRateLimiter(db, clock);
    const subject = fresh('held');
    // The holder claims a slice of 2 (100 / 50) and uses one of it.
    expect((await holder.consume(subject, 100)).allowed).toBe(true);
    const used = (await drain([other], subject, 100))[0]!;
    expect(used).toBe(98);
    expect((await holder.consume(subject, 100)).allowed).toBe(true);
    expect((await holder.consume(subject, 100)).allowed).toBe(false);
  });

  it('gives unused slices back at shutdown', async () => {
    const clock = new ManualClock(START);
    const leaving = new SharedRateLimiter(db, clock);
    const subject = fresh('give-back');
    expect((await leaving.consume(subject, 1_000)).allowed).toBe(true);
    expect(await counter(subject)).toEqual([expect.objectContaining({ count: 20 })]);
    await leaving.close();
    expect(await counter(subject)).toEqual([expect.objectContaining({ count: 1 })]);
    const staying = new SharedRateLimiter(db, clock);
    expect((await drain([staying], subject, 1_000))[0]).toBe(999);
  });

  it('sweeps the counters of windows that ended', async () => {
    const clock = new ManualClock(START);
    const limiter = new SharedRateLimiter(db, clock);
    const old = fresh('old');
    const recent = fresh('recent');
    expect((await limiter.consume(old, 5)).allowed).toBe(true);
    expect(await counter(old)).toHaveLength(1);
    // Two minutes on, the old minute ended more than a minute ago: the next claim sweeps it.
    clock.advance(2 * MINUTE_MS);
    expect((await limiter.consume(recent, 5)).allowed).toBe(true);
    await limiter.close();
    expect(await counter(old)).toEqual([]);
    expect(await counter(recent)).toHaveLength(1);
  });

  it('counts a subject of any length', async () => {
    const clock = new ManualClock(START);
    const long = `${fresh('long')}:${randomBytes(5_000).toString('hex')}`;
    const allowed = await drain([new SharedRateLimiter(db, clock), new SharedRateLimiter(db, clock)], long, 3);
    expect(allowed[0]! + allowed[1]!).toBe(3);
  });

  it('limits each process on its own while the database cannot be reached', async () => {
    const unreachable = { raw: () => Promise.reject(new Error('connection refused')) } as unknown as Knex;
    const clock = new ManualClock(START);
    const limiter = new SharedRateLimiter(unreachable, clock);
    expect(await drain([limiter], 'down', 3)).toEqual([3]);
    clock.advance(MINUTE_MS);
    expect(await drain([limiter], 'down', 3)).toEqual([3]);
    await limiter.close();
  });
});
