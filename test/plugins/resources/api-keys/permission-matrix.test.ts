/**
 * Every single permission against one route of every minimum level, over real HTTP. A key passes when
 * its strongest permission reaches the route's; otherwise the answer is a 403 ErrorResponse.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestKernel, type RawResponse, type TestKernel, organizationMe } from '../../../support/kernel.js';

type Permission = 'read' | 'write' | 'delete' | 'admin';
const LEVELS: Permission[] = ['read', 'write', 'delete', 'admin'];

let t: TestKernel;
const keys = {} as Record<Permission, string>;
let counter = 0;

function keysPath(email = t.adminEmail): string {
  return `/v1/organizations/users/${encodeURIComponent(email)}/api-keys`;
}

async function createKey(name: string, permissions: Permission[]): Promise<string> {
  const { data, response } = await t.client().POST('/v1/organizations/users/{user_email}/api-keys', {
    params: { path: { user_email: t.adminEmail } },
    body: { name, permissions },
  });
  expect(response.status).toBe(201);
  return data!.key;
}

async function createNamespace(): Promise<string> {
  const name = `matrix_ns_${++counter}`;
  const res = await t.request('POST', '/v1/namespaces', { key: t.adminKey, body: { namespace_name: name } });
  expect(res.status).toBe(201);
  return name;
}

function expectForbidden(res: RawResponse): void {
  expect(res.status).toBe(403);
  expect(res.body).toMatchObject({ success: false, status: 403, error: { type: 'NotAllowedError' } });
  expect(typeof res.body.error.message).toBe('string');
}

/** One route per minimum permission level; each call builds whatever it needs to succeed. */
const routes: Record<Permission, { label: string; call: (key: string) => Promise<RawResponse>; ok: number }> = {
  read: { label: 'GET /v1/namespaces', ok: 200, call: (key) => t.request('GET', '/v1/namespaces', { key }) },
  write: {
    label: 'POST /v1/namespaces',
    ok: 201,
    call: (key) => t.request('POST', '/v1/namespaces', { key, body: { namespace_name: `matrix_new_${++counter}` } }),
  },
  delete: {
    label: 'DELETE /v1/namespaces/{name}',
    ok: 200,
    call: async (key) => t.request('DELETE', `/v1/namespaces/${await createNamespace()}`, { key }),
  },
  admin: {
    label: 'GET /v1/organizations/users/{email}/api-keys',
    ok: 200,
    call: (key) => t.request('GET', keysPath(), { key }),
  },
};

beforeAll(async () => {
  t = await startTestKernel();
  for (const level of LEVELS) keys[level] = await createKey(`only-${level}`, [level]);
});

afterAll(async () => {
  await t?.stop();
});

describe('permission × route matrix', () => {
  for (const held of LEVELS) {
    for (const required of LEVELS) {
      const allowed = LEVELS.indexOf(held) >= LEVELS.indexOf(required);
      it(`a '${held}' key ${allowed ? 'may' : 'may not'} call ${routes[required].label} (needs '${required}')`, async () => {
        const res = await routes[required].call(keys[held]);
        if (allowed) {
          expect(res.status).toBe(routes[required].ok);
        } else {
          expectForbidden(res);
          expect(res.body.error.details).toMatchObject({ required_permission: required });
        }
      });
    }
  }

  it('GET /v1/me works for every permission level and reports the implied permissions', async () => {
    for (const level of LEVELS) {
      const { data, response } = await t.client(keys[level]).GET('/v1/me', {});
      expect(response.status).toBe(200);
      expect(organizationMe(data).capabilities.permission_level).toBe(level);
      expect(organizationMe(data).capabilities.effective_permissions).toEqual(LEVELS.slice(0, LEVELS.indexOf(level) + 1));
      expect(organizationMe(data).key.permissions).toEqual([level]);
    }
  });

  it('a refused write changes nothing', async () => {
    const name = `matrix_refused_${++counter}`;
    expectForbidden(await t.request('POST', '/v1/namespaces', { key: keys.read, body: { namespace_name: name } }));
    expect((await t.request('GET', `/v1/namespaces/${name}`, { key: t.adminKey })).status).toBe(404);
  });

  it('a refused delete leaves the namespace in place', async () => {
    const name = await createNamespace();
    expectForbidden(await t.request('DELETE', `/v1/namespaces/${name}`, { key: keys.write }));
    expect((await t.request('GET', `/v1/namespaces/${name}`, { key: t.adminKey })).status).toBe(200);
  });

  it('uses the strongest permission of a list', async () => {
    const mixed = await createKey('read-and-admin', ['read', 'admin']);
    expect((await routes.admin.call(mixed)).status).toBe(200);
    expect((await routes.delete.call(mixed)).status).toBe(200);
    const readWrite = await createKey('read-and-write', ['read', 'write']);
    expect((await routes.write.call(readWrite)).status).toBe(201);
    expectForbidden(await routes.delete.call(readWrite));
  });
});

describe('key management needs admin', () => {
  let target: string;
  beforeAll(async () => {
    target = 'managed-target';
    await createKey(target, ['read']);
  });

  for (const level of ['read', 'write', 'delete'] as const) {
    it(`a '${level}' key cannot create, list, get, update, rotate or revoke keys`, async () => {
      const key = keys[level];
      const one = `${keysPath()}/${target}`;
      expectForbidden(await t.request('POST', keysPath(), { key, body: { name: `by-${level}` } }));
      expectForbidden(await t.request('GET', keysPath(), { key }));
      expectForbidden(await t.request('GET', one, { key }));
      expectForbidden(await t.request('PATCH', one, { key, body: { description: 'changed' } }));
      expectForbidden(await t.request('POST', `${one}/rotate`, { key }));
      expectForbidden(await t.request('DELETE', `${one}?force=true`, { key }));
      // Nothing happened: no new key, the target untouched and still active.
      const list = await t.client().GET('/v1/organizations/users/{user_email}/api-keys', {
        params: { path: { user_email: t.adminEmail }, query: { include_revoked: true } },
      });
      expect(list.data!.results.map((k) => k.name)).not.toContain(`by-${level}`);
      const got = list.data!.results.find((k) => k.name === target)!;
      expect(got.status).toBe('active');
      expect(got.description).toBeNull();
    });
  }

  it('a non-admin key cannot escalate its own permissions', async () => {
    const res = await t.request('PATCH', `${keysPath()}/only-delete`, { key: keys.delete, body: { permissions: ['admin'] } });
    expectForbidden(res);
    const { data } = await t.client(keys.delete).GET('/v1/me', {});
    expect(organizationMe(data).key.permissions).toEqual(['delete']);
  });

  it('an admin key can create, rotate and revoke keys', async () => {
    const key = keys.admin;
    const created = await t.request('POST', keysPath(), { key, body: { name: 'made-by-admin', permissions: ['read'] } });
    expect(created.status).toBe(201);
    expect((await t.request('POST', `${keysPath()}/made-by-admin/rotate`, { key })).status).toBe(200);
    expect((await t.request('DELETE', `${keysPath()}/made-by-admin`, { key })).status).toBe(200);
  });
});
