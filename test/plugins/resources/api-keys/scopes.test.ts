/**
 * Scoped keys over real HTTP: namespace scopes by literal id, literal name, `*` and prefix pattern,
 * operations lists, X-Namespace on GET /v1/me, widening with `scopes: []`, and scopes on admin keys.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { components } from '../../../../generated/openapi.js';
import { startTestKernel, type RawResponse, type TestKernel, organizationMe } from '../../../support/kernel.js';

type ResourceScope = components['schemas']['ResourceScope'];
type Permission = components['schemas']['Permission'];

let t: TestKernel;
const ns: Record<'a' | 'b' | 'internal', { id: string; name: string }> = {} as never;

function keysPath(): string {
  return `/v1/organizations/users/${encodeURIComponent(t.adminEmail)}/api-keys`;
}

async function createKey(name: string, scopes: ResourceScope[], permissions: Permission[] = ['read', 'write', 'delete']): Promise<string> {
  const { data, response } = await t.client().POST('/v1/organizations/users/{user_email}/api-keys', {
    params: { path: { user_email: t.adminEmail } },
    body: { name, scopes, permissions },
  });
  expect(response.status).toBe(201);
  expect(data!.scopes).toEqual(scopes);
  return data!.key;
}

async function createNamespace(name: string): Promise<{ id: string; name: string }> {
  const { data, response } = await t.client().POST('/v1/namespaces', { body: { namespace_name: name } });
  expect(response.status).toBe(201);
  return { id: data!.namespace_id, name: data!.namespace_name };
}

async function visibleNamespaces(key: string): Promise<string[]> {
  const { data, response } = await t.client(key).GET('/v1/namespaces', {});
  expect(response.status).toBe(200);
  expect(data!.total).toBe(data!.results.length);
  return data!.results.map((n) => n.namespace_name).sort();
}

function expectForbidden(res: RawResponse): void {
  expect(res.status).toBe(403);
  expect(res.body).toMatchObject({ success: false, status: 403, error: { type: 'NotAllowedError' } });
}

beforeAll(async () => {
  t = await startTestKernel();
  ns.a = await createNamespace('customer_a');
  ns.b = await createNamespace('customer_b');
  ns.internal = await createNamespace('internal');
});

afterAll(async () => {
  await t?.stop();
});

describe('a key scoped to one namespace by literal id', () => {
  let key: string;
  beforeAll(async () => {
    key = await createKey('scoped-id', [{ resource_type: 'namespace', resource_id: ns.a.id }]);
  });

  it('reaches that namespace by name and by id', async () => {
    expect((await t.request('GET', `/v1/namespaces/${ns.a.name}`, { key })).status).toBe(200);
    expect((await t.request('GET', `/v1/namespaces/${ns.a.id}`, { key })).status).toBe(200);
  });

  it('gets 403 on another namespace, by name or id', async () => {
    expectForbidden(await t.request('GET', `/v1/namespaces/${ns.b.name}`, { key }));
    expectForbidden(await t.request('GET', `/v1/namespaces/${ns.b.id}`, { key }));
  });

  it('sees only its namespace in the list', async () => {
    expect(await visibleNamespaces(key)).toEqual(['customer_a']);
  });
});

describe('a key scoped to one namespace by literal name', () => {
  let key: string;
  beforeAll(async () => {
    key = await createKey('scoped-name', [{ resource_type: 'namespace', resource_id: 'customer_a' }]);
  });

  it('reaches the namespace by name, by id and whatever the case of the name', async () => {
    expect((await t.request('GET', '/v1/namespaces/customer_a', { key })).status).toBe(200);
    expect((await t.request('GET', `/v1/namespaces/${ns.a.id}`, { key })).status).toBe(200);
    expect((await t.request('GET', '/v1/namespaces/CUSTOMER_A', { key })).status).toBe(200);
  });

  it('gets 403 on namespace B and does not see B in the list', async () => {
    expectForbidden(await t.request('GET', '/v1/namespaces/customer_b', { key }));
    expectForbidden(await t.request('GET', `/v1/namespaces/${ns.b.id}`, { key }));
    expect(await visibleNamespaces(key)).toEqual(['customer_a']);
  });

  it('cannot change or delete namespace B', async () => {
    expectForbidden(await t.request('PATCH', '/v1/namespaces/customer_b', { key, body: { description: 'x' } }));
    expectForbidden(await t.request('DELETE', '/v1/namespaces/customer_b', { key }));
    const { data } = await t.client().GET('/v1/namespaces/{name}', { params: { path: { name: 'customer_b' } } });
    expect(data!.description).toBeNull();
  });

  it('cannot create a namespace outside its scope', async () => {
    expectForbidden(await t.request('POST', '/v1/namespaces', { key, body: { namespace_name: 'customer_zz' } }));
    expect((await t.request('GET', '/v1/namespaces/customer_zz', { key: t.adminKey })).status).toBe(404);
  });

  describe('GET /v1/me with X-Namespace', () => {
    it('answers 200 with the allowed operations for namespace A, by name or id', async () => {
      for (const header of [ns.a.name, ns.a.id]) {
        const { data, response } = await t.client(key, header).GET('/v1/me', {});
        expect(response.status).toBe(200);
        expect(organizationMe(data).namespace).toMatchObject({ namespace_id: ns.a.id, namespace_name: ns.a.name });
        expect(organizationMe(data).namespace!.allowed_operations).toEqual(
          expect.arrayContaining(['read_data', 'write_data', 'delete_data', 'modify_infrastructure']),
        );
        expect(organizationMe(data).namespace!.allowed_operations).not.toContain('manage_permissions');
        expect(organizationMe(data).capabilities.organization_wide).toBe(false);
      }
    });

    it('answers 403 for namespace B', async () => {
      expectForbidden(await t.request('GET', '/v1/me', { key, headers: { 'X-Namespace': ns.b.name } }));
      expectForbidden(await t.request('GET', '/v1/me', { key, headers: { 'X-Namespace': ns.b.id } }));
    });

    it('answers the same 403 for a namespace outside its scopes whether it exists or not', async () => {
      const missing = await t.request('GET', '/v1/me', { key, headers: { 'X-Namespace': 'no_such_namespace' } });
      const existing = await t.request('GET', '/v1/me', { key, headers: { 'X-Namespace': ns.b.name } });
      expectForbidden(missing);
      expectForbidden(existing);
      expect(missing.body.error.message).toBe("The API key's scopes do not include namespace 'no_such_namespace'");
      expect(existing.body.error.message).toBe(`The API key's scopes do not include namespace '${ns.b.name}'`);
      // On a namespaced route too: before, B answered 403 and a missing name 404, telling which names exist.
      for (const header of [ns.b.name, 'no_such_namespace']) {
        const res = await t.request('GET', '/v1/buckets', { key, headers: { 'X-Namespace': header } });
        expectForbidden(res);
        expect(res.body.error.message).toBe(`The API key's scopes do not include namespace '${header}'`);
      }
    });

    it('answers without a namespace part when X-Namespace is absent', async () => {
      const { data, response } = await t.client(key).GET('/v1/me', {});
      expect(response.status).toBe(200);
      expect(organizationMe(data).namespace).toBeUndefined();
      expect(organizationMe(data).key.scopes).toEqual([{ resource_type: 'namespace', resource_id: 'customer_a' }]);
    });
  });
});

describe("a key scoped to '*'", () => {
  it('reaches every namespace', async () => {
    const key = await createKey('scoped-star', [{ resource_type: 'namespace', resource_id: '*' }]);
    expect(await visibleNamespaces(key)).toEqual(expect.arrayContaining(['customer_a', 'customer_b', 'internal']));
    for (const n of Object.values(ns)) expect((await t.request('GET', `/v1/namespaces/${n.name}`, { key })).status).toBe(200);
    const me = await t.client(key, 'internal').GET('/v1/me', {});
    expect(me.response.status).toBe(200);
  });
});

describe('a key scoped by a prefix pattern', () => {
  let key: string;
  beforeAll(async () => {
    key = await createKey('scoped-prefix', [{ resource_type: 'namespace', resource_id: 'customer_*' }]);
  });

  it('reaches every namespace whose name has the prefix, and no other', async () => {
    expect((await t.request('GET', '/v1/namespaces/customer_a', { key })).status).toBe(200);
    expect((await t.request('GET', `/v1/namespaces/${ns.b.id}`, { key })).status).toBe(200);
    expectForbidden(await t.request('GET', '/v1/namespaces/internal', { key }));
    expectForbidden(await t.request('GET', `/v1/namespaces/${ns.internal.id}`, { key }));
    expectForbidden(await t.request('GET', '/v1/me', { key, headers: { 'X-Namespace': 'internal' } }));
  });

  it('lists only the matching namespaces', async () => {
    const visible = await visibleNamespaces(key);
    expect(visible).toContain('customer_a');
    expect(visible).toContain('customer_b');
    expect(visible).not.toContain('internal');
    expect(visible.every((name) => name.startsWith('customer_'))).toBe(true);
  });

  it('may create a namespace that matches the pattern, not one that does not', async () => {
    expect((await t.request('POST', '/v1/namespaces', { key, body: { namespace_name: 'customer_new' } })).status).toBe(201);
    expectForbidden(await t.request('POST', '/v1/namespaces', { key, body: { namespace_name: 'vendor_new' } }));
    expect((await t.request('GET', '/v1/namespaces/vendor_new', { key: t.adminKey })).status).toBe(404);
    expect(await visibleNamespaces(key)).toContain('customer_new');
  });

  it('gets 404, not 403, for a missing namespace inside its pattern', async () => {
    const res = await t.request('GET', '/v1/namespaces/customer_missing', { key });
    expect(res.status).toBe(404);
    expect((await t.request('GET', '/v1/buckets', { key, headers: { 'X-Namespace': 'customer_missing' } })).status).toBe(404);
    expectForbidden(await t.request('GET', '/v1/buckets', { key, headers: { 'X-Namespace': 'vendor_missing' } }));
  });

  it('matches namespace ids by prefix too', async () => {
    const idKey = await createKey('scoped-id-prefix', [{ resource_type: 'namespace', resource_id: 'ns_*' }]);
    expect(await visibleNamespaces(idKey)).toEqual(expect.arrayContaining(['customer_a', 'customer_b', 'internal']));
  });
});

describe('operations lists', () => {
  let key: string;
  beforeAll(async () => {
    key = await createKey('read-data-only', [{ resource_type: 'namespace', resource_id: 'customer_*', operations: ['read_data'] }]);
  });

  it('allow the listed operation', async () => {
    expect((await t.request('GET', '/v1/namespaces/customer_a', { key })).status).toBe(200);
    expect(await visibleNamespaces(key)).toContain('customer_a');
  });

  it('refuse operations not listed, even though the permissions would allow them', async () => {
    expectForbidden(await t.request('POST', '/v1/namespaces', { key, body: { namespace_name: 'customer_ro' } }));
    expectForbidden(await t.request('PATCH', '/v1/namespaces/customer_a', { key, body: { description: 'changed' } }));
    expectForbidden(await t.request('DELETE', '/v1/namespaces/customer_a', { key }));
    expect((await t.request('GET', '/v1/namespaces/customer_ro', { key: t.adminKey })).status).toBe(404);
    expect((await t.request('GET', '/v1/namespaces/customer_a', { key: t.adminKey })).body.description).toBeNull();
  });

  it('are what GET /v1/me reports as allowed in the namespace', async () => {
    const { data, response } = await t.client(key, 'customer_a').GET('/v1/me', {});
    expect(response.status).toBe(200);
    expect(organizationMe(data).namespace!.allowed_operations).toEqual(['read_data']);
  });

  it('never grant more than the permissions do', async () => {
    const narrow = await createKey(
      'read-perm-wide-ops',
      [{ resource_type: 'namespace', resource_id: 'customer_a', operations: ['read_data', 'write_data', 'modify_infrastructure'] }],
      ['read'],
    );
    const { data } = await t.client(narrow, 'customer_a').GET('/v1/me', {});
    expect(organizationMe(data).namespace!.allowed_operations).toEqual(['read_data']);
    expectForbidden(await t.request('PATCH', '/v1/namespaces/customer_a', { key: narrow, body: { description: 'x' } }));
  });

  it('of several scopes combine: each scope grants its own operations on its own namespaces', async () => {
    const mixed = await createKey('mixed-scopes', [
      { resource_type: 'namespace', resource_id: 'customer_a', operations: ['read_data'] },
      { resource_type: 'namespace', resource_id: 'customer_b' },
    ]);
    expectForbidden(await t.request('PATCH', '/v1/namespaces/customer_a', { key: mixed, body: { description: 'x' } }));
    const patched = await t.request('PATCH', '/v1/namespaces/customer_b', { key: mixed, body: { description: 'by mixed' } });
    expect(patched.status).toBe(200);
    expect(await visibleNamespaces(mixed)).toEqual(['customer_a', 'customer_b']);
  });
});

describe('organization scopes', () => {
  it('cover every namespace of the organization', async () => {
    const { data: me } = await t.client().GET('/v1/me', {});
    const key = await createKey('org-scope', [{ resource_type: 'organization', resource_id: organizationMe(me).organization.organization_id }]);
    expect(await visibleNamespaces(key)).toEqual(expect.arrayContaining(['customer_a', 'customer_b', 'internal']));
    expect((await t.request('GET', '/v1/namespaces/internal', { key })).status).toBe(200);
  });

  it('for another organization cover nothing', async () => {
    const key = await createKey('other-org-scope', [{ resource_type: 'organization', resource_id: 'org_someone_else' }]);
    expectForbidden(await t.request('GET', '/v1/namespaces', { key }));
    expectForbidden(await t.request('GET', '/v1/namespaces/customer_a', { key }));
    expectForbidden(await t.request('GET', '/v1/me', { key, headers: { 'X-Namespace': 'customer_a' } }));
  });
});

describe('PATCH scopes', () => {
  it('an empty list widens the key to organization-wide at once', async () => {
    const key = await createKey('widen-me', [{ resource_type: 'namespace', resource_id: 'customer_a' }]);
    expectForbidden(await t.request('GET', '/v1/namespaces/internal', { key }));
    const { data, response } = await t.client().PATCH('/v1/organizations/users/{user_email}/api-keys/{key_name}', {
      params: { path: { user_email: t.adminEmail, key_name: 'widen-me' } },
      body: { scopes: [] },
    });
    expect(response.status).toBe(200);
    expect(data!.scopes).toEqual([]);
    expect((await t.request('GET', '/v1/namespaces/internal', { key })).status).toBe(200);
    expect(await visibleNamespaces(key)).toEqual(expect.arrayContaining(['customer_a', 'customer_b', 'internal']));
    const me = await t.client(key).GET('/v1/me', {});
    expect(organizationMe(me.data).capabilities.organization_wide).toBe(true);
  });

  it('a narrower list applies to the very next request', async () => {
    const key = await createKey('narrow-me', []);
    expect((await t.request('GET', '/v1/namespaces/customer_b', { key })).status).toBe(200);
    const res = await t.request('PATCH', `${keysPath()}/narrow-me`, {
      key: t.adminKey,
      body: { scopes: [{ resource_type: 'namespace', resource_id: 'customer_a' }] },
    });
    expect(res.status).toBe(200);
    expectForbidden(await t.request('GET', '/v1/namespaces/customer_b', { key }));
    expect(await visibleNamespaces(key)).toEqual(['customer_a']);
  });
});

describe('scopes on admin keys', () => {
  it('an admin key with only namespace scopes cannot manage keys or users', async () => {
    const key = await createKey('ns-admin', [{ resource_type: 'namespace', resource_id: '*' }], ['admin']);
    expectForbidden(await t.request('GET', keysPath(), { key }));
    expectForbidden(await t.request('POST', keysPath(), { key, body: { name: 'from-ns-admin' } }));
    expectForbidden(await t.request('POST', `${keysPath()}/scoped-id/rotate`, { key }));
    expectForbidden(await t.request('DELETE', `${keysPath()}/scoped-id?force=true`, { key }));
    expectForbidden(await t.request('PATCH', `${keysPath()}/scoped-id`, { key, body: { scopes: [] } }));
    expectForbidden(await t.request('GET', '/v1/organizations/users', { key }));
    // Its namespace work is unaffected.
    expect((await t.request('GET', '/v1/namespaces/internal', { key })).status).toBe(200);
    const list = await t.client().GET('/v1/organizations/users/{user_email}/api-keys', {
      params: { path: { user_email: t.adminEmail } },
    });
    expect(list.data!.results.map((k) => k.name)).not.toContain('from-ns-admin');
  });

  it('an admin key with an api_key scope may manage keys', async () => {
    const key = await createKey('key-admin', [{ resource_type: 'api_key', resource_id: '*' }], ['admin']);
    expect((await t.request('GET', keysPath(), { key })).status).toBe(200);
    expect((await t.request('POST', keysPath(), { key, body: { name: 'from-key-admin' } })).status).toBe(201);
    // ...but not namespaces, which its scopes do not name.
    expectForbidden(await t.request('GET', '/v1/namespaces/internal', { key }));
  });

  it('an organization-scoped admin key may manage keys', async () => {
    const key = await createKey('org-admin', [{ resource_type: 'organization', resource_id: '*' }], ['admin']);
    expect((await t.request('GET', keysPath(), { key })).status).toBe(200);
  });
});
