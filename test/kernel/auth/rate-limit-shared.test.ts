/**
 * Rate limits across two API processes (two kernels, each with its own limiter, on one PostgreSQL
 * database): a key's limit and an address's limit on failed requests are counted once for both.
 * PostgreSQL only: the embedded PGlite serves a single process, whose limiter counts in memory.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../../kernel/clock.js';
import { InProcessRateLimiter } from '../../../kernel/auth/rate-limiter.js';
import { SharedRateLimiter } from '../../../kernel/auth/shared-rate-limiter.js';
import { DatabaseHandle, RateLimiter } from '../../../kernel/tokens.js';
import { startTestKernel, type RawResponse, type TestKernel } from '../../support/kernel.js';

const FAILURES_PER_MINUTE = 4;

describe.skipIf(!process.env.TEST_DATABASE_URL)('rate limits shared by two API processes on one PostgreSQL database', () => {
  let a: TestKernel;
  let b: TestKernel;
  const clock = new ManualClock(new Date('2026-01-01T00:00:10Z'));

  /** 10 seconds into the next minute: a fresh window for every subject. */
  function nextWindow(): void {
    const now = clock.now().getTime();
    clock.set(new Date((Math.floor(now / 60_000) + 1) * 60_000 + 10_000));
  }

  async function createKey(name: string, rateLimitOverride: number): Promise<string> {
    const res = await a.request('POST', `/v1/organizations/users/${a.adminEmail}/api-keys`, {
      key: a.adminKey,
      body: { name, rate_limit_override: rateLimitOverride },
    });
    expect(res.status, res.text).toBe(201);
    return res.body.key as string;
  }

  /** Requests alternate between the two processes until both refused; returns every reply. */
  async function untilBothRefuse(send: (k: TestKernel) => Promise<RawResponse>): Promise<RawResponse[]> {
    const replies: RawResponse[] = [];
    const refused = new Set<TestKernel>();
    while (refused.size < 2) {
      for (const k of [a, b]) {
        if (refused.has(k)) continue;
        const reply = await send(k);
        replies.push(reply);
        if (reply.status === 429) refused.add(k);
      }
    }
    return replies;
  }

  function expectLimited(res: RawResponse, limit: number): void {
    expect(res.status).toBe(429);
    expect(res.body).toMatchObject({ success: false, status: 429, error: { type: 'RateLimitError' } });
    // 10 s into the minute: the window ends in 50 s.
    expect(res.headers.get('retry-after')).toBe('50');
    expect(res.headers.get('x-ratelimit-limit')).toBe(String(limit));
    expect(res.headers.get('x-ratelimit-remaining')).toBe('0');
    expect(res.headers.get('x-ratelimit-reset')).toBe('50');
  }

  beforeAll(async () => {
    const config = { runTasks: false, unauthenticatedRateLimitPerMinute: FAILURES_PER_MINUTE };
    a = await startTestKernel({ clock, config });
    b = await startTestKernel({ clock, config: { ...config, databaseUrl: a.config.databaseUrl!, adminKey: a.adminKey } });
  }, 120_000);
  afterAll(async () => {
    await b?.stop();
    await a?.stop();
  });

  it('each process has a limiter of its own on the shared counters', () => {
    const limiterA = a.kernel.services.get(RateLimiter);
    const limiterB = b.kernel.services.get(RateLimiter);
    expect(limiterA).toBeInstanceOf(SharedRateLimiter);
    expect(limiterB).toBeInstanceOf(SharedRateLimiter);
    expect(limiterA).not.toBe(limiterB);
  });

  it.each([5, 250])('a key with rate_limit_override %i gets exactly that many requests in total across both, then 429 from both', async (limit) => {
    const key = await createKey(`shared-${limit}`, limit);
    nextWindow();
    const replies = await untilBothRefuse((k) => k.request('GET', '/v1/me', { key }));
    expect(replies.filter((r) => r.status === 200)).toHaveLength(limit);
    expect(replies.filter((r) => r.status !== 200 && r.status !== 429)).toEqual([]);
    for (const refusal of replies.filter((r) => r.status === 429)) expectLimited(refusal, limit);
    // Both stay refused for the rest of the minute; the next minute opens again on both.
    expectLimited(await a.request('GET', '/v1/me', { key }), limit);
    expectLimited(await b.request('GET', '/v1/me', { key }), limit);
    nextWindow();
    expect((await b.request('GET', '/v1/me', { key })).status).toBe(200);
    expect((await a.request('GET', '/v1/me', { key })).status).toBe(200);
  });

  it('an address gets the unauthenticated limit of failed requests in total across both, then 429 from both', async () => {
    nextWindow();
    const replies = await untilBothRefuse((k) => k.request('GET', '/v1/me'));
    expect(replies.filter((r) => r.status === 401)).toHaveLength(FAILURES_PER_MINUTE);
    const refusals = replies.filter((r) => r.status === 429);
    expect(refusals).toHaveLength(2);
    for (const refusal of refusals) expectLimited(refusal, FAILURES_PER_MINUTE);
    // A valid key from the same address is still served by both.
    expect((await a.request('GET', '/v1/me', { key: a.adminKey })).status).toBe(200);
    expect((await b.request('GET', '/v1/me', { key: a.adminKey })).status).toBe(200);
    nextWindow();
    expect((await b.request('GET', '/v1/me')).status).toBe(401);
  });
});

describe.skipIf(Boolean(process.env.TEST_DATABASE_URL))('rate limits on the embedded database', () => {
  it('are counted in memory: one process, exact, no database writes', async () => {
    // A clock that stands still: on the real one, the three requests could straddle a minute's end.
    const t = await startTestKernel({ clock: new ManualClock(new Date('2026-01-01T00:00:10Z')), config: { planRateLimitPerMinute: 2 } });
    try {
      expect(t.kernel.services.get(RateLimiter)).toBeInstanceOf(InProcessRateLimiter);
      const statuses = [];
      for (let i = 0; i < 3; i++) statuses.push((await t.request('GET', '/v1/me', { key: t.adminKey })).status);
      expect(statuses).toEqual([200, 200, 429]);
      expect(await t.kernel.services.get(DatabaseHandle).db('rate_limit_counters').count({ n: '*' })).toEqual([{ n: 0 }]);
    } finally {
      await t.stop();
    }
  });
});
