/**
 * Organization isolation: two organizations in one kernel. Org B's admin key must never see or touch
 * org A's users, keys, namespaces, usage or audit entries; every foreign identifier answers 404.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TenantStore, resolve } from '../../kernel/tokens.js';
import { startTestKernel, type TestKernel, organizationMe } from '../support/kernel.js';

describe('organization isolation', () => {
  let t: TestKernel;
  let keyA: string;
  let keyB: string;
  const memberA = 'member-a@example.test';
  let memberKeyA: { key_id: string; name: string; key: string };
  let nsA: { namespace_id: string; namespace_name: string };
  let orgAId: string;
  let orgBId: string;

  beforeAll(async () => {
    t = await startTestKernel();
    keyA = t.adminKey;
    const orgB = await resolve(t.kernel.container, TenantStore).createOrganization({ name: 'org-b', ownerEmail: 'owner-b@example.test' });
    keyB = orgB.adminKeyPlaintext;
    orgBId = orgB.organization.organization_id;

    const a = t.client(keyA);
    const me = await a.GET('/v1/me', {});
    orgAId = organizationMe(me.data).organization.organization_id;
    expect((await a.POST('/v1/organizations/users', { body: { email: memberA } })).response.status).toBe(201);
    const created = await a.POST('/v1/organizations/users/{user_email}/api-keys', {
      params: { path: { user_email: memberA } },
      body: { name: 'a-key' },
    });
    expect(created.response.status).toBe(201);
    memberKeyA = { key_id: created.data!.key_id, name: created.data!.name, key: created.data!.key };
    const ns = await a.POST('/v1/namespaces', { body: { namespace_name: 'alpha-space', description: 'A only' } });
    expect(ns.response.status).toBe(201);
    nsA = { namespace_id: ns.data!.namespace_id, namespace_name: ns.data!.namespace_name };
    // Some traffic with A's member key, so there is usage to hide.
    expect((await t.client(memberKeyA.key).GET('/v1/me', {})).response.status).toBe(200);
  });

  afterAll(async () => {
    await t?.stop();
  });

  it('the two admin keys belong to different organizations', async () => {
    const me = await t.client(keyB).GET('/v1/me', {});
    expect(me.response.status).toBe(200);
    expect(organizationMe(me.data).organization.organization_id).toBe(orgBId);
    expect(orgBId).not.toBe(orgAId);
  });

  it("org B cannot list, get or delete org A's users", async () => {
    const b = t.client(keyB);
    const list = await b.GET('/v1/organizations/users', {});
    expect(list.response.status).toBe(200);
    const emails = list.data!.results.map((u) => u.email);
    expect(emails).toEqual(['owner-b@example.test']);
    expect(list.data!.total).toBe(1);

    for (const email of [memberA, t.adminEmail]) {
      const get = await b.GET('/v1/organizations/users/{user_email}', { params: { path: { user_email: email } } });
      expect(get.response.status).toBe(404);
      expect(get.error).toMatchObject({ success: false, status: 404, error: { type: 'NotFoundError' } });
      const del = await b.DELETE('/v1/organizations/users/{user_email}', { params: { path: { user_email: email } } });
      expect(del.response.status).toBe(404);
    }
    // Still there for A.
    const still = await t.client(keyA).GET('/v1/organizations/users/{user_email}', { params: { path: { user_email: memberA } } });
    expect(still.response.status).toBe(200);
  });

  it("org B cannot list, get, patch, rotate, revoke or create keys on org A's users", async () => {
    const b = t.client(keyB);
    const path = { user_email: memberA, key_name: memberKeyA.name };
    expect((await b.GET('/v1/organizations/users/{user_email}/api-keys', { params: { path: { user_email: memberA } } })).response.status).toBe(404);
    expect((await b.GET('/v1/organizations/users/{user_email}/api-keys/{key_name}', { params: { path } })).response.status).toBe(404);
    expect(
      (await b.PATCH('/v1/organizations/users/{user_email}/api-keys/{key_name}', { params: { path }, body: { description: 'pwned' } }))
        .response.status,
    ).toBe(404);
    expect((await b.POST('/v1/organizations/users/{user_email}/api-keys/{key_name}/rotate', { params: { path } })).response.status).toBe(404);
    expect(
      (await b.DELETE('/v1/organizations/users/{user_email}/api-keys/{key_name}', { params: { path, query: { force: true } } })).response
        .status,
    ).toBe(404);
    expect(
      (await b.POST('/v1/organizations/users/{user_email}/api-keys', { params: { path: { user_email: memberA } }, body: { name: 'intruder' } }))
        .response.status,
    ).toBe(404);
    // A's admin-key too.
    const adminPath = { user_email: t.adminEmail, key_name: 'admin-key' };
    expect((await b.GET('/v1/organizations/users/{user_email}/api-keys/{key_name}', { params: { path: adminPath } })).response.status).toBe(404);

    // Nothing changed: A's key is untouched and still works.
    const key = await t.client(keyA).GET('/v1/organizations/users/{user_email}/api-keys/{key_name}', { params: { path } });
    expect(key.response.status).toBe(200);
    expect(key.data!.description).toBeNull();
    expect(key.data!.status).toBe('active');
    expect((await t.client(memberKeyA.key).GET('/v1/me', {})).response.status).toBe(200);
  });

  it("org B sees only its own namespaces and cannot get, patch or delete A's by name or id", async () => {
    const b = t.client(keyB);
    const own = await b.POST('/v1/namespaces', { body: { namespace_name: 'beta-space' } });
    expect(own.response.status).toBe(201);
    const list = await b.GET('/v1/namespaces', {});
    expect(list.data!.results.map((n) => n.namespace_name)).toEqual(['beta-space']);
    expect(list.data!.total).toBe(1);
    const searched = await b.GET('/v1/namespaces', { params: { query: { search: 'alpha' } } });
    expect(searched.data!.results).toEqual([]);

    for (const name of [nsA.namespace_name, nsA.namespace_id]) {
      expect((await b.GET('/v1/namespaces/{name}', { params: { path: { name } } })).response.status).toBe(404);
      expect((await b.PATCH('/v1/namespaces/{name}', { params: { path: { name } }, body: { description: 'x' } })).response.status).toBe(404);
      expect((await b.DELETE('/v1/namespaces/{name}', { params: { path: { name } } })).response.status).toBe(404);
    }
    const aList = await t.client(keyA).GET('/v1/namespaces', {});
    expect(aList.data!.results.map((n) => n.namespace_name)).toEqual(['alpha-space']);
    const aGet = await t.client(keyA).GET('/v1/namespaces/{name}', { params: { path: { name: nsA.namespace_id } } });
    expect(aGet.data!.description).toBe('A only');
  });

  it('the same namespace name may exist in both organizations', async () => {
    const b = t.client(keyB);
    const dup = await b.POST('/v1/namespaces', { body: { namespace_name: nsA.namespace_name } });
    expect(dup.response.status).toBe(201);
    expect(dup.data!.namespace_id).not.toBe(nsA.namespace_id);
    // Each org resolves the name to its own namespace.
    const fromB = await b.GET('/v1/namespaces/{name}', { params: { path: { name: nsA.namespace_name } } });
    expect(fromB.data!.namespace_id).toBe(dup.data!.namespace_id);
    const fromA = await t.client(keyA).GET('/v1/namespaces/{name}', { params: { path: { name: nsA.namespace_name } } });
    expect(fromA.data!.namespace_id).toBe(nsA.namespace_id);
    // X-Namespace by name resolves within the caller's organization.
    const meB = await t.client(keyB, nsA.namespace_name).GET('/v1/me', {});
    expect(organizationMe(meB.data).namespace!.namespace_id).toBe(dup.data!.namespace_id);
  });

  it("X-Namespace naming another organization's namespace is a 404", async () => {
    const res = await t.request('GET', '/v1/me', { key: keyB, headers: { 'X-Namespace': nsA.namespace_id } });
    expect(res.status).toBe(404);
    expect(res.body).toMatchObject({ success: false, status: 404, error: { type: 'NotFoundError' } });
    const own = await t.request('GET', '/v1/me', { key: keyA, headers: { 'X-Namespace': nsA.namespace_id } });
    expect(own.status).toBe(200);
    expect(own.body.namespace.namespace_id).toBe(nsA.namespace_id);
  });

  it("org B cannot read the usage of org A's keys", async () => {
    const b = t.client(keyB);
    const path = { key_id: memberKeyA.key_id };
    expect((await b.GET('/v1/organizations/api-keys/{key_id}/usage', { params: { path } })).response.status).toBe(404);
    expect((await b.GET('/v1/organizations/api-keys/{key_id}/usage/endpoints', { params: { path } })).response.status).toBe(404);
    expect((await b.GET('/v1/organizations/usage/api-keys/{key_id}', { params: { path } })).response.status).toBe(404);

    const orgUsage = await b.GET('/v1/organizations/usage', {});
    expect(orgUsage.response.status).toBe(200);
    expect(orgUsage.data!.organization_id).toBe(orgBId);
    const keyIds = orgUsage.data!.by_key.map((k) => k.key_id);
    expect(keyIds).not.toContain(memberKeyA.key_id);
    const meA = await t.client(keyA).GET('/v1/me', {});
    expect(keyIds).not.toContain(organizationMe(meA.data).key.key_id);

    // A can read it.
    const own = await t.client(keyA).GET('/v1/organizations/api-keys/{key_id}/usage', { params: { path } });
    expect(own.response.status).toBe(200);
    expect(own.data!.total_requests).toBeGreaterThan(0);
  });

  it('each organization sees only its own audit entries', async () => {
    const a = await t.client(keyA).GET('/v1/organizations/audit-log', {});
    const b = await t.client(keyB).GET('/v1/organizations/audit-log', {});
    expect(a.response.status).toBe(200);
    expect(b.response.status).toBe(200);
    const aIds = new Set(a.data!.results.map((e) => e.event_id));
    const bEvents = b.data!.results;
    expect(bEvents.length).toBeGreaterThan(0);
    for (const event of bEvents) expect(aIds.has(event.event_id)).toBe(false);
    // B's log has its namespaces and nothing about A's user or key.
    expect(bEvents.map((e) => e.resource_id)).not.toContain(memberKeyA.key_id);
    expect(bEvents.map((e) => e.resource_id)).not.toContain(nsA.namespace_id);
    expect(bEvents.every((e) => e.action === 'namespace_created')).toBe(true);
    // A's log has its own user, key and namespace.
    const aActions = a.data!.results.map((e) => e.action);
    expect(aActions).toEqual(expect.arrayContaining(['user_created', 'api_key_created', 'namespace_created']));
    const byResource = await t.client(keyB).GET('/v1/organizations/audit-log', { params: { query: { resource_id: memberKeyA.key_id } } });
    expect(byResource.data!.results).toEqual([]);
  });

  it("a key of org A reaches nothing of org B's either", async () => {
    const me = await t.client(keyB).GET('/v1/me', {});
    const bOwner = organizationMe(me.data).user.email;
    const a = t.client(keyA);
    expect((await a.GET('/v1/organizations/users/{user_email}', { params: { path: { user_email: bOwner } } })).response.status).toBe(404);
    expect((await a.GET('/v1/namespaces/{name}', { params: { path: { name: 'beta-space' } } })).response.status).toBe(404);
    expect(
      (await a.GET('/v1/organizations/api-keys/{key_id}/usage', { params: { path: { key_id: organizationMe(me.data).key.key_id } } })).response.status,
    ).toBe(404);
  });
});
