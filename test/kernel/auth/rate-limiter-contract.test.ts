/**
 * What every RateLimiter must do, run against the in-process limiter and the shared one (counters in
 * the test database: PGlite, or PostgreSQL with TEST_DATABASE_URL). Time moves with a ManualClock.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../../kernel/clock.js';
import { DAY_MS, HOUR_MS, InProcessRateLimiter, MINUTE_MS, type RateLimiter } from '../../../kernel/auth/rate-limiter.js';
import { SharedRateLimiter } from '../../../kernel/auth/shared-rate-limiter.js';
import { DatabaseHandle } from '../../../kernel/tokens.js';
import { startTestKernel, type TestKernel } from '../../support/kernel.js';

/** 10 s into a day (and so into a minute and an hour). */
const START = new Date('2026-03-01T00:00:10Z');

let t: TestKernel;
beforeAll(async () => {
  t = await startTestKernel();
});
afterAll(async () => {
  await t?.stop();
});

const limiters: Array<[string, (clock: ManualClock) => RateLimiter]> = [
  ['InProcessRateLimiter', (clock) => new InProcessRateLimiter(clock)],
  ['SharedRateLimiter', (clock) => new SharedRateLimiter(t.kernel.services.get(DatabaseHandle).db, clock)],
];

let subjects = 0;
/** A subject no other test used (the shared counters outlive one test). */
const fresh = (name: string) => `contract:${name}:${++subjects}:${Date.now()}`;

async function consumeTimes(limiter: RateLimiter, subject: string, limit: number, times: number, windowMs?: number): Promise<boolean[]> {
  const allowed: boolean[] = [];
  for (let i = 0; i < times; i++) allowed.push((await limiter.consume(subject, limit, windowMs)).allowed);
  return allowed;
}

const count = (allowed: boolean[]) => allowed.filter(Boolean).length;

describe.each(limiters)('%s', (_name, create) => {
  it('allows the limit, then refuses until the window ends, with the seconds left and what remains', async () => {
    const clock = new ManualClock(START);
    const limiter = create(clock);
    const subject = fresh('limit');
    for (let i = 1; i <= 3; i++) {
      expect(await limiter.consume(subject, 3)).toEqual({ allowed: true, limit: 3, remaining: 3 - i, resetSeconds: 50 });
    }
    expect(await limiter.consume(subject, 3)).toEqual({ allowed: false, limit: 3, remaining: 0, resetSeconds: 50 });
    clock.advance(49_500);
    expect(await limiter.consume(subject, 3)).toEqual({ allowed: false, limit: 3, remaining: 0, resetSeconds: 1 });
    clock.advance(500);
    expect(await limiter.consume(subject, 3)).toEqual({ allowed: true, limit: 3, remaining: 2, resetSeconds: 60 });
  });

  it.each([
    ['minute', MINUTE_MS],
    ['hour', HOUR_MS],
    ['day', DAY_MS],
  ])('counts per %s: the window rolls over on the clock, refusals do not carry over', async (_unit, windowMs) => {
    const clock = new ManualClock(START);
    const limiter = create(clock);
    const subject = fresh('window');
    expect(count(await consumeTimes(limiter, subject, 2, 5, windowMs))).toBe(2);
    const refusal = await limiter.consume(subject, 2, windowMs);
    expect(refusal.resetSeconds).toBe((windowMs - 10_000) / 1000);
    // Just before the window ends: still refused. At its end: a fresh window.
    clock.advance(windowMs - 10_001);
    expect((await limiter.consume(subject, 2, windowMs)).allowed).toBe(false);
    clock.advance(1);
    expect(await consumeTimes(limiter, subject, 2, 3, windowMs)).toEqual([true, true, false]);
  });

  it('keeps subjects, and window lengths of one subject, apart', async () => {
    const clock = new ManualClock(START);
    const limiter = create(clock);
    const a = fresh('a');
    const b = fresh('b');
    expect(await consumeTimes(limiter, a, 1, 2)).toEqual([true, false]);
    expect(await consumeTimes(limiter, b, 1, 2)).toEqual([true, false]);
    expect(await consumeTimes(limiter, a, 1, 2, HOUR_MS)).toEqual([true, false]);
    expect(await consumeTimes(limiter, a, 1, 2, DAY_MS)).toEqual([true, false]);
  });

  it('exhausted() says whether the limit is used up, and consumes nothing', async () => {
    const clock = new ManualClock(START);
    const limiter = create(clock);
    const subject = fresh('exhausted');
    expect(await limiter.exhausted(subject, 2)).toBe(false);
    expect(await limiter.exhausted(subject, 2)).toBe(false);
    expect(await consumeTimes(limiter, subject, 2, 2)).toEqual([true, true]);
    expect(await limiter.consume(subject, 2)).toMatchObject({ allowed: false });
    expect(await limiter.exhausted(subject, 2)).toBe(true);
    clock.advance(MINUTE_MS);
    expect(await limiter.exhausted(subject, 2)).toBe(false);
  });

  it('applies a changed limit to the next request of the same window', async () => {
    const clock = new ManualClock(START);
    const limiter = create(clock);
    const subject = fresh('changed');
    expect(await consumeTimes(limiter, subject, 1, 2)).toEqual([true, false]);
    expect(await limiter.consume(subject, 4)).toMatchObject({ allowed: true, remaining: 2 });
    expect(await consumeTimes(limiter, subject, 4, 3)).toEqual([true, true, false]);
    expect((await limiter.consume(subject, 2)).allowed).toBe(false);
  });

  it('allows exactly a large limit (slices of it, for the shared limiter)', async () => {
    const clock = new ManualClock(START);
    const limiter = create(clock);
    const subject = fresh('large');
    const decisions = [];
    for (let i = 0; i < 1_010; i++) decisions.push(await limiter.consume(subject, 1_000));
    expect(decisions.filter((d) => d.allowed)).toHaveLength(1_000);
    expect(decisions.slice(1_000).every((d) => !d.allowed && d.remaining === 0)).toBe(true);
    expect(decisions[0]!.remaining).toBe(999);
    expect(decisions[999]!.remaining).toBe(0);
  });

  it('never allows more than the limit to concurrent requests, and loses none of it', async () => {
    const clock = new ManualClock(START);
    const limiter = create(clock);
    for (const limit of [5, 300]) {
      const subject = fresh('concurrent');
      const burst = await Promise.all(Array.from({ length: limit + 40 }, () => limiter.consume(subject, limit)));
      const allowed = burst.filter((d) => d.allowed).length;
      expect(allowed).toBeLessThanOrEqual(limit);
      // What a burst left in this process's hands goes to the requests that follow.
      const after = count(await consumeTimes(limiter, subject, limit, limit - allowed + 5));
      expect(allowed + after).toBe(limit);
    }
  });
});
