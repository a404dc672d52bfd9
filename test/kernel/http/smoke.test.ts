import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestKernel, type TestKernel, organizationMe } from '../../support/kernel.js';

describe('the HTTP kernel', () => {
  let t: TestKernel;
  beforeAll(async () => {
    t = await startTestKernel();
  });
  afterAll(async () => {
    await t.stop();
  });

  it('serves health without a key and reports every component', async () => {
    const { data, response } = await t.client(undefined).GET('/v1/health', {});
    expect(response.status).toBe(200);
    expect(data?.status).toBe('ok');
    // task_workers: the processes taking tasks, listed when PostgreSQL is shared by several of them.
    const shared = process.env.TEST_DATABASE_URL ? ['task_workers'] : [];
    expect(Object.keys(data!.components).sort()).toEqual(['api', 'blob_store', 'database', 'event_bus', 'task_queue', ...shared, 'vectors']);
    expect(data!.components.database!.status).toBe('up');
  });

  it('serves the OpenAPI document', async () => {
    const res = await t.request('GET', '/v1/openapi.json');
    expect(res.status).toBe(200);
    expect(res.body.openapi).toBe('3.1.0');
    expect(res.body.paths['/v1/me'].get['x-permission']).toBe('read');
  });

  it('answers GET /v1/me for the admin key', async () => {
    const { data, response } = await t.client().GET('/v1/me', {});
    expect(response.status).toBe(200);
    expect(organizationMe(data).key.name).toBe('admin-key');
    expect(organizationMe(data).capabilities.effective_permissions).toEqual(['read', 'write', 'delete', 'admin']);
  });

  it('refuses a missing or malformed Authorization header with a 401 ErrorResponse', async () => {
    const missing = await t.request('GET', '/v1/me');
    expect(missing.status).toBe(401);
    expect(missing.body).toMatchObject({ success: false, status: 401, error: { type: 'AuthenticationError' } });
    const basic = await t.request('GET', '/v1/me', { headers: { Authorization: 'Basic abc' } });
    expect(basic.status).toBe(401);
    const unknown = await t.request('GET', '/v1/me', { key: 'svc_sk_nope' });
    expect(unknown.status).toBe(401);
    expect(unknown.body.error.message).toBe('Invalid API key');
  });

  it('answers unknown routes with 404 and wrong methods with 405', async () => {
    expect((await t.request('GET', '/v1/nothing-here', { key: t.adminKey })).status).toBe(404);
    const res = await t.request('PUT', '/v1/me', { key: t.adminKey });
    expect(res.status).toBe(405);
    expect(res.headers.get('allow')).toBe('GET, HEAD');
  });

  it('answers HEAD wherever GET is answered: same status and headers, no body', async () => {
    const get = await t.request('GET', '/v1/health');
    const head = await t.request('HEAD', '/v1/health');
    expect(head.status).toBe(get.status);
    expect(head.text).toBe('');
    expect(head.headers.get('content-type')).toBe(get.headers.get('content-type'));
    // Authenticated like the GET it stands for.
    expect((await t.request('HEAD', '/v1/me')).status).toBe(401);
    const me = await t.request('HEAD', '/v1/me', { key: t.adminKey });
    expect(me.status).toBe(200);
    expect(me.text).toBe('');
    // Not a way into other methods: a route without GET still refuses it.
    const post = await t.request('HEAD', '/v1/retrievers/ret_missing/execute', { key: t.adminKey });
    expect(post.status).toBe(405);
    expect(post.headers.get('allow')).toBe('POST');
  });
});
