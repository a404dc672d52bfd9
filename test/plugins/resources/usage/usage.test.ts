/**
 * The usage endpoints, computed from the request log. A ManualClock puts a known set of requests
 * (successes and 4xx failures) on two known days, so every figure is exact.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TesseraClient } from '../../../../generated/client.js';
import { ManualClock } from '../../../../kernel/clock.js';
import { startTestKernel, type TestKernel, organizationMe } from '../../../support/kernel.js';

const DAY1 = new Date('2026-03-09T10:00:00Z');
const DAY2 = new Date('2026-03-10T12:00:00Z');
const QUERY_TIME = new Date('2026-03-10T12:01:00Z');
const WEEK_MS = 7 * 24 * 3600 * 1000;

describe('usage', () => {
  let t: TestKernel;
  let admin: TesseraClient;
  const clock = new ManualClock(DAY1);
  const member = 'metered@example.test';
  let metered: { key: string; key_id: string };
  let reader: { key: string; key_id: string };
  let idle: { key: string; key_id: string };

  async function createKey(name: string, permissions: Array<'read' | 'write' | 'delete' | 'admin'>) {
    const res = await admin.POST('/v1/organizations/users/{user_email}/api-keys', {
      params: { path: { user_email: member } },
      body: { name, permissions },
    });
    expect(res.response.status).toBe(201);
    return { key: res.data!.key, key_id: res.data!.key_id };
  }

  beforeAll(async () => {
    t = await startTestKernel({ clock });
    admin = t.client();
    expect((await admin.POST('/v1/organizations/users', { body: { email: member } })).response.status).toBe(201);
    metered = await createKey('metered', ['read', 'write']);
    reader = await createKey('reader', ['read']);
    idle = await createKey('idle', ['read']);

    // Day 1: two successes.
    const k = metered.key;
    expect((await t.request('GET', '/v1/me', { key: k })).status).toBe(200);
    expect((await t.request('GET', '/v1/namespaces', { key: k })).status).toBe(200);

    // Day 2: two successes and three 4xx.
    clock.set(DAY2);
    expect((await t.request('GET', '/v1/me', { key: k })).status).toBe(200);
    expect((await t.request('POST', '/v1/namespaces', { key: k, body: { namespace_name: 'metered-ns' } })).status).toBe(201);
    expect((await t.request('GET', '/v1/namespaces/missing', { key: k })).status).toBe(404);
    expect((await t.request('GET', '/v1/organizations/users', { key: k })).status).toBe(403);
    expect((await t.request('POST', '/v1/namespaces', { key: k, body: { namespace_name: 'x' } })).status).toBe(422);
    // Not attributed to any key or organization.
    expect((await t.request('GET', '/v1/me', { key: `${k}-wrong` })).status).toBe(401);

    clock.set(QUERY_TIME);
  });

  afterAll(async () => {
    await t?.stop();
  });

  describe('GET /v1/organizations/api-keys/{key_id}/usage', () => {
    it('totals the key over the default window of the last 7 days', async () => {
      const res = await admin.GET('/v1/organizations/api-keys/{key_id}/usage', { params: { path: { key_id: metered.key_id } } });
      expect(res.response.status).toBe(200);
      const u = res.data!;
      expect(u.key_id).toBe(metered.key_id);
      expect(u.end).toBe(QUERY_TIME.toISOString());
      expect(new Date(u.end).getTime() - new Date(u.start).getTime()).toBe(WEEK_MS);
      expect(u.total_requests).toBe(7);
      expect(u.error_count).toBe(3);
      // getMe, listNamespaces, createNamespace, getNamespace, listUsers.
      expect(u.unique_endpoints).toBe(5);
      expect(u.total_credits).toBe(0);
      expect(u.avg_latency_ms).toBeGreaterThan(0);
      expect(u.p95_latency_ms).toBeGreaterThan(0);
    });

    it('counts only the requests inside an explicit window', async () => {
      const day2 = await admin.GET('/v1/organizations/api-keys/{key_id}/usage', {
        params: { path: { key_id: metered.key_id }, query: { start: '2026-03-10T00:00:00Z', end: '2026-03-11T00:00:00Z' } },
      });
      expect(day2.data).toMatchObject({ total_requests: 5, error_count: 3, unique_endpoints: 4 });
      expect(day2.data!.start).toBe('2026-03-10T00:00:00.000Z');
      expect(day2.data!.end).toBe('2026-03-11T00:00:00.000Z');
      const day1 = await admin.GET('/v1/organizations/api-keys/{key_id}/usage', {
        params: { path: { key_id: metered.key_id }, query: { start: '2026-03-09T00:00:00Z', end: '2026-03-10T00:00:00Z' } },
      });
      expect(day1.data).toMatchObject({ total_requests: 2, error_count: 0, unique_endpoints: 2 });
      // A start alone runs to now; an end alone starts 7 days before it.
      const since = await admin.GET('/v1/organizations/api-keys/{key_id}/usage', {
        params: { path: { key_id: metered.key_id }, query: { start: '2026-03-10T00:00:00Z' } },
      });
      expect(since.data).toMatchObject({ total_requests: 5, end: QUERY_TIME.toISOString() });
      const until = await admin.GET('/v1/organizations/api-keys/{key_id}/usage', {
        params: { path: { key_id: metered.key_id }, query: { end: '2026-03-10T00:00:00Z' } },
      });
      expect(until.data).toMatchObject({ total_requests: 2, start: '2026-03-03T00:00:00.000Z' });
    });

    it('a key without requests has zero figures', async () => {
      const res = await admin.GET('/v1/organizations/api-keys/{key_id}/usage', { params: { path: { key_id: idle.key_id } } });
      expect(res.response.status).toBe(200);
      expect(res.data).toMatchObject({ total_requests: 0, error_count: 0, unique_endpoints: 0, avg_latency_ms: 0, p95_latency_ms: 0, total_credits: 0 });
    });
  });

  describe('GET /v1/organizations/api-keys/{key_id}/usage/endpoints', () => {
    it('has one row per operation, busiest first', async () => {
      const res = await admin.GET('/v1/organizations/api-keys/{key_id}/usage/endpoints', { params: { path: { key_id: metered.key_id } } });
      expect(res.response.status).toBe(200);
      expect(res.data!.key_id).toBe(metered.key_id);
      const rows = res.data!.endpoints;
      const byOp = Object.fromEntries(rows.map((r) => [r.operation_id, r]));
      expect(Object.keys(byOp).sort()).toEqual(['createNamespace', 'getMe', 'getNamespace', 'listNamespaces', 'listUsers']);
      expect(byOp.getMe).toMatchObject({ method: 'GET', path: '/v1/me', requests: 2, errors: 0 });
      expect(byOp.createNamespace).toMatchObject({ method: 'POST', path: '/v1/namespaces', requests: 2, errors: 1 });
      expect(byOp.listNamespaces).toMatchObject({ method: 'GET', path: '/v1/namespaces', requests: 1, errors: 0 });
      expect(byOp.getNamespace).toMatchObject({ method: 'GET', path: '/v1/namespaces/{name}', requests: 1, errors: 1 });
      expect(byOp.listUsers).toMatchObject({ method: 'GET', path: '/v1/organizations/users', requests: 1, errors: 1 });
      for (const row of rows) {
        expect(row.avg_latency_ms).toBeGreaterThan(0);
        expect(row.p95_latency_ms).toBeGreaterThan(0);
        expect(row.credits).toBe(0);
      }
      expect(rows.map((r) => r.requests)).toEqual([...rows.map((r) => r.requests)].sort((a, b) => b - a));
      expect(rows.reduce((sum, r) => sum + r.requests, 0)).toBe(7);
    });

    it('respects the window', async () => {
      const res = await admin.GET('/v1/organizations/api-keys/{key_id}/usage/endpoints', {
        params: { path: { key_id: metered.key_id }, query: { start: '2026-03-09T00:00:00Z', end: '2026-03-10T00:00:00Z' } },
      });
      expect(res.data!.endpoints.map((r) => r.operation_id).sort()).toEqual(['getMe', 'listNamespaces']);
    });
  });

  describe('GET /v1/organizations/usage', () => {
    it('totals the organization per key and per day', async () => {
      const res = await admin.GET('/v1/organizations/usage', {});
      expect(res.response.status).toBe(200);
      const u = res.data!;
      const me = await admin.GET('/v1/me', {});
      expect(u.organization_id).toBe(organizationMe(me.data).organization.organization_id);
      expect(new Date(u.end).getTime() - new Date(u.start).getTime()).toBe(WEEK_MS);

      const row = u.by_key.find((k) => k.key_id === metered.key_id);
      expect(row).toEqual({ key_id: metered.key_id, key_name: 'metered', requests: 7, credits: 0, errors: 3 });
      const adminRow = u.by_key.find((k) => k.key_name === 'admin-key');
      expect(adminRow!.requests).toBeGreaterThan(0);
      expect(u.by_key.find((k) => k.key_id === idle.key_id)).toBeUndefined();
      // The failed authentication is not the organization's.
      expect(u.by_key.every((k) => k.key_id !== null)).toBe(true);

      expect(u.by_day.map((d) => d.date)).toEqual(['2026-03-09', '2026-03-10']);
      const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);
      expect(sum(u.by_key.map((k) => k.requests))).toBe(u.total_requests);
      expect(sum(u.by_day.map((d) => d.requests))).toBe(u.total_requests);
      expect(sum(u.by_key.map((k) => k.errors))).toBe(u.error_count);
      expect(u.error_count).toBeGreaterThanOrEqual(3);
      expect(u.avg_latency_ms).toBeGreaterThan(0);
      expect(u.p95_latency_ms).toBeGreaterThan(0);
    });

    it('respects the window', async () => {
      const res = await admin.GET('/v1/organizations/usage', { params: { query: { start: '2026-03-09T00:00:00Z', end: '2026-03-10T00:00:00Z' } } });
      expect(res.data!.by_day.map((d) => d.date)).toEqual(['2026-03-09']);
      expect(res.data!.by_key.find((k) => k.key_id === metered.key_id)).toMatchObject({ requests: 2, errors: 0 });
    });
  });

  describe('GET /v1/organizations/usage/api-keys/{key_id}', () => {
    it('attributes usage to the key per day and per status class, with last_used_at', async () => {
      const res = await admin.GET('/v1/organizations/usage/api-keys/{key_id}', { params: { path: { key_id: metered.key_id } } });
      expect(res.response.status).toBe(200);
      expect(res.data).toMatchObject({
        key_id: metered.key_id,
        key_name: 'metered',
        user_email: member,
        total_requests: 7,
        total_credits: 0,
        by_status_class: { '2xx': 4, '4xx': 3 },
        by_day: [
          { date: '2026-03-09', requests: 2, errors: 0, credits: 0 },
          { date: '2026-03-10', requests: 5, errors: 3, credits: 0 },
        ],
      });
      expect(Object.keys(res.data!.by_status_class).sort()).toEqual(['2xx', '4xx']);
      // The last successful request was on day 2.
      expect(res.data!.last_used_at).toBe(DAY2.toISOString());
    });

    it('an unused key has no last_used_at and no classes', async () => {
      const res = await admin.GET('/v1/organizations/usage/api-keys/{key_id}', { params: { path: { key_id: idle.key_id } } });
      expect(res.data).toMatchObject({ total_requests: 0, last_used_at: null, by_status_class: {}, by_day: [] });
    });

    it('a revoked key keeps its history', async () => {
      const key = await createKey('short-lived', ['read']);
      expect((await t.request('GET', '/v1/me', { key: key.key })).status).toBe(200);
      const revoked = await admin.DELETE('/v1/organizations/users/{user_email}/api-keys/{key_name}', {
        params: { path: { user_email: member, key_name: 'short-lived' }, query: { force: true } },
      });
      expect(revoked.response.status).toBe(200);
      clock.advance(1000);
      const res = await admin.GET('/v1/organizations/usage/api-keys/{key_id}', { params: { path: { key_id: key.key_id } } });
      expect(res.response.status).toBe(200);
      expect(res.data).toMatchObject({ total_requests: 1, by_status_class: { '2xx': 1 } });
      expect(res.data!.last_used_at).not.toBeNull();
    });
  });

  describe('errors', () => {
    const windows: Array<{ start: string; end: string }> = [
      { start: '2026-03-10T00:00:00Z', end: '2026-03-09T00:00:00Z' },
      { start: '2026-03-10T00:00:00Z', end: '2026-03-10T00:00:00Z' },
      // Longer than 366 days: the figures aggregate every row of the window, so its length is bounded.
      { start: '0001-01-01T00:00:00Z', end: '9999-12-31T23:59:59Z' },
    ];

    it('start at or after end, or a window over 366 days, is a 400 on every usage endpoint', async () => {
      for (const query of windows) {
        const path = { key_id: metered.key_id };
        const results = [
          await admin.GET('/v1/organizations/api-keys/{key_id}/usage', { params: { path, query } }),
          await admin.GET('/v1/organizations/api-keys/{key_id}/usage/endpoints', { params: { path, query } }),
          await admin.GET('/v1/organizations/usage/api-keys/{key_id}', { params: { path, query } }),
          await admin.GET('/v1/organizations/usage', { params: { query } }),
        ];
        for (const res of results) {
          expect(res.response.status).toBe(400);
          expect(res.error).toMatchObject({ success: false, status: 400, error: { type: 'InputError' } });
        }
      }
      // A start in the future with the default end is after end, too.
      const future = await admin.GET('/v1/organizations/usage', { params: { query: { start: '2027-01-01T00:00:00Z' } } });
      expect(future.response.status).toBe(400);
    });

    it('an unknown key_id is a 404', async () => {
      const path = { key_id: 'key_doesnotexist' };
      for (const res of [
        await admin.GET('/v1/organizations/api-keys/{key_id}/usage', { params: { path } }),
        await admin.GET('/v1/organizations/api-keys/{key_id}/usage/endpoints', { params: { path } }),
        await admin.GET('/v1/organizations/usage/api-keys/{key_id}', { params: { path } }),
      ]) {
        expect(res.response.status).toBe(404);
        expect(res.error).toMatchObject({ error: { type: 'NotFoundError' } });
      }
    });

    it('a key without admin permission gets 403, even for its own usage', async () => {
      const c = t.client(reader.key);
      for (const key_id of [reader.key_id, metered.key_id]) {
        expect((await c.GET('/v1/organizations/api-keys/{key_id}/usage', { params: { path: { key_id } } })).response.status).toBe(403);
        expect((await c.GET('/v1/organizations/api-keys/{key_id}/usage/endpoints', { params: { path: { key_id } } })).response.status).toBe(403);
        expect((await c.GET('/v1/organizations/usage/api-keys/{key_id}', { params: { path: { key_id } } })).response.status).toBe(403);
      }
      const org = await c.GET('/v1/organizations/usage', {});
      expect(org.response.status).toBe(403);
      expect(org.error).toMatchObject({ error: { type: 'NotAllowedError' } });
    });
  });

  // Last: its requests add to the organization's totals the tests above pin.
  it("counts a real key's refused requests in its usage (another origin, past its expiry), a wrong secret in nobody's", async () => {
    const created = await admin.POST('/v1/organizations/users/{user_email}/api-keys', {
      params: { path: { user_email: member } },
      body: { name: 'site-only', permissions: ['read'], allowed_origins: ['https://app.example'], expires_at: new Date(QUERY_TIME.getTime() + 3_600_000).toISOString() },
    });
    expect(created.response.status).toBe(201);
    const siteOnly = { key: created.data!.key, key_id: created.data!.key_id };
    clock.set(new Date(QUERY_TIME.getTime() - 60_000));
    expect((await t.request('GET', '/v1/me', { key: siteOnly.key, headers: { Origin: 'https://evil.example' } })).status).toBe(403);
    expect((await t.request('GET', '/v1/me', { key: siteOnly.key, headers: { Origin: 'https://app.example' } })).status).toBe(200);
    expect((await t.request('GET', '/v1/me', { key: `${siteOnly.key}-wrong`, headers: { Origin: 'https://evil.example' } })).status).toBe(401);
    // Past its expiry the key is refused (401), and that attempt counts for it too.
    clock.set(new Date(QUERY_TIME.getTime() + 2 * 3_600_000));
    expect((await t.request('GET', '/v1/me', { key: siteOnly.key })).status).toBe(401);
    clock.set(new Date(QUERY_TIME.getTime() + 3 * 3_600_000));

    const usage = await admin.GET('/v1/organizations/usage/api-keys/{key_id}', { params: { path: { key_id: siteOnly.key_id } } });
    expect(usage.response.status).toBe(200);
    expect(usage.data).toMatchObject({ key_id: siteOnly.key_id, total_requests: 3, by_status_class: { '2xx': 1, '4xx': 2 } });
    const endpoints = await admin.GET('/v1/organizations/api-keys/{key_id}/usage/endpoints', { params: { path: { key_id: siteOnly.key_id } } });
    expect(endpoints.response.status).toBe(200);
    expect(JSON.stringify(endpoints.data)).toContain('getMe');
  });
});
