/**
 * Per-key rate limits in fixed one-minute windows on the injected clock: a key's rate_limit_override,
 * else the plan limit. Time moves with a ManualClock, never with sleeps.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../../kernel/clock.js';
import { startTestKernel, type TestKernel, type RawResponse } from '../../support/kernel.js';

const PLAN_LIMIT = 3;

describe('rate limits', () => {
  let t: TestKernel;
  const clock = new ManualClock(new Date('2026-01-01T00:00:10Z'));
  const member = 'limited@example.test';

  /** Moves the clock to 10 seconds into the next minute: a fresh window for every key. */
  function nextWindow(): void {
    const now = clock.now().getTime();
    clock.set(new Date((Math.floor(now / 60_000) + 1) * 60_000 + 10_000));
  }

  async function createKey(name: string, settings: { rate_limit_override?: number } = {}): Promise<{ key: string; key_id: string }> {
    nextWindow();
    const res = await t.request('POST', `/v1/organizations/users/${member}/api-keys`, { key: t.adminKey, body: { name, ...settings } });
    expect(res.status).toBe(201);
    return { key: res.body.key, key_id: res.body.key_id };
  }

  function expectAllowed(res: RawResponse, limit: number, remaining: number): void {
    expect(res.status).toBe(200);
    expect(res.headers.get('x-ratelimit-limit')).toBe(String(limit));
    expect(res.headers.get('x-ratelimit-remaining')).toBe(String(remaining));
    expect(res.headers.get('x-ratelimit-reset')).toMatch(/^\d+$/);
  }

  function expectLimited(res: RawResponse, limit: number): void {
    expect(res.status).toBe(429);
    expect(res.body).toMatchObject({ success: false, status: 429, error: { type: 'RateLimitError' } });
    expect(res.body.error.message).toContain(String(limit));
    const retryAfter = res.headers.get('retry-after');
    expect(retryAfter).toMatch(/^\d+$/);
    // 10 s into the minute: the window ends in 50 s.
    expect(Number(retryAfter)).toBe(50);
    expect(res.headers.get('x-ratelimit-limit')).toBe(String(limit));
    expect(res.headers.get('x-ratelimit-remaining')).toBe('0');
    expect(res.headers.get('x-ratelimit-reset')).toBe('50');
  }

  beforeAll(async () => {
    t = await startTestKernel({ clock, config: { planRateLimitPerMinute: PLAN_LIMIT } });
    const res = await t.request('POST', '/v1/organizations/users', { key: t.adminKey, body: { email: member } });
    expect(res.status).toBe(201);
  });

  afterAll(async () => {
    await t?.stop();
  });

  it('a key with rate_limit_override N gets N requests a minute, then 429 until the next minute', async () => {
    const { key } = await createKey('override-5', { rate_limit_override: 5 });
    nextWindow();
    for (let i = 1; i <= 5; i++) expectAllowed(await t.request('GET', '/v1/me', { key }), 5, 5 - i);
    expectLimited(await t.request('GET', '/v1/me', { key }), 5);
    // Still refused later in the same minute, with a shorter Retry-After.
    clock.advance(30_000);
    const later = await t.request('GET', '/v1/me', { key });
    expect(later.status).toBe(429);
    expect(later.headers.get('retry-after')).toBe('20');
    // The next minute opens a new window.
    clock.advance(20_000);
    expectAllowed(await t.request('GET', '/v1/me', { key }), 5, 4);
  });

  it('refused requests do not use up the next window', async () => {
    const { key } = await createKey('override-2', { rate_limit_override: 2 });
    nextWindow();
    expectAllowed(await t.request('GET', '/v1/me', { key }), 2, 1);
    expectAllowed(await t.request('GET', '/v1/me', { key }), 2, 0);
    for (let i = 0; i < 5; i++) expect((await t.request('GET', '/v1/me', { key })).status).toBe(429);
    nextWindow();
    expectAllowed(await t.request('GET', '/v1/me', { key }), 2, 1);
    expectAllowed(await t.request('GET', '/v1/me', { key }), 2, 0);
  });

  it('the plan limit applies to keys without an override (the admin key included)', async () => {
    const plain = await createKey('no-override');
    nextWindow();
    const me = await t.request('GET', '/v1/me', { key: plain.key });
    expectAllowed(me, PLAN_LIMIT, PLAN_LIMIT - 1);
    expect(me.body.key.rate_limit_per_minute).toBe(PLAN_LIMIT);
    expectAllowed(await t.request('GET', '/v1/me', { key: plain.key }), PLAN_LIMIT, 1);
    expectAllowed(await t.request('GET', '/v1/me', { key: plain.key }), PLAN_LIMIT, 0);
    expectLimited(await t.request('GET', '/v1/me', { key: plain.key }), PLAN_LIMIT);

    nextWindow();
    for (let i = 1; i <= PLAN_LIMIT; i++) expectAllowed(await t.request('GET', '/v1/me', { key: t.adminKey }), PLAN_LIMIT, PLAN_LIMIT - i);
    expectLimited(await t.request('GET', '/v1/me', { key: t.adminKey }), PLAN_LIMIT);
    nextWindow();
    expectAllowed(await t.request('GET', '/v1/me', { key: plain.key }), PLAN_LIMIT, PLAN_LIMIT - 1);
  });

  it('each key has its own window', async () => {
    const a = await createKey('own-window-a', { rate_limit_override: 1 });
    const b = await createKey('own-window-b', { rate_limit_override: 1 });
    nextWindow();
    expectAllowed(await t.request('GET', '/v1/me', { key: a.key }), 1, 0);
    expectLimited(await t.request('GET', '/v1/me', { key: a.key }), 1);
    expectAllowed(await t.request('GET', '/v1/me', { key: b.key }), 1, 0);
  });

  it('a changed rate_limit_override applies to the next request', async () => {
    const { key } = await createKey('changing', { rate_limit_override: 1 });
    nextWindow();
    expectAllowed(await t.request('GET', '/v1/me', { key }), 1, 0);
    expectLimited(await t.request('GET', '/v1/me', { key }), 1);
    const patched = await t.request('PATCH', `/v1/organizations/users/${member}/api-keys/changing`, {
      key: t.adminKey,
      body: { rate_limit_override: 4 },
    });
    expect(patched.status).toBe(200);
    expect(patched.body.rate_limit_override).toBe(4);
    // Same window: one of four already used.
    expectAllowed(await t.request('GET', '/v1/me', { key }), 4, 2);
  });

  it('public routes and unauthenticated requests are not counted against any key', async () => {
    nextWindow();
    for (let i = 0; i < PLAN_LIMIT + 2; i++) {
      const health = await t.request('GET', '/v1/health');
      expect(health.status).toBe(200);
      expect(health.headers.get('x-ratelimit-limit')).toBeNull();
    }
    expect((await t.request('GET', '/v1/me')).status).toBe(401);
    expectAllowed(await t.request('GET', '/v1/me', { key: t.adminKey }), PLAN_LIMIT, PLAN_LIMIT - 1);
  });

  it('a 429 is recorded in the usage of the key', async () => {
    const { key, key_id } = await createKey('counted', { rate_limit_override: 1 });
    nextWindow();
    expect((await t.request('GET', '/v1/me', { key })).status).toBe(200);
    expect((await t.request('GET', '/v1/me', { key })).status).toBe(429);
    nextWindow();
    const usage = await t.request('GET', `/v1/organizations/usage/api-keys/${key_id}`, { key: t.adminKey });
    expect(usage.status).toBe(200);
    expect(usage.body.by_status_class).toEqual({ '2xx': 1, '4xx': 1 });
  });
});
