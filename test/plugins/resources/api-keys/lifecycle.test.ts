/**
 * The API key lifecycle over real HTTP: create, list, get, update, rotate, revoke, expiry, the protected
 * admin-key, validation and the audit trail. Time is a ManualClock so expiry and the 24-hour revoke
 * guard are exercised without sleeping.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { components } from '../../../../generated/openapi.js';
import { ManualClock } from '../../../../kernel/clock.js';
import { startTestKernel, type RawResponse, type TestKernel, organizationMe } from '../../../support/kernel.js';

type ApiKeyCreateRequest = components['schemas']['ApiKeyCreateRequest'];
type ApiKeyWithSecret = components['schemas']['ApiKeyWithSecret'];
type ApiKey = components['schemas']['ApiKey'];
type AuditEvent = components['schemas']['AuditEvent'];

const HOUR = 3600 * 1000;
let t: TestKernel;
const clock = new ManualClock(new Date('2026-03-01T12:00:00.000Z'));
let adminKeyId: string;

function keysPath(email = t.adminEmail): string {
  return `/v1/organizations/users/${encodeURIComponent(email)}/api-keys`;
}

function keyPath(name: string, email = t.adminEmail): string {
  return `${keysPath(email)}/${encodeURIComponent(name)}`;
}

async function create(body: ApiKeyCreateRequest, email = t.adminEmail): Promise<ApiKeyWithSecret> {
  const { data, response, error } = await t.client().POST('/v1/organizations/users/{user_email}/api-keys', {
    params: { path: { user_email: email } },
    body,
  });
  expect(response.status, JSON.stringify(error)).toBe(201);
  return data!;
}

async function list(includeRevoked?: boolean, email = t.adminEmail): Promise<ApiKey[]> {
  const { data, response } = await t.client().GET('/v1/organizations/users/{user_email}/api-keys', {
    params: { path: { user_email: email }, ...(includeRevoked === undefined ? {} : { query: { include_revoked: includeRevoked } }) },
  });
  expect(response.status).toBe(200);
  expect(data!.total).toBe(data!.results.length);
  return data!.results;
}

async function get(name: string): Promise<RawResponse> {
  return t.request('GET', keyPath(name), { key: t.adminKey });
}

async function me(key: string): Promise<RawResponse> {
  return t.request('GET', '/v1/me', { key });
}

async function auditEvents(resourceId: string): Promise<AuditEvent[]> {
  const { data, response } = await t.client().GET('/v1/organizations/audit-log', {
    params: { query: { resource_id: resourceId } },
  });
  expect(response.status).toBe(200);
  return data!.results;
}

function expectError(res: RawResponse, status: number, type: string): void {
  expect(res.status, res.text).toBe(status);
  expect(res.body).toMatchObject({ success: false, status, error: { type } });
  expect(typeof res.body.error.message).toBe('string');
}

function expectValidationError(res: RawResponse): Array<{ loc: Array<string | number>; msg: string; type: string }> {
  expect(res.status, res.text).toBe(422);
  expect(Array.isArray(res.body.detail)).toBe(true);
  expect(res.body.detail.length).toBeGreaterThan(0);
  for (const item of res.body.detail) {
    expect(Array.isArray(item.loc)).toBe(true);
    expect(typeof item.msg).toBe('string');
    expect(typeof item.type).toBe('string');
  }
  return res.body.detail;
}

beforeAll(async () => {
  // Flush request logs and last_used_at every millisecond, so a background flush is nearly always running
  // while tests read last_used_at (see the revoke guard test under concurrent flushes).
  t = await startTestKernel({ clock, config: { requestLogFlushMs: 1 } });
  const { data } = await t.client().GET('/v1/me', {});
  adminKeyId = organizationMe(data).key.key_id;
});

afterAll(async () => {
  await t?.stop();
});

describe('create', () => {
  it('returns a ~60-character svc_sk_ secret once, with its prefix and the defaults', async () => {
    const created = await create({ name: 'defaults' });
    expect(created.key).toMatch(/^svc_sk_[A-Za-z0-9]+$/);
    expect(created.key.length).toBeGreaterThanOrEqual(55);
    expect(created.key.length).toBeLessThanOrEqual(65);
    expect(created.key_prefix).toBe(`${created.key.slice(0, 10)}...`);
    expect(created).toMatchObject({
      name: 'defaults',
      permissions: ['read', 'write', 'delete'],
      scopes: [],
      allowed_origins: [],
      status: 'active',
      key_type: 'standard',
      is_protected: false,
      user_email: t.adminEmail,
      created_by: t.adminEmail,
      description: null,
      expires_at: null,
      principal_id: null,
      rate_limit_override: null,
      revoked_at: null,
      revoked_by: null,
    });
    expect(new Date(created.created_at).toISOString()).toBe(clock.now().toISOString());
    expect(created.key_id).toMatch(/\S/);
  });

  it('issues a usr_sk_ key when principal_id is set', async () => {
    const created = await create({ name: 'end-user', principal_id: 'customer-42' });
    expect(created.key).toMatch(/^usr_sk_[A-Za-z0-9]+$/);
    expect(created.key.length).toBeGreaterThanOrEqual(55);
    expect(created.key.length).toBeLessThanOrEqual(65);
    expect(created.key_prefix).toBe(`${created.key.slice(0, 10)}...`);
    expect(created.key_type).toBe('user');
    expect(created.principal_id).toBe('customer-42');
    const res = await me(created.key);
    expect(res.status).toBe(200);
    expect(res.body.key).toMatchObject({ key_type: 'user', principal_id: 'customer-42' });
  });

  it('gives every key its own secret and id', async () => {
    const a = await create({ name: 'unique-a' });
    const b = await create({ name: 'unique-b' });
    expect(a.key).not.toBe(b.key);
    expect(a.key_id).not.toBe(b.key_id);
  });

  it('stores every given setting, and the new secret authenticates at once', async () => {
    const expires = new Date(clock.now().getTime() + 48 * HOUR).toISOString();
    const created = await create({
      name: 'full',
      description: 'all the settings',
      permissions: ['read'],
      scopes: [{ resource_type: 'namespace', resource_id: 'tenant_*', operations: ['read_data'] }],
      rate_limit_override: 500,
      expires_at: expires,
      allowed_origins: ['https://app.example.com'],
    });
    expect(created).toMatchObject({
      description: 'all the settings',
      permissions: ['read'],
      scopes: [{ resource_type: 'namespace', resource_id: 'tenant_*', operations: ['read_data'] }],
      rate_limit_override: 500,
      allowed_origins: ['https://app.example.com'],
    });
    expect(new Date(created.expires_at!).toISOString()).toBe(expires);
    const res = await me(created.key);
    expect(res.status).toBe(200);
    expect(res.body.key.key_id).toBe(created.key_id);
    expect(res.body.key.rate_limit_per_minute).toBe(500);
  });

  it('never shows the secret again', async () => {
    const created = await create({ name: 'shown-once' });
    const one = await get('shown-once');
    expect(one.status).toBe(200);
    expect(one.body.key).toBeUndefined();
    expect(one.text).not.toContain(created.key);
    const all = await t.request('GET', keysPath(), { key: t.adminKey });
    expect(all.text).not.toContain(created.key);
    for (const k of all.body.results) expect(k.key).toBeUndefined();
  });

  it('answers 404 for a user who is not in the organization', async () => {
    const res = await t.request('POST', keysPath('nobody@example.test'), { key: t.adminKey, body: { name: 'x' } });
    expectError(res, 404, 'NotFoundError');
  });

  it('refuses expires_at in the past, writing nothing', async () => {
    const before = (await list(true)).length;
    const past = new Date(clock.now().getTime() - HOUR).toISOString();
    const res = await t.request('POST', keysPath(), { key: t.adminKey, body: { name: 'already-expired', expires_at: past } });
    expect(res.status).toBeGreaterThanOrEqual(400);
    expect((await list(true)).length).toBe(before);
    expect((await get('already-expired')).status).toBe(404);
  });

  it('refuses expires_at in the past with a 400 InputError', async () => {
    const past = new Date(clock.now().getTime() - HOUR).toISOString();
    const res = await t.request('POST', keysPath(), { key: t.adminKey, body: { name: 'already-expired-400', expires_at: past } });
    expectError(res, 400, 'InputError');
  });
});

describe('names and validation', () => {
  it('accepts names of 1 and 100 characters and refuses 0 and 101 with a 422', async () => {
    await create({ name: 'n' });
    await create({ name: 'x'.repeat(100) });
    const long = expectValidationError(await t.request('POST', keysPath(), { key: t.adminKey, body: { name: 'y'.repeat(101) } }));
    expect(long[0]!.loc).toEqual(['body', 'name']);
    expectValidationError(await t.request('POST', keysPath(), { key: t.adminKey, body: { name: '' } }));
    expectValidationError(await t.request('POST', keysPath(), { key: t.adminKey, body: {} }));
    expect((await list()).some((k) => k.name === 'y'.repeat(101))).toBe(false);
  });

  it('refuses a description over 500 characters with a 422', async () => {
    await create({ name: 'desc-500', description: 'd'.repeat(500) });
    const detail = expectValidationError(
      await t.request('POST', keysPath(), { key: t.adminKey, body: { name: 'desc-501', description: 'd'.repeat(501) } }),
    );
    expect(detail[0]!.loc).toEqual(['body', 'description']);
    expect((await get('desc-501')).status).toBe(404);
  });

  it('refuses an unknown permission with a 422 naming the field, and writes nothing', async () => {
    const before = await list(true);
    const res = await t.request('POST', keysPath(), {
      key: t.adminKey,
      body: { name: 'bad-permission', permissions: ['read', 'superuser'] },
    });
    const detail = expectValidationError(res);
    expect(detail[0]!.loc).toEqual(['body', 'permissions', 1]);
    const after = await list(true);
    expect(after.length).toBe(before.length);
    expect(after.some((k) => k.name === 'bad-permission')).toBe(false);
  });

  it('refuses unknown fields, bad scopes and bad origins with a 422', async () => {
    const bodies = [
      { name: 'extra-field', owner: 'me' },
      { name: 'bad-scope-type', scopes: [{ resource_type: 'galaxy', resource_id: '*' }] },
      { name: 'bad-scope-op', scopes: [{ resource_type: 'namespace', resource_id: '*', operations: ['fly'] }] },
      { name: 'bad-scope-pattern', scopes: [{ resource_type: 'namespace', resource_id: 'a*b*' }] },
      { name: 'bad-origin', allowed_origins: ['https://app.example.com/path'] },
      { name: 'bad-permissions', permissions: [] },
    ];
    for (const body of bodies) {
      expectValidationError(await t.request('POST', keysPath(), { key: t.adminKey, body }));
      expect((await get(body.name)).status).toBe(404);
    }
  });

  it("refuses a name already used by one of the user's active keys with a 409", async () => {
    const first = await create({ name: 'taken' });
    const res = await t.request('POST', keysPath(), { key: t.adminKey, body: { name: 'taken' } });
    expectError(res, 409, 'ConflictError');
    const keys = await list();
    expect(keys.filter((k) => k.name === 'taken').map((k) => k.key_id)).toEqual([first.key_id]);
  });

  it('allows the name again once the first key is revoked', async () => {
    const first = await create({ name: 'reusable' });
    expect((await t.request('DELETE', keyPath('reusable'), { key: t.adminKey })).status).toBe(200);
    const second = await create({ name: 'reusable' });
    expect(second.key_id).not.toBe(first.key_id);
    const one = await get('reusable');
    expect(one.body.key_id).toBe(second.key_id);
    const all = (await list(true)).filter((k) => k.name === 'reusable');
    expect(all.map((k) => k.status).sort()).toEqual(['active', 'revoked']);
  });

  it('allows the same name for different users', async () => {
    const email = 'second.user@example.test';
    const user = await t.client().POST('/v1/organizations/users', { body: { email } });
    expect(user.response.status).toBe(201);
    await create({ name: 'shared-name' });
    const theirs = await create({ name: 'shared-name' }, email);
    expect(theirs.user_email).toBe(email);
    expect((await list(false, email)).map((k) => k.name)).toEqual(['shared-name']);
  });
});

describe('list and get', () => {
  it('hides revoked keys unless include_revoked=true', async () => {
    const kept = await create({ name: 'listed-active' });
    const gone = await create({ name: 'listed-revoked' });
    expect((await t.request('DELETE', keyPath('listed-revoked'), { key: t.adminKey })).status).toBe(200);

    const active = await list();
    expect(active.map((k) => k.key_id)).toContain(kept.key_id);
    expect(active.map((k) => k.key_id)).not.toContain(gone.key_id);
    expect(active.every((k) => k.status !== 'revoked')).toBe(true);

    const explicitFalse = await list(false);
    expect(explicitFalse.map((k) => k.key_id)).toEqual(active.map((k) => k.key_id));

    const everything = await list(true);
    expect(everything.map((k) => k.key_id)).toEqual(expect.arrayContaining([kept.key_id, gone.key_id]));
    expect(everything.find((k) => k.key_id === gone.key_id)!.status).toBe('revoked');
    expect(everything.length).toBeGreaterThan(active.length);
  });

  it("includes the protected admin-key among the owner's keys", async () => {
    const admin = (await list()).find((k) => k.name === 'admin-key')!;
    expect(admin).toMatchObject({ is_protected: true, permissions: ['admin'], status: 'active', key_id: adminKeyId });
  });

  it('gets one key by name, and 404 for an unknown name', async () => {
    const created = await create({ name: 'by name' });
    const one = await get('by name');
    expect(one.status).toBe(200);
    expect(one.body).toMatchObject({ key_id: created.key_id, name: 'by name', key_prefix: created.key_prefix });
    expectError(await get('no-such-key'), 404, 'NotFoundError');
  });

  it('records last_used_at after a successful request', async () => {
    const created = await create({ name: 'used-once' });
    expect((await get('used-once')).body.last_used_at).toBeNull();
    expect((await me(created.key)).status).toBe(200);
    const used = (await get('used-once')).body;
    expect(used.last_used_at).not.toBeNull();
    expect(new Date(used.last_used_at).toISOString()).toBe(clock.now().toISOString());
  });
});

describe('update', () => {
  it('refuses an empty body with a 400', async () => {
    await create({ name: 'patch-empty' });
    expectError(await t.request('PATCH', keyPath('patch-empty'), { key: t.adminKey, body: {} }), 400, 'InputError');
  });

  it('changes permissions, scopes and description; the key sees the change on its next request', async () => {
    const created = await create({ name: 'patch-me', permissions: ['read', 'write'] });
    expect((await me(created.key)).body.capabilities.permission_level).toBe('write');
    const res = await t.request('PATCH', keyPath('patch-me'), {
      key: t.adminKey,
      body: { permissions: ['read'], description: 'now read-only' },
    });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ permissions: ['read'], description: 'now read-only', key_id: created.key_id });
    expect(res.body.updated_at).not.toBeNull();
    expect((await me(created.key)).body.capabilities.permission_level).toBe('read');
    expect((await t.request('POST', '/v1/namespaces', { key: created.key, body: { namespace_name: 'not_allowed' } })).status).toBe(403);
  });

  it('clears allowed_origins with an empty list', async () => {
    const created = await create({ name: 'patch-origins', allowed_origins: ['https://only.example.com'] });
    const elsewhere = { key: created.key, headers: { Origin: 'https://elsewhere.example.org' } };
    expect((await t.request('GET', '/v1/me', elsewhere)).status).toBe(403);
    const res = await t.request('PATCH', keyPath('patch-origins'), { key: t.adminKey, body: { allowed_origins: [] } });
    expect(res.status).toBe(200);
    expect(res.body.allowed_origins).toEqual([]);
    expect((await t.request('GET', '/v1/me', elsewhere)).status).toBe(200);
  });

  it('clears description and expires_at with null', async () => {
    await create({
      name: 'patch-nulls',
      description: 'temporary',
      expires_at: new Date(clock.now().getTime() + HOUR).toISOString(),
    });
    const res = await t.request('PATCH', keyPath('patch-nulls'), { key: t.adminKey, body: { description: null, expires_at: null } });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ description: null, expires_at: null });
  });

  it('renames a key, and refuses a name another active key holds with a 409', async () => {
    const created = await create({ name: 'old-name' });
    await create({ name: 'occupied' });
    expectError(await t.request('PATCH', keyPath('old-name'), { key: t.adminKey, body: { name: 'occupied' } }), 409, 'ConflictError');
    const res = await t.request('PATCH', keyPath('old-name'), { key: t.adminKey, body: { name: 'new-name' } });
    expect(res.status).toBe(200);
    expect((await get('old-name')).status).toBe(404);
    expect((await get('new-name')).body.key_id).toBe(created.key_id);
    expect((await me(created.key)).body.key.name).toBe('new-name');
  });

  it('refuses invalid fields with a 422 and an expires_at in the past with a 400', async () => {
    await create({ name: 'patch-invalid' });
    expectValidationError(await t.request('PATCH', keyPath('patch-invalid'), { key: t.adminKey, body: { permissions: ['root'] } }));
    expectValidationError(await t.request('PATCH', keyPath('patch-invalid'), { key: t.adminKey, body: { name: 'z'.repeat(101) } }));
    const past = new Date(clock.now().getTime() - HOUR).toISOString();
    expectError(await t.request('PATCH', keyPath('patch-invalid'), { key: t.adminKey, body: { expires_at: past } }), 400, 'InputError');
    expect((await get('patch-invalid')).body).toMatchObject({ permissions: ['read', 'write', 'delete'], expires_at: null });
  });

  it('answers 404 for an unknown or revoked key', async () => {
    expectError(await t.request('PATCH', keyPath('never-existed'), { key: t.adminKey, body: { description: 'x' } }), 404, 'NotFoundError');
    await create({ name: 'patch-revoked' });
    expect((await t.request('DELETE', keyPath('patch-revoked'), { key: t.adminKey })).status).toBe(200);
    expectError(await t.request('PATCH', keyPath('patch-revoked'), { key: t.adminKey, body: { description: 'x' } }), 404, 'NotFoundError');
  });
});

describe('rotate', () => {
  it('stops the old secret on the very next request and keeps key_id and every setting', async () => {
    const created = await create({
      name: 'rotate-me',
      description: 'rotating',
      permissions: ['read', 'write'],
      scopes: [{ resource_type: 'namespace', resource_id: 'team_*' }],
      allowed_origins: ['https://app.example.com', 'https://*.example.net'],
      rate_limit_override: 1000,
    });
    expect((await me(created.key)).status).toBe(200);

    const { data, response } = await t.client().POST('/v1/organizations/users/{user_email}/api-keys/{key_name}/rotate', {
      params: { path: { user_email: t.adminEmail, key_name: 'rotate-me' } },
    });
    expect(response.status).toBe(200);
    const rotated = data!;
    expect(rotated.key).not.toBe(created.key);
    expect(rotated.key).toMatch(/^svc_sk_[A-Za-z0-9]+$/);
    expect(rotated.key_prefix).toBe(`${rotated.key.slice(0, 10)}...`);

    const old = await me(created.key);
    expectError(old, 401, 'AuthenticationError');
    const fresh = await me(rotated.key);
    expect(fresh.status).toBe(200);
    expect(fresh.body.key.key_id).toBe(created.key_id);

    expect(rotated).toMatchObject({
      key_id: created.key_id,
      name: 'rotate-me',
      description: 'rotating',
      permissions: ['read', 'write'],
      scopes: [{ resource_type: 'namespace', resource_id: 'team_*' }],
      allowed_origins: ['https://app.example.com', 'https://*.example.net'],
      rate_limit_override: 1000,
      status: 'active',
      created_at: created.created_at,
    });
    // The old secret stays dead after the new one has been used.
    expect((await me(created.key)).status).toBe(401);
    expect((await get('rotate-me')).body.key_prefix).toBe(rotated.key_prefix);
  });

  it('keeps the usr_sk_ type of a user-scoped key', async () => {
    await create({ name: 'rotate-user', principal_id: 'p-1' });
    const res = await t.request('POST', `${keyPath('rotate-user')}/rotate`, { key: t.adminKey });
    expect(res.status).toBe(200);
    expect(res.body.key).toMatch(/^usr_sk_/);
    expect(res.body.principal_id).toBe('p-1');
  });

  it('answers 404 for an unknown or revoked key', async () => {
    expectError(await t.request('POST', `${keyPath('never-existed')}/rotate`, { key: t.adminKey }), 404, 'NotFoundError');
    const created = await create({ name: 'rotate-revoked' });
    expect((await t.request('DELETE', keyPath('rotate-revoked'), { key: t.adminKey })).status).toBe(200);
    expectError(await t.request('POST', `${keyPath('rotate-revoked')}/rotate`, { key: t.adminKey }), 404, 'NotFoundError');
    expect((await me(created.key)).status).toBe(401);
  });
});

describe('revoke', () => {
  it('is soft: the key stays listed as revoked, with revoked_at and revoked_by, and stops authenticating', async () => {
    const created = await create({ name: 'revoke-me' });
    const res = await t.request('DELETE', keyPath('revoke-me'), { key: t.adminKey });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ key_id: created.key_id, status: 'revoked', revoked_by: t.adminEmail });
    expect(new Date(res.body.revoked_at).toISOString()).toBe(clock.now().toISOString());
    expectError(await me(created.key), 401, 'AuthenticationError');
    const listed = (await list(true)).find((k) => k.key_id === created.key_id)!;
    expect(listed).toMatchObject({ status: 'revoked', revoked_by: t.adminEmail });
    expect(listed.revoked_at).not.toBeNull();
    expect((await get('revoke-me')).status).toBe(404);
    expectError(await t.request('DELETE', keyPath('revoke-me'), { key: t.adminKey }), 404, 'NotFoundError');
  });

  it('refuses to revoke a key used in the last 24 hours without force=true', async () => {
    const created = await create({ name: 'recently-used' });
    expect((await me(created.key)).status).toBe(200);
    const refused = await t.request('DELETE', keyPath('recently-used'), { key: t.adminKey });
    expectError(refused, 409, 'ConflictError');
    const explicitFalse = await t.request('DELETE', `${keyPath('recently-used')}?force=false`, { key: t.adminKey });
    expectError(explicitFalse, 409, 'ConflictError');
    expect((await me(created.key)).status).toBe(200);

    const forced = await t.request('DELETE', `${keyPath('recently-used')}?force=true`, { key: t.adminKey });
    expect(forced.status).toBe(200);
    expect(forced.body.status).toBe('revoked');
    expect((await me(created.key)).status).toBe(401);
  });

  it('holds even while background flushes of last_used_at are running', async () => {
    // A background flush takes the noted uses and writes them; a revoke arriving meanwhile must still see
    // the use (it once read the database before that write landed and revoked without force).
    for (let i = 0; i < 30; i++) {
      const created = await create({ name: `busy-${i}` });
      expect((await me(created.key)).status).toBe(200);
      const res = await t.request('DELETE', keyPath(`busy-${i}`), { key: t.adminKey });
      expect(res.status, `attempt ${i}: ${res.text}`).toBe(409);
      expect(res.body.error.details).toMatchObject({ guard: 'recently_used' });
    }
  });

  it('revokes a key last used more than 24 hours ago without force', async () => {
    const created = await create({ name: 'used-long-ago' });
    expect((await me(created.key)).status).toBe(200);
    expectError(await t.request('DELETE', keyPath('used-long-ago'), { key: t.adminKey }), 409, 'ConflictError');
    clock.advance(25 * HOUR);
    const res = await t.request('DELETE', keyPath('used-long-ago'), { key: t.adminKey });
    expect(res.status).toBe(200);
    expect((await me(created.key)).status).toBe(401);
  });

  it('needs force=true to revoke the very key making the request', async () => {
    const self = await create({ name: 'self-revoker', permissions: ['admin'] });
    const refused = await t.request('DELETE', keyPath('self-revoker'), { key: self.key });
    expectError(refused, 409, 'ConflictError');
    expect((await me(self.key)).status).toBe(200);
    const forced = await t.request('DELETE', `${keyPath('self-revoker')}?force=true`, { key: self.key });
    expect(forced.status).toBe(200);
    expect(forced.body).toMatchObject({ status: 'revoked' });
    expect((await me(self.key)).status).toBe(401);
  });
});

describe('expiry', () => {
  it('a key stops authenticating once expires_at passes and is listed as expired', async () => {
    const created = await create({ name: 'expiring', expires_at: new Date(clock.now().getTime() + HOUR).toISOString() });
    expect((await me(created.key)).status).toBe(200);
    clock.advance(2 * HOUR);
    const res = await me(created.key);
    expectError(res, 401, 'AuthenticationError');
    expect(res.body.error.message).toMatch(/expired/i);
    expect((await list()).find((k) => k.key_id === created.key_id)!.status).toBe('expired');
    expect((await get('expiring')).body.status).toBe('expired');
  });

  it('an expired key cannot be reactivated by PATCH', async () => {
    const created = await create({ name: 'expired-for-good', expires_at: new Date(clock.now().getTime() + HOUR).toISOString() });
    clock.advance(2 * HOUR);
    const later = new Date(clock.now().getTime() + 10 * HOUR).toISOString();
    const extended = await t.request('PATCH', keyPath('expired-for-good'), { key: t.adminKey, body: { expires_at: later } });
    expectError(extended, 409, 'ConflictError');
    const cleared = await t.request('PATCH', keyPath('expired-for-good'), { key: t.adminKey, body: { expires_at: null } });
    expectError(cleared, 409, 'ConflictError');
    expect((await me(created.key)).status).toBe(401);
    expect((await get('expired-for-good')).body.status).toBe('expired');
  });

  it('an expired key cannot be rotated back to life', async () => {
    const created = await create({ name: 'expired-no-rotate', expires_at: new Date(clock.now().getTime() + HOUR).toISOString() });
    clock.advance(2 * HOUR);
    const res = await t.request('POST', `${keyPath('expired-no-rotate')}/rotate`, { key: t.adminKey });
    expect(res.status).toBeGreaterThanOrEqual(400);
    expect((await me(created.key)).status).toBe(401);
    const listed = await get('expired-no-rotate');
    expect(listed.body).toMatchObject({ status: 'expired', key_prefix: created.key_prefix });
  });

  it('rotating an expired key answers 409 ConflictError', async () => {
    await create({ name: 'expired-rotate-409', expires_at: new Date(clock.now().getTime() + HOUR).toISOString() });
    clock.advance(2 * HOUR);
    expectError(await t.request('POST', `${keyPath('expired-rotate-409')}/rotate`, { key: t.adminKey }), 409, 'ConflictError');
  });

  it('an expired key can still be revoked', async () => {
    const created = await create({ name: 'expired-then-revoked', expires_at: new Date(clock.now().getTime() + HOUR).toISOString() });
    clock.advance(2 * HOUR);
    const res = await t.request('DELETE', keyPath('expired-then-revoked'), { key: t.adminKey });
    expect(res.status).toBe(200);
    expect(res.body.status).toBe('revoked');
    expect((await list(true)).find((k) => k.key_id === created.key_id)!.status).toBe('revoked');
  });
});

describe('the protected admin-key', () => {
  it('cannot be updated, rotated or revoked, even with force', async () => {
    expectError(await t.request('PATCH', keyPath('admin-key'), { key: t.adminKey, body: { description: 'mine now' } }), 403, 'NotAllowedError');
    expectError(await t.request('PATCH', keyPath('admin-key'), { key: t.adminKey, body: { permissions: ['read'] } }), 403, 'NotAllowedError');
    expectError(await t.request('POST', `${keyPath('admin-key')}/rotate`, { key: t.adminKey }), 403, 'NotAllowedError');
    expectError(await t.request('DELETE', keyPath('admin-key'), { key: t.adminKey }), 403, 'NotAllowedError');
    expectError(await t.request('DELETE', `${keyPath('admin-key')}?force=true`, { key: t.adminKey }), 403, 'NotAllowedError');
  });

  it('cannot be touched by another admin key either', async () => {
    const other = await create({ name: 'second-admin', permissions: ['admin'] });
    expectError(await t.request('PATCH', keyPath('admin-key'), { key: other.key, body: { allowed_origins: ['https://x.example.com'] } }), 403, 'NotAllowedError');
    expectError(await t.request('POST', `${keyPath('admin-key')}/rotate`, { key: other.key }), 403, 'NotAllowedError');
    expectError(await t.request('DELETE', `${keyPath('admin-key')}?force=true`, { key: other.key }), 403, 'NotAllowedError');
  });

  it('still works, unchanged, afterwards', async () => {
    const res = await me(t.adminKey);
    expect(res.status).toBe(200);
    const admin = (await get('admin-key')).body;
    expect(admin).toMatchObject({ status: 'active', permissions: ['admin'], allowed_origins: [], is_protected: true });
    expect(admin.description).toBe('Protected organization admin key');
    expect(await auditEvents(adminKeyId)).toEqual([]);
  });
});

describe('audit log', () => {
  it('records created, scope_updated, updated, rotated and revoked with actor, resource, time and changes', async () => {
    const created = await create({ name: 'audited', permissions: ['read'] });
    const createdAt = clock.now().toISOString();
    clock.advance(1000);
    expect((await t.request('PATCH', keyPath('audited'), {
      key: t.adminKey,
      body: { scopes: [{ resource_type: 'namespace', resource_id: 'audit_*' }] },
    })).status).toBe(200);
    clock.advance(1000);
    expect((await t.request('PATCH', keyPath('audited'), { key: t.adminKey, body: { description: 'described' } })).status).toBe(200);
    clock.advance(1000);
    const rotated = await t.request('POST', `${keyPath('audited')}/rotate`, { key: t.adminKey });
    expect(rotated.status).toBe(200);
    clock.advance(1000);
    expect((await t.request('DELETE', keyPath('audited'), { key: t.adminKey })).status).toBe(200);

    const events = await auditEvents(created.key_id);
    expect(events.map((e) => e.action)).toEqual([
      'api_key_revoked',
      'api_key_rotated',
      'api_key_updated',
      'api_key_scope_updated',
      'api_key_created',
    ]);
    for (const event of events) {
      expect(event.actor).toEqual({ key_id: adminKeyId, user_email: t.adminEmail });
      expect(event.resource_type).toBe('api_key');
      expect(event.resource_id).toBe(created.key_id);
      expect(event.resource_name).toBe('audited');
      expect(Number.isNaN(Date.parse(event.created_at))).toBe(false);
    }
    const byAction = Object.fromEntries(events.map((e) => [e.action, e]));
    expect(new Date(byAction.api_key_created!.created_at).toISOString()).toBe(createdAt);
    expect(byAction.api_key_created!.changes).toMatchObject({ name: 'audited', permissions: ['read'], scopes: [] });
    expect(byAction.api_key_scope_updated!.changes).toEqual({
      scopes: { from: [], to: [{ resource_type: 'namespace', resource_id: 'audit_*' }] },
    });
    expect(byAction.api_key_updated!.changes).toEqual({ description: { from: null, to: 'described' } });
    expect(byAction.api_key_rotated!.changes).toEqual({
      key_prefix: { from: created.key_prefix, to: rotated.body.key_prefix },
    });
    expect(byAction.api_key_revoked!.changes).toMatchObject({ status: { from: 'active', to: 'revoked' } });
    // The audit trail never holds a secret.
    const raw = await t.request('GET', `/v1/organizations/audit-log?resource_id=${created.key_id}`, { key: t.adminKey });
    expect(raw.text).not.toContain(created.key);
    expect(raw.text).not.toContain(rotated.body.key);
  });

  it('records a change of permissions or allowed_origins as api_key_scope_updated', async () => {
    const created = await create({ name: 'audited-access' });
    expect((await t.request('PATCH', keyPath('audited-access'), { key: t.adminKey, body: { permissions: ['read'] } })).status).toBe(200);
    expect((await t.request('PATCH', keyPath('audited-access'), { key: t.adminKey, body: { allowed_origins: ['https://a.example.com'] } })).status).toBe(200);
    const events = await auditEvents(created.key_id);
    expect(events.map((e) => e.action)).toEqual(['api_key_scope_updated', 'api_key_scope_updated', 'api_key_created']);
    expect(events[1]!.changes).toEqual({ permissions: { from: ['read', 'write', 'delete'], to: ['read'] } });
    expect(events[0]!.changes).toEqual({ allowed_origins: { from: [], to: ['https://a.example.com'] } });
  });

  it('filters by action', async () => {
    const { data } = await t.client().GET('/v1/organizations/audit-log', { params: { query: { action: 'api_key_rotated' } } });
    expect(data!.results.length).toBeGreaterThan(0);
    expect(data!.results.every((e) => e.action === 'api_key_rotated')).toBe(true);
  });

  it('names the acting key and its user when a second admin acts', async () => {
    const actor = await create({ name: 'acting-admin', permissions: ['admin'] });
    const res = await t.request('POST', keysPath(), { key: actor.key, body: { name: 'made-by-acting-admin' } });
    expect(res.status).toBe(201);
    expect(res.body.created_by).toBe(t.adminEmail);
    const [event] = await auditEvents(res.body.key_id);
    expect(event!.actor).toEqual({ key_id: actor.key_id, user_email: t.adminEmail });
  });
});
