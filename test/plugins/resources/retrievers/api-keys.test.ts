/**
 * Retriever keys (`ret_sk_`) over real HTTP: only the retriever's owner makes, lists and revokes them; their
 * permission and scope are fixed; the secret is shown once and never listed; and every authenticated route
 * refuses them with a 403 that says what they are for (walked over the whole operation table).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { operations } from '../../../../kernel/http/operations.js';
import { startTestKernel, type TestKernel } from '../../../support/kernel.js';

const NS = 'shop';

describe('retriever keys: owner-only management, fixed grants, refused everywhere else', () => {
  let t: TestKernel;
  let retrieverId: string;
  /** A write key of the admin user, who created the retriever (its owner). */
  let ownerKey: string;
  /** A write key of another user of the same organization. */
  let otherKey: string;
  /** An admin key of that other user. */
  let otherAdminKey: string;

  const api = (method: string, path: string, key: string, body?: unknown) =>
    t.request(method, path, { key, headers: { 'X-Namespace': NS }, ...(body !== undefined ? { body } : {}) });
  const keysPath = () => `/v1/retrievers/${retrieverId}/api-keys`;
  const userKey = async (email: string, name: string, permissions: string[]) => {
    const res = await t.request('POST', `/v1/organizations/users/${encodeURIComponent(email)}/api-keys`, { key: t.adminKey, body: { name, permissions } });
    expect(res.status, res.text).toBe(201);
    return res.body.key as string;
  };

  beforeAll(async () => {
    t = await startTestKernel({ config: { runTasks: false } });
    await t.request('POST', '/v1/namespaces', { key: t.adminKey, body: { namespace_name: NS } });
    await api('POST', '/v1/buckets', t.adminKey, { bucket_name: 'src' });
    await api('POST', '/v1/collections/create', t.adminKey, { collection_name: 'products', source: { type: 'bucket', bucket_id: 'src' } });
    ownerKey = await userKey(t.adminEmail, 'owner-write', ['write']);
    const created = await api('POST', '/v1/retrievers', ownerKey, {
      retriever_name: 'lamps',
      collection_identifiers: ['products'],
      input_schema: { q: { type: 'string' } },
      stages: [{ stage_name: 'sort', config: { stage_id: 'sort_attribute', parameters: { field: 'price', direction: 'asc' } } }],
    });
    expect(created.status, created.text).toBe(201);
    retrieverId = created.body.retriever.retriever_id;
    expect((await t.request('POST', '/v1/organizations/users', { key: t.adminKey, body: { email: 'bob@example.com' } })).status).toBe(201);
    otherKey = await userKey('bob@example.com', 'bob-write', ['write']);
    otherAdminKey = await userKey('bob@example.com', 'bob-admin', ['admin']);
  }, 120_000);
  afterAll(async () => {
    await t?.stop();
  });

  it('creates a ret_sk_ key with fixed permission and scope, the secret shown once', async () => {
    const res = await api('POST', keysPath(), ownerKey, { name: 'website', allowed_origins: ['https://shop.example.com'], expires_at: '2999-01-01T00:00:00Z' });
    expect(res.status, res.text).toBe(201);
    expect(res.body).toMatchObject({
      key: expect.stringMatching(/^ret_sk_[A-Za-z0-9]{53}$/),
      key_id: expect.stringMatching(/^key_/),
      key_type: 'retriever',
      name: 'website',
      retriever_id: retrieverId,
      permissions: ['read'],
      scopes: [{ resource_type: 'retriever', resource_id: retrieverId, operations: ['execute_retriever'] }],
      allowed_origins: ['https://shop.example.com'],
      expires_at: '2999-01-01T00:00:00.000Z',
      status: 'active',
      created_by: t.adminEmail,
    });
    expect(res.body.key_prefix).toBe(`${res.body.key.slice(0, 10)}...`);
    // The retriever may be named by its name too.
    const byName = await api('POST', '/v1/retrievers/lamps/api-keys', ownerKey, { name: 'by-name' });
    expect(byName.status, byName.text).toBe(201);
    expect(byName.body).toMatchObject({ retriever_id: retrieverId, allowed_origins: [], expires_at: null });
  });

  it('keeps names unique per retriever, apart from the user\'s own key names; refuses a past expiry and bad origins', async () => {
    expect((await api('POST', keysPath(), ownerKey, { name: 'dup' })).status).toBe(201);
    const again = await api('POST', keysPath(), ownerKey, { name: 'dup' });
    expect(again.status).toBe(409);
    expect(again.body.error.message).toContain("'dup'");
    // A user key of the same name is another namespace of names.
    expect((await t.request('POST', `/v1/organizations/users/${t.adminEmail}/api-keys`, { key: t.adminKey, body: { name: 'dup' } })).status).toBe(201);
    expect((await api('POST', keysPath(), ownerKey, { name: 'late', expires_at: '2001-01-01T00:00:00Z' })).status).toBe(400);
    const badOrigin = await api('POST', keysPath(), ownerKey, { name: 'o', allowed_origins: ['javascript:alert(1)'] });
    expect(badOrigin.status).toBe(422);
    // Fixed grants: permissions and scopes are not accepted.
    expect((await api('POST', keysPath(), ownerKey, { name: 'p', permissions: ['admin'] })).status).toBe(422);
    expect((await api('POST', keysPath(), ownerKey, { name: 's', scopes: [] })).status).toBe(422);
  });

  it('lets only the owner create, list and revoke: another user, even an admin, gets a 403', async () => {
    for (const key of [otherKey, otherAdminKey]) {
      const create = await api('POST', keysPath(), key, { name: 'not-mine' });
      expect(create.status, create.text).toBe(403);
      expect(create.body.error.message).toMatch(/owner/);
      expect((await api('GET', keysPath(), key)).status).toBe(403);
      expect((await api('DELETE', `${keysPath()}/key_whatever`, key)).status).toBe(403);
    }
    // A read key of the owner lacks the write permission.
    const ownerRead = await userKey(t.adminEmail, 'owner-read', ['read']);
    expect((await api('POST', keysPath(), ownerRead, { name: 'r' })).status).toBe(403);
    // An unknown retriever is a 404.
    expect((await api('POST', '/v1/retrievers/nope/api-keys', ownerKey, { name: 'x' })).status).toBe(404);
  });

  it('an admin may act for an owner who left the organization', async () => {
    expect((await t.request('POST', '/v1/organizations/users', { key: t.adminKey, body: { email: 'carol@example.com' } })).status).toBe(201);
    const carolKey = await userKey('carol@example.com', 'carol', ['write']);
    const hers = await api('POST', '/v1/retrievers', carolKey, {
      retriever_name: 'carols', collection_identifiers: ['products'], input_schema: {},
      stages: [{ stage_name: 'sort', config: { stage_id: 'sort_attribute', parameters: { field: 'price' } } }],
    });
    expect(hers.status, hers.text).toBe(201);
    const made = await api('POST', '/v1/retrievers/carols/api-keys', carolKey, { name: 'carol-site' });
    expect(made.status).toBe(201);
    expect((await api('GET', '/v1/retrievers/carols/api-keys', otherAdminKey)).status).toBe(403);
    expect((await t.request('DELETE', '/v1/organizations/users/carol@example.com', { key: t.adminKey })).status).toBe(200);
    const listed = await api('GET', '/v1/retrievers/carols/api-keys?include_revoked=true', otherAdminKey);
    expect(listed.status, listed.text).toBe(200);
    // Removing the user revoked her keys, this one included.
    expect(listed.body.results).toEqual([expect.objectContaining({ key_id: made.body.key_id, status: 'revoked' })]);
    // A write (not admin) key of someone else still may not.
    expect((await api('GET', '/v1/retrievers/carols/api-keys', otherKey)).status).toBe(403);
  });

  it('lists without secrets, revokes at once, and keeps revoked keys out of the list unless asked', async () => {
    const made = await api('POST', keysPath(), ownerKey, { name: 'to-revoke' });
    const listed = await api('GET', keysPath(), ownerKey);
    expect(listed.status).toBe(200);
    expect(listed.body.total).toBe(listed.body.results.length);
    expect(listed.body.results.map((k: { name: string }) => k.name)).toContain('to-revoke');
    expect(listed.text).not.toContain(made.body.key);
    expect(listed.text).not.toMatch(/ret_sk_[A-Za-z0-9]{20}/);
    for (const k of listed.body.results) expect(k).not.toHaveProperty('key');
    // Nor in the user's own key list: retriever keys are managed at the retriever.
    const userList = await t.request('GET', `/v1/organizations/users/${t.adminEmail}/api-keys?include_revoked=true`, { key: t.adminKey });
    expect(userList.body.results.map((k: { key_type: string }) => k.key_type)).not.toContain('retriever');
    expect(userList.text).not.toContain(made.body.key);

    const revoked = await api('DELETE', `${keysPath()}/${made.body.key_id}`, ownerKey);
    expect(revoked.status, revoked.text).toBe(200);
    expect(revoked.body).toMatchObject({ key_id: made.body.key_id, status: 'revoked', revoked_by: t.adminEmail });
    expect(revoked.text).not.toContain(made.body.key);
    expect((await api('DELETE', `${keysPath()}/${made.body.key_id}`, ownerKey)).status).toBe(404);
    const after = await api('GET', keysPath(), ownerKey);
    expect(after.body.results.map((k: { key_id: string }) => k.key_id)).not.toContain(made.body.key_id);
    const all = await api('GET', `${keysPath()}?include_revoked=true`, ownerKey);
    expect(all.body.results.find((k: { key_id: string }) => k.key_id === made.body.key_id)).toMatchObject({ status: 'revoked' });
    // A user key is not one of the retriever's keys.
    const own = await t.request('GET', `/v1/organizations/users/${t.adminEmail}/api-keys`, { key: t.adminKey });
    const userKeyId = own.body.results[0].key_id as string;
    expect((await api('DELETE', `${keysPath()}/${userKeyId}`, ownerKey)).status).toBe(404);
    // The audit log has both.
    const audit = await t.request('GET', `/v1/organizations/audit-log?resource_id=${made.body.key_id}`, { key: t.adminKey });
    expect(audit.status, audit.text).toBe(200);
    expect(audit.text).toMatch(/api_key_revoked/);
    expect(audit.text).toMatch(/api_key_created/);
    expect(audit.text).not.toContain(made.body.key);
  });

  it('is refused with a 403 naming what it can do on every authenticated route but GET /v1/me', async () => {
    const key = (await api('POST', keysPath(), ownerKey, { name: 'walker' })).body.key as string;
    let walked = 0;
    for (const op of operations.values()) {
      if (op.public || op.boundKeys) continue;
      const path = op.path.replace(/\{[^}]+\}/g, (p) => (p === '{retriever_id}' ? retrieverId : 'x'));
      const res = await t.request(op.method.toUpperCase(), path, { key, headers: { 'X-Namespace': NS } });
      expect(res.status, `${op.method} ${op.path}: ${res.text}`).toBe(403);
      expect(res.body.error.type).toBe('NotAllowedError');
      expect(res.body.error.message).toContain('can only execute the one published retriever');
      expect(res.body.error.message).toContain('X-Public-API-Key');
      walked += 1;
    }
    expect(walked).toBeGreaterThan(50);
    // Including the private execute of its own retriever.
    const exec = await api('POST', `/v1/retrievers/${retrieverId}/execute`, key, { inputs: {} });
    expect(exec.status).toBe(403);
    // GET /v1/me works for every valid key: its short form, nothing of the organization.
    expect([...operations.values()].filter((op) => op.boundKeys).map((op) => op.operationId)).toEqual(['getMe']);
    const me = await t.request('GET', '/v1/me', { key });
    expect(me.status, me.text).toBe(200);
    expect(Object.keys(me.body).sort()).toEqual(['bound_retriever', 'key']);
  });
});
