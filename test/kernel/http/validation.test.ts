/**
 * Input validation against the OpenAPI document: every bad body, query or header is a 422
 * `HTTPValidationError` naming where the problem is, and nothing is written.
 */
import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DatabaseHandle, resolve } from '../../../kernel/tokens.js';
import { startTestKernel, type RawResponse, type TestKernel } from '../../support/kernel.js';

interface Problem {
  loc: Array<string | number>;
  msg: string;
  type: string;
}

const TABLES = ['organizations', 'users', 'api_keys', 'namespaces', 'audit_log'] as const;

describe('request validation', () => {
  let t: TestKernel;
  const member = 'validated@example.test';

  async function counts(): Promise<Record<string, number>> {
    const db = resolve(t.kernel.container, DatabaseHandle).db;
    const out: Record<string, number> = {};
    for (const table of TABLES) {
      const row = await db(table).count<{ count: number }[]>({ count: '*' }).first();
      out[table] = Number(row?.count ?? 0);
    }
    return out;
  }

  /** Sends the request and checks it was refused with 422 at `loc`, writing nothing. */
  async function expect422(
    method: string,
    path: string,
    body: unknown,
    loc: Array<string | number>,
    type?: string,
  ): Promise<Problem[]> {
    const before = await counts();
    const res = await t.request(method, path, { key: t.adminKey, ...(body !== undefined ? { body } : {}) });
    expect(res.status, res.text).toBe(422);
    expectValidationShape(res);
    const detail = res.body.detail as Problem[];
    expect(detail.map((d) => d.loc)).toContainEqual(loc);
    if (type) expect(detail.find((d) => JSON.stringify(d.loc) === JSON.stringify(loc))!.type).toBe(type);
    expect(await counts()).toEqual(before);
    return detail;
  }

  function expectValidationShape(res: RawResponse): void {
    expect(res.headers.get('content-type')).toMatch(/application\/json/);
    expect(Object.keys(res.body)).toEqual(['detail']);
    expect(Array.isArray(res.body.detail)).toBe(true);
    expect(res.body.detail.length).toBeGreaterThan(0);
    for (const problem of res.body.detail as Problem[]) {
      expect(Array.isArray(problem.loc)).toBe(true);
      for (const part of problem.loc) expect(['string', 'number']).toContain(typeof part);
      expect(typeof problem.msg).toBe('string');
      expect(problem.msg.length).toBeGreaterThan(0);
      expect(typeof problem.type).toBe('string');
    }
  }

  beforeAll(async () => {
    t = await startTestKernel();
    const res = await t.request('POST', '/v1/organizations/users', { key: t.adminKey, body: { email: member } });
    expect(res.status).toBe(201);
    const ns = await t.request('POST', '/v1/namespaces', { key: t.adminKey, body: { namespace_name: 'existing' } });
    expect(ns.status).toBe(201);
  });

  it('lists every problem of a request, each at its own location', async () => {
    const detail = await expect422(
      'POST',
      `/v1/organizations/users/${member}/api-keys`,
      { name: '', permissions: ['god'], rate_limit_override: 0 },
      ['body', 'name'],
    );
    expect(detail.map((d) => d.loc)).toEqual(
      expect.arrayContaining([
        ['body', 'name'],
        ['body', 'permissions', 0],
        ['body', 'rate_limit_override'],
      ]),
    );
  });

  afterAll(async () => {
    await t?.stop();
  });

  describe('a body that may take one of several shapes (oneOf)', () => {
    const interactions = (body: unknown) =>
      t.request('POST', '/v1/retrievers/ret_unknown/interactions', { key: t.adminKey, headers: { 'X-Namespace': 'existing' }, body });

    it("names the bad value of the shape the caller sent, not the other shape's missing or extra properties", async () => {
      const single = await interactions({ document_id: 'doc_1', interaction_type: ['CLICKED'] });
      expect(single.status, single.text).toBe(422);
      expect((single.body.detail as Problem[]).map((d) => [d.loc, d.type])).toEqual([[['body', 'interaction_type', 0], 'enum']]);
      const batch = await interactions({ interactions: [{ document_id: 'doc_1' }] });
      expect(batch.status, batch.text).toBe(422);
      expect((batch.body.detail as Problem[]).map((d) => [d.loc, d.type])).toEqual([[['body', 'interactions', 0, 'interaction_type'], 'required']]);
    });

    it('lists what each shape needs when the body matches none at its top level', async () => {
      const empty = await interactions({});
      expect(empty.status, empty.text).toBe(422);
      expect((empty.body.detail as Problem[]).map((d) => d.loc)).toEqual(
        expect.arrayContaining([['body', 'document_id'], ['body', 'interaction_type'], ['body', 'interactions'], ['body']]),
      );
    });
  });

  describe('namespace bodies', () => {
    it('wrong types', async () => {
      await expect422('POST', '/v1/namespaces', { namespace_name: 123 }, ['body', 'namespace_name'], 'type');
      await expect422('POST', '/v1/namespaces', { namespace_name: 'typed', description: 5 }, ['body', 'description'], 'type');
      await expect422('POST', '/v1/namespaces', { namespace_name: 'typed', metadata: 'text' }, ['body', 'metadata'], 'type');
      await expect422('POST', '/v1/namespaces', { namespace_name: 'typed', feature_extractors: [{}] }, ['body', 'feature_extractors', 0, 'name']);
      await expect422('POST', '/v1/namespaces', [{ namespace_name: 'typed' }], ['body'], 'type');
    });

    it('a missing required field', async () => {
      await expect422('POST', '/v1/namespaces', {}, ['body', 'namespace_name'], 'required');
      await expect422('POST', '/v1/namespaces', { description: 'no name' }, ['body', 'namespace_name'], 'required');
    });

    it('names of 51 characters, under 3 characters, or with spaces and other characters', async () => {
      await expect422('POST', '/v1/namespaces', { namespace_name: 'n'.repeat(51) }, ['body', 'namespace_name'], 'maxLength');
      await expect422('POST', '/v1/namespaces', { namespace_name: 'ab' }, ['body', 'namespace_name'], 'minLength');
      await expect422('POST', '/v1/namespaces', { namespace_name: '' }, ['body', 'namespace_name'], 'minLength');
      await expect422('POST', '/v1/namespaces', { namespace_name: 'has space' }, ['body', 'namespace_name'], 'pattern');
      for (const name of ['dot.name', 'slash/name', 'ñame', 'trailing\n', 'semi;colon', 'ns*']) {
        await expect422('POST', '/v1/namespaces', { namespace_name: name }, ['body', 'namespace_name'], 'pattern');
      }
      // The boundaries themselves are fine.
      expect((await t.request('POST', '/v1/namespaces', { key: t.adminKey, body: { namespace_name: 'abc' } })).status).toBe(201);
      expect((await t.request('POST', '/v1/namespaces', { key: t.adminKey, body: { namespace_name: 'N'.repeat(50) } })).status).toBe(201);
    });

    it('a description over 500 characters', async () => {
      await expect422('POST', '/v1/namespaces', { namespace_name: 'described', description: 'd'.repeat(501) }, ['body', 'description'], 'maxLength');
      await expect422('PATCH', '/v1/namespaces/existing', { description: 'd'.repeat(501) }, ['body', 'description'], 'maxLength');
    });

    it('unknown body fields (additionalProperties: false)', async () => {
      await expect422('POST', '/v1/namespaces', { namespace_name: 'extra', bogus: 1 }, ['body', 'bogus'], 'additionalProperties');
      await expect422('PATCH', '/v1/namespaces/existing', { namespace_id: 'ns_x' }, ['body', 'namespace_id'], 'additionalProperties');
      await expect422(
        'POST',
        '/v1/namespaces',
        { namespace_name: 'extra', feature_extractors: [{ name: 'x', weight: 2 }] },
        ['body', 'feature_extractors', 0, 'weight'],
        'additionalProperties',
      );
    });

    it('an invalid rename leaves the namespace as it was', async () => {
      await expect422('PATCH', '/v1/namespaces/existing', { namespace_name: 'no spaces allowed' }, ['body', 'namespace_name'], 'pattern');
      const res = await t.request('GET', '/v1/namespaces/existing', { key: t.adminKey });
      expect(res.status).toBe(200);
      expect(res.body.namespace_name).toBe('existing');
    });
  });

  describe('API key bodies', () => {
    const keys = `/v1/organizations/users/${member}/api-keys`;

    it('a name over 100 characters, or empty', async () => {
      await expect422('POST', keys, { name: 'k'.repeat(101) }, ['body', 'name'], 'maxLength');
      await expect422('POST', keys, { name: '' }, ['body', 'name'], 'minLength');
      await expect422('POST', keys, {}, ['body', 'name'], 'required');
      await expect422('POST', keys, { name: 42 }, ['body', 'name'], 'type');
    });

    it('unknown permissions and malformed permission lists', async () => {
      await expect422('POST', keys, { name: 'p', permissions: ['superuser'] }, ['body', 'permissions', 0], 'enum');
      await expect422('POST', keys, { name: 'p', permissions: ['read', 'root'] }, ['body', 'permissions', 1], 'enum');
      await expect422('POST', keys, { name: 'p', permissions: [] }, ['body', 'permissions'], 'minItems');
      await expect422('POST', keys, { name: 'p', permissions: ['read', 'read'] }, ['body', 'permissions'], 'uniqueItems');
      await expect422('POST', keys, { name: 'p', permissions: 'admin' }, ['body', 'permissions'], 'type');
    });

    it('bad scopes', async () => {
      await expect422('POST', keys, { name: 's', scopes: [{ resource_type: 'planet', resource_id: '*' }] }, ['body', 'scopes', 0, 'resource_type'], 'enum');
      await expect422('POST', keys, { name: 's', scopes: [{ resource_type: 'namespace' }] }, ['body', 'scopes', 0, 'resource_id'], 'required');
      await expect422(
        'POST',
        keys,
        { name: 's', scopes: [{ resource_type: 'namespace', resource_id: '*', operations: ['fly'] }] },
        ['body', 'scopes', 0, 'operations', 0],
        'enum',
      );
      await expect422(
        'POST',
        keys,
        { name: 's', scopes: [{ resource_type: 'namespace', resource_id: 'a*b*' }] },
        ['body', 'scopes', 0, 'resource_id'],
        'pattern',
      );
      await expect422(
        'POST',
        keys,
        { name: 's', scopes: [{ resource_type: 'namespace', resource_id: '*', extra: true }] },
        ['body', 'scopes', 0, 'extra'],
        'additionalProperties',
      );
    });

    it('wrong types and ranges of the other fields', async () => {
      await expect422('POST', keys, { name: 'r', rate_limit_override: '5' }, ['body', 'rate_limit_override'], 'type');
      await expect422('POST', keys, { name: 'r', rate_limit_override: 1.5 }, ['body', 'rate_limit_override'], 'type');
      await expect422('POST', keys, { name: 'r', rate_limit_override: 0 }, ['body', 'rate_limit_override'], 'minimum');
      await expect422('POST', keys, { name: 'r', expires_at: 'tomorrow' }, ['body', 'expires_at'], 'format');
      await expect422('POST', keys, { name: 'r', description: 'd'.repeat(501) }, ['body', 'description'], 'maxLength');
      await expect422('POST', keys, { name: 'r', allowed_origins: ['not an origin'] }, ['body', 'allowed_origins', 0], 'pattern');
      await expect422('POST', keys, { name: 'r', key: 'svc_sk_chosen_by_me' }, ['body', 'key'], 'additionalProperties');
    });

    it('bad update bodies', async () => {
      const created = await t.request('POST', keys, { key: t.adminKey, body: { name: 'patchable' } });
      expect(created.status).toBe(201);
      await expect422('PATCH', `${keys}/patchable`, { permissions: ['write', 'owner'] }, ['body', 'permissions', 1], 'enum');
      await expect422('PATCH', `${keys}/patchable`, { name: 'n'.repeat(101) }, ['body', 'name'], 'maxLength');
      await expect422('PATCH', `${keys}/patchable`, { status: 'active' }, ['body', 'status'], 'additionalProperties');
      const after = await t.request('GET', `${keys}/patchable`, { key: t.adminKey });
      expect(after.body.permissions).toEqual(['read', 'write', 'delete']);
      expect(after.body.updated_at).toBeNull();
    });
  });

  describe('user bodies', () => {
    it('a malformed email, an unknown field', async () => {
      await expect422('POST', '/v1/organizations/users', { email: 'not-an-email' }, ['body', 'email'], 'format');
      await expect422('POST', '/v1/organizations/users', { email: 7 }, ['body', 'email'], 'type');
      await expect422('POST', '/v1/organizations/users', { email: 'x@example.test', role: 'owner' }, ['body', 'role'], 'additionalProperties');
    });
  });

  describe('query parameters and headers', () => {
    it('a limit that is not an integer in range', async () => {
      await expect422('GET', '/v1/organizations/users?limit=abc', undefined, ['query', 'limit'], 'type');
      await expect422('GET', '/v1/organizations/users?limit=0', undefined, ['query', 'limit'], 'minimum');
      await expect422('GET', '/v1/namespaces?limit=1001', undefined, ['query', 'limit'], 'maximum');
      await expect422('GET', '/v1/namespaces?offset=-1', undefined, ['query', 'offset'], 'minimum');
    });

    it('unknown query parameters', async () => {
      await expect422('GET', '/v1/organizations/users?foo=1', undefined, ['query', 'foo']);
      await expect422('GET', '/v1/me?verbose=true', undefined, ['query', 'verbose']);
      await expect422('POST', '/v1/namespaces?dry_run=true', { namespace_name: 'queried' }, ['query', 'dry_run']);
    });

    it('malformed enum, boolean and date-time values', async () => {
      await expect422('GET', '/v1/organizations/audit-log?action=nope', undefined, ['query', 'action'], 'enum');
      await expect422('GET', '/v1/organizations/usage?start=yesterday', undefined, ['query', 'start'], 'format');
      await expect422('GET', `/v1/organizations/users/${member}/api-keys?include_revoked=maybe`, undefined, ['query', 'include_revoked'], 'type');
    });

    it('an X-Namespace header over 100 characters', async () => {
      const res = await t.request('GET', '/v1/me', { key: t.adminKey, headers: { 'X-Namespace': 'x'.repeat(101) } });
      expect(res.status).toBe(422);
      expectValidationShape(res);
      expect(res.body.detail[0].loc).toEqual(['header', 'x-namespace']);
    });
  });

  describe('values the database cannot store', () => {
    // PostgreSQL text and jsonb refuse U+0000 and unpaired surrogates; such input is a 422, never a 500.
    it('NUL characters in body strings, nested values and object keys', async () => {
      await expect422('POST', '/v1/namespaces', { namespace_name: 'nul-desc', description: 'a\u0000b' }, ['body', 'description'], 'string_unstorable');
      await expect422('POST', '/v1/namespaces', { namespace_name: 'nul-meta', metadata: { deep: ['ok', 'bad\u0000'] } }, ['body', 'metadata', 'deep', 1]);
      await expect422('POST', '/v1/namespaces', { namespace_name: 'nul-key', metadata: { 'k\u0000': 1 } }, ['body', 'metadata', 'k\u0000']);
      await expect422('POST', '/v1/organizations/users', { email: 'nul@example.test', name: 'x\u0000' }, ['body', 'name']);
      await expect422('PATCH', '/v1/namespaces/existing', { description: '\u0000' }, ['body', 'description']);
    });

    it('unpaired surrogates in body strings', async () => {
      const before = await counts();
      const res = await t.request('POST', '/v1/namespaces', {
        key: t.adminKey,
        body: '{"namespace_name":"surrogate","description":"\\ud800"}',
        headers: { 'Content-Type': 'application/json' },
      });
      expect(res.status).toBe(422);
      expect(res.body.detail[0]).toMatchObject({ loc: ['body', 'description'], type: 'string_unstorable' });
      expect(await counts()).toEqual(before);
      // A real astral character (a surrogate pair) is fine.
      const ok = await t.request('POST', '/v1/namespaces', { key: t.adminKey, body: { namespace_name: 'astral', description: 'emoji \u{1F600}' } });
      expect(ok.status).toBe(201);
      expect(ok.body.description).toBe('emoji \u{1F600}');
    });

    it('surrogate bytes that are not an escape arrive as U+FFFD (bodies without escapes skip the walk)', async () => {
      // The raw UTF-8 of U+D800 (ED A0 80) is not valid UTF-8: the decoder makes each byte U+FFFD.
      const body = Buffer.concat([Buffer.from('{"namespace_name":"raw-surrogate","description":"a'), Buffer.from([0xed, 0xa0, 0x80]), Buffer.from('b"}')]);
      const res = await fetch(`${t.url}/v1/namespaces`, { method: 'POST', headers: { Authorization: `Bearer ${t.adminKey}`, 'Content-Type': 'application/json' }, body });
      expect(res.status).toBe(201);
      expect(((await res.json()) as { description: string }).description).toBe('a\ufffd\ufffd\ufffdb');
      // An escaped backslash before a 'u' is walked like any escape, and is storable text.
      const literal = await t.request('POST', '/v1/namespaces', { key: t.adminKey, body: { namespace_name: 'backslash-u', description: 'C:\\users' } });
      expect(literal.status).toBe(201);
      expect(literal.body.description).toBe('C:\\users');
    });

    it('NUL characters in path and query parameters', async () => {
      await expect422('GET', '/v1/namespaces/abc%00', undefined, ['path', 'name'], 'string_unstorable');
      await expect422('DELETE', '/v1/namespaces/abc%00', undefined, ['path', 'name']);
      await expect422('GET', '/v1/organizations/users/a%00@example.test', undefined, ['path', 'user_email']);
      await expect422('GET', '/v1/organizations/api-keys/key%00/usage', undefined, ['path', 'key_id']);
      await expect422('GET', '/v1/namespaces?search=a%00', undefined, ['query', 'search']);
      await expect422('GET', '/v1/organizations/audit-log?resource_id=%00', undefined, ['query', 'resource_id']);
    });

    it('malformed percent-encoding in the path is a 400, not a 500', async () => {
      for (const path of ['/v1/namespaces/%E0%A4%A', '/v1/namespaces/%ZZ', '/v1/organizations/users/%/api-keys']) {
        const res = await t.request('GET', path, { key: t.adminKey });
        expect(res.status, path).toBe(400);
        expect(res.body).toMatchObject({ success: false, status: 400, error: { type: 'InputError' } });
      }
    });

    it('path parameters are located as path in validation errors', async () => {
      await expect422('GET', `/v1/organizations/users/${'a'.repeat(321)}`, undefined, ['path', 'user_email'], 'maxLength');
    });
  });

  describe('formats are checked for real', () => {
    it('an impossible calendar date is a 422, not a different date', async () => {
      await expect422('POST', `/v1/organizations/users/${member}/api-keys`, { name: 'leap', expires_at: '2030-02-30T00:00:00Z' }, ['body', 'expires_at'], 'format');
      const res = await t.request('GET', `/v1/organizations/usage?start=${encodeURIComponent('2026-02-30T00:00:00Z')}`, { key: t.adminKey });
      expect(res.status).toBe(422);
      expect(res.body.detail[0].loc).toEqual(['query', 'start']);
      const leapDay = await t.request('POST', `/v1/organizations/users/${member}/api-keys`, { key: t.adminKey, body: { name: 'leap-ok', expires_at: '2032-02-29T00:00:00Z' } });
      expect(leapDay.status).toBe(201);
      expect(leapDay.body.expires_at).toBe('2032-02-29T00:00:00.000Z');
    });
  });

  describe('bodies that are not JSON', () => {
    it('invalid JSON text is a 422 at loc [body]', async () => {
      for (const text of ['{"namespace_name": ', '{namespace_name: "abc"}', "{'namespace_name': 'abc'}", 'abc']) {
        const before = await counts();
        const res = await t.request('POST', '/v1/namespaces', { key: t.adminKey, body: text, headers: { 'Content-Type': 'application/json' } });
        expect(res.status, text).toBe(422);
        expectValidationShape(res);
        expect(res.body.detail[0]).toMatchObject({ loc: ['body'], type: 'json_invalid' });
        expect(await counts()).toEqual(before);
      }
    });

    it('no body at all where one is required is a 422 at loc [body]', async () => {
      for (const [method, path] of [
        ['POST', '/v1/namespaces'],
        ['POST', '/v1/organizations/users'],
        ['PATCH', '/v1/namespaces/existing'],
        ['POST', `/v1/organizations/users/${member}/api-keys`],
      ] as const) {
        const before = await counts();
        const res = await t.request(method, path, { key: t.adminKey });
        expect(res.status, `${method} ${path}`).toBe(422);
        expectValidationShape(res);
        expect(res.body.detail).toEqual([{ loc: ['body'], msg: expect.any(String), type: 'missing' }]);
        expect(await counts()).toEqual(before);
      }
      // A Content-Type with no bytes is no body either (it reached the handlers as none: a 500 on PATCH).
      for (const [method, path] of [
        ['PATCH', '/v1/namespaces/existing'],
        ['PATCH', `/v1/organizations/users/${member}/api-keys/any-key`],
        ['POST', '/v1/namespaces'],
      ] as const) {
        for (const headers of [{ 'Content-Type': 'application/json' }, { 'Content-Type': 'application/json', 'Content-Length': '0' }] as Array<Record<string, string>>) {
          const before = await counts();
          const res = await t.request(method, path, { key: t.adminKey, headers, body: '' });
          expect(res.status, `${method} ${path} ${JSON.stringify(headers)}`).toBe(422);
          expect(res.body.detail).toEqual([{ loc: ['body'], msg: expect.any(String), type: 'missing' }]);
          expect(await counts()).toEqual(before);
        }
      }
      // A chunked body of no chunks reads as {} (as the JSON parser has it): nothing to update, not a crash.
      const chunked = await new Promise<{ status: number; body: string }>((resolvePromise, reject) => {
        const url = new URL(`${t.url}/v1/namespaces/existing`);
        const req = http.request(
          { method: 'PATCH', host: url.hostname, port: url.port, path: url.pathname, headers: { Authorization: `Bearer ${t.adminKey}`, 'Content-Type': 'application/json', 'Transfer-Encoding': 'chunked' } },
          (res) => {
            let body = '';
            res.on('data', (d: Buffer) => (body += d.toString()));
            res.on('end', () => resolvePromise({ status: res.statusCode ?? 0, body }));
          },
        );
        req.on('error', reject);
        req.end();
      });
      expect(chunked.status, chunked.body).toBe(400);
      expect(JSON.parse(chunked.body).error.message).toContain('Nothing to update');
      // Without a key it is still a 401 first.
      expect((await t.request('POST', '/v1/namespaces')).status).toBe(401);
      // Operations without a body do not need one.
      expect((await t.request('POST', `/v1/organizations/users/${t.adminEmail}/api-keys/admin-key/rotate`, { key: t.adminKey })).status).toBe(403);
    });

    it('a body that is not JSON is a 415', async () => {
      const before = await counts();
      const res = await t.request('POST', '/v1/namespaces', { key: t.adminKey, body: 'namespace_name=plain', headers: { 'Content-Type': 'application/x-www-form-urlencoded' } });
      expect(res.status).toBe(415);
      expect(res.body).toMatchObject({ success: false, status: 415 });
      expect(await counts()).toEqual(before);
    });

    it('invalid JSON on an update writes nothing either', async () => {
      const before = await counts();
      const res = await t.request('PATCH', '/v1/namespaces/existing', { key: t.adminKey, body: '{"description": "x"', headers: { 'Content-Type': 'application/json' } });
      expect(res.status).toBe(422);
      expect(res.body.detail[0].loc).toEqual(['body']);
      expect(await counts()).toEqual(before);
      const ns = await t.request('GET', '/v1/namespaces/existing', { key: t.adminKey });
      expect(ns.body.description).toBeNull();
    });
  });

  describe('routing and authentication come first', () => {
    it('an unknown route is a 404 ErrorResponse, with or without a key', async () => {
      for (const key of [t.adminKey, undefined]) {
        const res = await t.request('GET', '/v1/does-not-exist', key ? { key } : {});
        expect(res.status).toBe(404);
        expect(res.body).toMatchObject({ success: false, status: 404, error: { type: 'NotFoundError' } });
      }
      const post = await t.request('POST', '/v1/namespaces/extra/segments', { key: t.adminKey, body: '{bad json' });
      expect(post.status).toBe(404);
    });

    it('without a valid key the answer is 401, before the body is validated', async () => {
      const before = await counts();
      const cases: Array<[string, string, unknown, Record<string, string>]> = [
        ['POST', '/v1/namespaces', { namespace_name: 1 }, {}],
        ['POST', '/v1/namespaces', '{not json', {}],
        ['GET', '/v1/organizations/users?limit=abc&foo=1', undefined, {}],
        ['POST', '/v1/namespaces', { namespace_name: 'a b' }, { Authorization: 'Bearer svc_sk_not_a_real_key_000000000000' }],
        ['POST', '/v1/namespaces', '{not json', { Authorization: 'Bearer svc_sk_not_a_real_key_000000000000' }],
      ];
      for (const [method, path, body, headers] of cases) {
        const res = await t.request(method, path, { headers, ...(body !== undefined ? { body } : {}) });
        expect(res.status, `${method} ${path}`).toBe(401);
        expect(res.body).toMatchObject({ success: false, status: 401, error: { type: 'AuthenticationError' } });
      }
      expect(await counts()).toEqual(before);
    });

    it('a valid request after all this still works and writes exactly one row', async () => {
      const before = await counts();
      const res = await t.request('POST', '/v1/namespaces', { key: t.adminKey, body: { namespace_name: 'valid-one' } });
      expect(res.status).toBe(201);
      const after = await counts();
      expect(after.namespaces).toBe(before.namespaces! + 1);
      expect(after.audit_log).toBe(before.audit_log! + 1);
    });
  });
});
