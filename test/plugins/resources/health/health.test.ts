/**
 * GET /v1/health: every registered component, 200 while every required one is up, 503 'down' when a
 * required one fails, 200 'degraded' when only optional ones fail. Public: no key needed, and then only each
 * component's state is shown; an admin key of the first organization sees figures and error texts too.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HealthRegistry, resolve, TenantStore } from '../../../../kernel/tokens.js';
import { startTestKernel, type TestKernel } from '../../../support/kernel.js';

describe('health', () => {
  let t: TestKernel;
  let optionalFails = false;
  let requiredFails = false;

  beforeAll(async () => {
    t = await startTestKernel();
    const health = resolve(t.kernel.container, HealthRegistry);
    health.register({
      name: 'optional_cache',
      kind: 'test',
      required: false,
      probe: async () => {
        if (optionalFails) throw new Error('cache unreachable');
      },
    });
    health.register({
      name: 'required_store',
      kind: 'test',
      required: true,
      probe: async () => {
        if (requiredFails) throw new Error('store unreachable');
      },
    });
  });

  afterAll(async () => {
    await t?.stop();
  });

  it("answers 200 ok with the database and event bus up, with every figure for the operator's key", async () => {
    const res = await t.client().GET('/v1/health', {});
    expect(res.response.status).toBe(200);
    const body = res.data!;
    expect(body.status).toBe('ok');
    expect(body.version).toBe('0.82.0');
    expect(body.uptime_seconds).toBeGreaterThanOrEqual(0);
    expect(body.view).toBe('operator');
    const shared = process.env.TEST_DATABASE_URL ? ['task_workers'] : [];
    expect(Object.keys(body.components).sort()).toEqual(['api', 'blob_store', 'database', 'event_bus', 'optional_cache', 'required_store', 'task_queue', ...shared, 'vectors']);
    const { database, event_bus } = body.components;
    expect(database).toMatchObject({ status: 'up', required: true });
    expect(event_bus).toMatchObject({ status: 'up', required: true });
    expect(database!.kind).toBe(process.env.TEST_DATABASE_URL ? 'postgres' : 'pglite');
    expect(event_bus!.kind).toBe(process.env.NATS_URL ? 'nats' : 'in-process');
    expect(typeof database!.latency_ms).toBe('number');
    expect(database!.error).toBeUndefined();
    // Memory of the processes health can see: here only this API process (no inference workers run).
    expect(body.memory!.by_component.api).toBeGreaterThan(0);
    expect(body.memory!.total_rss_bytes).toBe(Object.values(body.memory!.by_component).reduce((sum, n) => sum + n, 0));
  });

  it('never refuses a key, even an invalid one, and is never rate limited', async () => {
    const res = await t.request('GET', '/v1/health', { key: 'svc_sk_not_a_key' });
    expect(res.status).toBe(200);
    expect(res.body.view).toBe('public');
    expect(res.headers.get('x-ratelimit-limit')).toBeNull();
  });

  it("shows a caller without the operator's key each component's state, and no process ids, memory, addresses or errors", async () => {
    optionalFails = true;
    const { data: readKey } = await t.client().POST('/v1/organizations/users/{user_email}/api-keys', {
      params: { path: { user_email: t.adminEmail } },
      body: { name: 'health-reader', permissions: ['read'] },
    });
    // An admin of another organization is a tenant, not the operator.
    const otherSecret = `svc_sk_health_other_${'o'.repeat(40)}`;
    await t.kernel.services.get(TenantStore).createOrganization({ name: 'health-other', ownerEmail: 'owner@health-other.test', adminKeyPlaintext: otherSecret });
    try {
      for (const key of [undefined, 'svc_sk_not_a_key', readKey!.key, otherSecret]) {
        const res = await t.request('GET', '/v1/health', key ? { key } : {});
        expect(res.status).toBe(200);
        expect(res.body).toMatchObject({ status: 'degraded', view: 'public' });
        expect(res.body.memory).toBeUndefined();
        for (const component of Object.values(res.body.components) as Array<Record<string, unknown>>) {
          expect(Object.keys(component).sort()).toEqual(expect.arrayContaining(['latency_ms', 'required', 'status']));
          expect(component.details).toBeUndefined();
          expect(component.error).toBeUndefined();
        }
        expect(res.body.components.optional_cache).toMatchObject({ status: 'down', required: false });
        expect(JSON.stringify(res.body)).not.toContain(String(process.pid));
      }
      const operator = await t.request('GET', '/v1/health', { key: t.adminKey });
      expect(operator.body.view).toBe('operator');
      expect(operator.body.components.api.details.pid).toBe(process.pid);
      expect(operator.body.components.optional_cache.error).toBe('cache unreachable');
      expect(operator.body.memory.total_rss_bytes).toBeGreaterThan(0);
    } finally {
      optionalFails = false;
    }
  });

  it('answers 200 degraded when only a non-required component fails', async () => {
    optionalFails = true;
    try {
      const res = await t.request('GET', '/v1/health', { key: t.adminKey });
      expect(res.status).toBe(200);
      expect(res.body.status).toBe('degraded');
      expect(res.body.components.optional_cache).toMatchObject({ status: 'down', required: false, latency_ms: null, error: 'cache unreachable' });
      expect(res.body.components.database.status).toBe('up');
    } finally {
      optionalFails = false;
    }
  });

  it('answers 503 down when a required component fails', async () => {
    requiredFails = true;
    try {
      const res = await t.client(undefined).GET('/v1/health', {});
      expect(res.response.status).toBe(503);
      // The 503 body is a HealthResponse, not an ErrorResponse.
      const body = res.error!;
      if (!('components' in body)) throw new Error(`expected a HealthResponse, got ${JSON.stringify(body)}`);
      expect(body.status).toBe('down');
      expect(body.components.required_store).toMatchObject({ status: 'down', required: true, latency_ms: null, error: 'store unreachable' });
      expect(body.components.database!.status).toBe('up');
      expect(body.components.event_bus!.status).toBe('up');
    } finally {
      requiredFails = false;
    }
  });

  it('down wins over degraded', async () => {
    requiredFails = true;
    optionalFails = true;
    try {
      const res = await t.request('GET', '/v1/health');
      expect(res.status).toBe(503);
      expect(res.body.status).toBe('down');
    } finally {
      requiredFails = false;
      optionalFails = false;
    }
  });

  it('recovers once the component answers again', async () => {
    const res = await t.request('GET', '/v1/health');
    expect(res.status).toBe(200);
    expect(res.body.status).toBe('ok');
  });

  it('reports a probe that throws a non-Error value', async () => {
    resolve(t.kernel.container, HealthRegistry).register({
      name: 'odd_thrower',
      kind: 'test',
      required: false,
      probe: () => Promise.reject('plain string'),
    });
    const res = await t.request('GET', '/v1/health', { key: t.adminKey });
    expect(res.status).toBe(200);
    expect(res.body.status).toBe('degraded');
    expect(res.body.components.odd_thrower).toMatchObject({ status: 'down', error: 'plain string' });
  });
});
