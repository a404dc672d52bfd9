/**
 * Secret hygiene: a key's plaintext is shown once (create, rotate) and is nowhere else: not in any
 * table, not in the logs, not in any other response. Only its SHA-256 hex and a 10-character prefix
 * are kept.
 */
import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DatabaseHandle, resolve } from '../../../kernel/tokens.js';
import { startTestKernel, type TestKernel } from '../../support/kernel.js';

const sha256 = (text: string) => createHash('sha256').update(text, 'utf8').digest('hex');

/** Every run of 11 characters of the secret: anything longer than the 10-character display prefix. */
function leaks(haystack: string, secret: string): string[] {
  const found: string[] = [];
  for (let i = 0; i + 11 <= secret.length; i++) {
    const window = secret.slice(i, i + 11);
    if (haystack.includes(window)) found.push(window);
  }
  return found;
}

describe('secret hygiene', () => {
  let t: TestKernel;
  const member = 'secretive@example.test';
  const keysPath = `/v1/organizations/users/${member}/api-keys`;
  let created: { key: string; key_id: string; key_prefix: string };
  let rotated: { key: string; key_prefix: string };
  /** Every response body other than create and rotate. */
  const otherResponses: string[] = [];

  async function dumpDatabase(): Promise<string> {
    const db = resolve(t.kernel.container, DatabaseHandle).db;
    const tables = (await db('information_schema.tables')
      .where({ table_schema: 'public', table_type: 'BASE TABLE' })
      .select('table_name')) as Array<{ table_name: string }>;
    expect(tables.map((r) => r.table_name)).toEqual(expect.arrayContaining(['api_keys', 'audit_log', 'request_log', 'users']));
    const parts: string[] = [];
    for (const { table_name } of tables) {
      const rows = await db.select('*').from(table_name);
      parts.push(`${table_name}:${JSON.stringify(rows)}`);
    }
    return parts.join('\n');
  }

  async function keep(method: string, path: string, key: string, body?: unknown, headers?: Record<string, string>) {
    const res = await t.request(method, path, { key, ...(body !== undefined ? { body } : {}), ...(headers ? { headers } : {}) });
    otherResponses.push(res.text);
    for (const [, value] of res.headers) otherResponses.push(value);
    return res;
  }

  beforeAll(async () => {
    t = await startTestKernel();
    expect((await t.request('POST', '/v1/organizations/users', { key: t.adminKey, body: { email: member } })).status).toBe(201);
    const res = await t.request('POST', keysPath, { key: t.adminKey, body: { name: 'hidden', permissions: ['read'] } });
    expect(res.status).toBe(201);
    created = res.body;

    // Use it: successes and failures of every kind.
    const k = created.key;
    expect((await keep('GET', '/v1/me', k)).status).toBe(200);
    expect((await keep('GET', '/v1/namespaces', k)).status).toBe(200);
    expect((await keep('GET', '/v1/namespaces/nowhere', k)).status).toBe(404);
    expect((await keep('GET', '/v1/me', k, undefined, { 'X-Namespace': 'nowhere' })).status).toBe(404);
    expect((await keep('POST', '/v1/namespaces', k, { namespace_name: 'no-write' })).status).toBe(403);
    expect((await keep('GET', '/v1/organizations/users', k)).status).toBe(403);
    expect((await keep('POST', '/v1/namespaces', k, '{broken')).status).toBe(422);
    expect((await keep('GET', `/v1/me?api_key=${encodeURIComponent(k)}`, k)).status).toBe(422);
    expect((await keep('GET', '/v1/no-such-route', k)).status).toBe(404);
    // The secret sent where it does not belong: as a (wrong) bearer with a suffix, in the body.
    expect((await keep('GET', '/v1/me', `${k}x`)).status).toBe(401);
    expect((await keep('POST', '/v1/namespaces', t.adminKey, { namespace_name: 'leaky', metadata: { note: 'hello' } })).status).toBe(201);
    expect((await keep('POST', '/v1/organizations/users', t.adminKey, { email: 'x@example.test', token: k })).status).toBe(422);

    // Metadata reads by the admin.
    expect((await keep('GET', keysPath, t.adminKey)).status).toBe(200);
    expect((await keep('GET', `${keysPath}?include_revoked=true`, t.adminKey)).status).toBe(200);
    expect((await keep('GET', `${keysPath}/hidden`, t.adminKey)).status).toBe(200);
    expect((await keep('PATCH', `${keysPath}/hidden`, t.adminKey, { description: 'patched' })).status).toBe(200);
    expect((await keep('GET', `/v1/organizations/users/${member}`, t.adminKey)).status).toBe(200);
    expect((await keep('GET', '/v1/organizations/audit-log', t.adminKey)).status).toBe(200);
    expect((await keep('GET', `/v1/organizations/api-keys/${created.key_id}/usage`, t.adminKey)).status).toBe(200);
    expect((await keep('GET', `/v1/organizations/api-keys/${created.key_id}/usage/endpoints`, t.adminKey)).status).toBe(200);
    expect((await keep('GET', `/v1/organizations/usage/api-keys/${created.key_id}`, t.adminKey)).status).toBe(200);
    expect((await keep('GET', '/v1/organizations/usage', t.adminKey)).status).toBe(200);

    const rot = await t.request('POST', `${keysPath}/hidden/rotate`, { key: t.adminKey });
    expect(rot.status).toBe(200);
    rotated = rot.body;
    expect((await keep('GET', '/v1/me', rotated.key)).status).toBe(200);
    expect((await keep('GET', '/v1/me', created.key)).status).toBe(401);
    expect((await keep('GET', `${keysPath}/hidden`, t.adminKey)).status).toBe(200);
    expect((await keep('GET', '/v1/organizations/audit-log', t.adminKey)).status).toBe(200);
    expect((await keep('DELETE', `${keysPath}/hidden?force=true`, t.adminKey)).status).toBe(200);
    expect((await keep('GET', `${keysPath}?include_revoked=true`, t.adminKey)).status).toBe(200);
  });

  afterAll(async () => {
    await t?.stop();
  });

  it('create and rotate return the plaintext, about 60 characters, with a 10-character display prefix', () => {
    for (const k of [created, rotated]) {
      expect(k.key).toMatch(/^svc_sk_[A-Za-z0-9]+$/);
      expect(k.key.length).toBeGreaterThanOrEqual(55);
      expect(k.key.length).toBeLessThanOrEqual(65);
      expect(k.key_prefix).toBe(`${k.key.slice(0, 10)}...`);
    }
    expect(rotated.key).not.toBe(created.key);
  });

  it('the database holds only the SHA-256 hex of the current secret', async () => {
    const db = resolve(t.kernel.container, DatabaseHandle).db;
    const row = await db('api_keys').where({ key_id: created.key_id }).first();
    expect(row.key_hash).toBe(sha256(rotated.key));
    expect(row.key_hash).toMatch(/^[0-9a-f]{64}$/);
    expect(row.key_prefix).toBe(`${rotated.key.slice(0, 10)}...`);
    const admin = await db('api_keys').where({ name: 'admin-key' }).first();
    expect(admin.key_hash).toBe(sha256(t.adminKey));
  });

  it('no table contains a plaintext, or any part of one beyond the display prefix', async () => {
    const dump = await dumpDatabase();
    for (const secret of [created.key, rotated.key, t.adminKey]) {
      expect(dump.includes(secret)).toBe(false);
      expect(leaks(dump, secret)).toEqual([]);
    }
  });

  it('the logs never contain a plaintext', () => {
    const logs = t.logs.join('');
    // Sanity: the requests above were logged.
    expect(t.logs.some((line) => line.includes('"request"') || line.includes('request'))).toBe(true);
    expect(logs).toContain('/v1/namespaces/nowhere');
    for (const secret of [created.key, rotated.key, t.adminKey]) {
      expect(logs.includes(secret)).toBe(false);
      expect(leaks(logs, secret)).toEqual([]);
    }
  });

  it('no response other than create and rotate contains a plaintext', () => {
    const text = otherResponses.join('\n');
    expect(text).toContain(created.key_id);
    expect(text).toContain(created.key_prefix);
    for (const secret of [created.key, rotated.key, t.adminKey]) {
      expect(text.includes(secret)).toBe(false);
      expect(leaks(text, secret)).toEqual([]);
    }
  });

  it('no response shows the hash either', () => {
    const text = otherResponses.join('\n');
    expect(text).not.toContain(sha256(created.key));
    expect(text).not.toContain(sha256(rotated.key));
    expect(text).not.toContain(sha256(t.adminKey));
    expect(text).not.toContain('key_hash');
  });
});
