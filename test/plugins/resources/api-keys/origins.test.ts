/**
 * `allowed_origins` over real HTTP: browser requests (those with an Origin header) must match an entry on
 * every authenticated route; requests without Origin are unaffected; the allowlist survives rotation;
 * CORS answers echo the origin only for requests that pass.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { components } from '../../../../generated/openapi.js';
import { startTestKernel, type RawResponse, type TestKernel } from '../../../support/kernel.js';

type ApiKeyCreateRequest = components['schemas']['ApiKeyCreateRequest'];

const ALLOWED = ['https://app.example.com', 'https://*.example.net', 'http://localhost:5173'];

let t: TestKernel;
let restricted: string;
let restrictedAdmin: string;

function keysPath(): string {
  return `/v1/organizations/users/${encodeURIComponent(t.adminEmail)}/api-keys`;
}

async function createKey(body: ApiKeyCreateRequest): Promise<string> {
  const { data, response } = await t.client().POST('/v1/organizations/users/{user_email}/api-keys', {
    params: { path: { user_email: t.adminEmail } },
    body,
  });
  expect(response.status).toBe(201);
  return data!.key;
}

function from(origin: string | undefined, key: string, extra: Record<string, string> = {}) {
  return { key, headers: { ...(origin === undefined ? {} : { Origin: origin }), ...extra } };
}

function expectOriginRefused(res: RawResponse, origin: string): void {
  expect(res.status, res.text).toBe(403);
  expect(res.body).toMatchObject({ success: false, status: 403, error: { type: 'NotAllowedError' } });
  expect(res.body.error.message).toContain(origin);
  // A refused origin is never echoed back as allowed.
  expect(res.headers.get('access-control-allow-origin')).toBeNull();
}

function expectPassedWithCors(res: RawResponse, origin: string, status = 200): void {
  expect(res.status, res.text).toBe(status);
  expect(res.headers.get('access-control-allow-origin')).toBe(origin);
  expect(res.headers.get('vary') ?? '').toMatch(/origin/i);
}

beforeAll(async () => {
  t = await startTestKernel();
  restricted = await createKey({ name: 'browser', allowed_origins: ALLOWED });
  restrictedAdmin = await createKey({ name: 'browser-admin', permissions: ['admin'], allowed_origins: ['https://admin.example.com'] });
  const ns = await t.request('POST', '/v1/namespaces', { key: t.adminKey, body: { namespace_name: 'shop' } });
  expect(ns.status).toBe(201);
});

afterAll(async () => {
  await t?.stop();
});

describe('a key with allowed_origins', () => {
  it('passes a request from an exact allowed origin and echoes it for CORS', async () => {
    expectPassedWithCors(await t.request('GET', '/v1/me', from('https://app.example.com', restricted)), 'https://app.example.com');
    expectPassedWithCors(await t.request('GET', '/v1/me', from('http://localhost:5173', restricted)), 'http://localhost:5173');
  });

  it('passes the same origin written with its default port or a trailing slash', async () => {
    expect((await t.request('GET', '/v1/me', from('https://app.example.com:443', restricted))).status).toBe(200);
    expect((await t.request('GET', '/v1/me', from('https://app.example.com/', restricted))).status).toBe(200);
  });

  it('passes a subdomain of a wildcard entry, at any depth', async () => {
    expectPassedWithCors(await t.request('GET', '/v1/me', from('https://shop.example.net', restricted)), 'https://shop.example.net');
    expect((await t.request('GET', '/v1/me', from('https://eu.cdn.example.net', restricted))).status).toBe(200);
  });

  it('refuses the apex of a wildcard entry, and look-alike domains', async () => {
    for (const origin of ['https://example.net', 'https://badexample.net', 'https://example.net.evil.test', 'https://app.example.com.evil.test']) {
      expectOriginRefused(await t.request('GET', '/v1/me', from(origin, restricted)), origin);
    }
  });

  it('refuses a scheme or port mismatch', async () => {
    for (const origin of ['http://app.example.com', 'https://app.example.com:8443', 'http://localhost:3000', 'https://localhost:5173']) {
      expectOriginRefused(await t.request('GET', '/v1/me', from(origin, restricted)), origin);
    }
  });

  it("refuses the opaque 'null' origin", async () => {
    expectOriginRefused(await t.request('GET', '/v1/me', from('null', restricted)), 'null');
  });

  it('refuses a mismatched origin on every route type', async () => {
    const evil = 'https://evil.test';
    expectOriginRefused(await t.request('GET', '/v1/me', from(evil, restricted)), evil);
    expectOriginRefused(await t.request('GET', '/v1/namespaces', from(evil, restricted)), evil);
    expectOriginRefused(await t.request('GET', '/v1/namespaces/shop', from(evil, restricted)), evil);
    expectOriginRefused(await t.request('GET', '/v1/me', from(evil, restricted, { 'X-Namespace': 'shop' })), evil);
    expectOriginRefused(await t.request('GET', keysPath(), from(evil, restrictedAdmin)), evil);
    expectOriginRefused(await t.request('GET', '/v1/organizations/audit-log', from(evil, restrictedAdmin)), evil);
  });

  it('refuses a mismatched origin on writes, and nothing is written', async () => {
    const evil = 'https://evil.test';
    const create = await t.request('POST', '/v1/namespaces', { ...from(evil, restricted), body: { namespace_name: 'from_evil' } });
    expectOriginRefused(create, evil);
    expect((await t.request('GET', '/v1/namespaces/from_evil', { key: t.adminKey })).status).toBe(404);
    const createKeyRes = await t.request('POST', keysPath(), { ...from(evil, restrictedAdmin), body: { name: 'from-evil' } });
    expectOriginRefused(createKeyRes, evil);
    expect((await t.request('GET', `${keysPath()}/from-evil`, { key: t.adminKey })).status).toBe(404);
  });

  it('checks the origin before the body: a bad body from a bad origin is a 403, not a 422', async () => {
    const res = await t.request('POST', '/v1/namespaces', { ...from('https://evil.test', restricted), body: { nonsense: true } });
    expectOriginRefused(res, 'https://evil.test');
  });

  it('passes the routes it refuses elsewhere when the origin is allowed', async () => {
    const ok = 'https://app.example.com';
    expectPassedWithCors(await t.request('GET', '/v1/namespaces', from(ok, restricted)), ok);
    expectPassedWithCors(await t.request('POST', '/v1/namespaces', { ...from(ok, restricted), body: { namespace_name: 'from_app' } }), ok, 201);
    expectPassedWithCors(await t.request('GET', keysPath(), from('https://admin.example.com', restrictedAdmin)), 'https://admin.example.com');
  });

  it('is not affected by requests without an Origin header', async () => {
    expect((await t.request('GET', '/v1/me', from(undefined, restricted))).status).toBe(200);
    expect((await t.request('GET', '/v1/namespaces', from(undefined, restricted))).status).toBe(200);
    const admin = await t.request('GET', keysPath(), from(undefined, restrictedAdmin));
    expect(admin.status).toBe(200);
    expect(admin.headers.get('access-control-allow-origin')).toBeNull();
  });

  it('still answers 401, not 403, for an unknown key from any origin', async () => {
    const res = await t.request('GET', '/v1/me', from('https://evil.test', 'svc_sk_not_a_real_key_at_all_0000000000000000000000'));
    expect(res.status).toBe(401);
  });

  it('is reported by GET /v1/me', async () => {
    const res = await t.request('GET', '/v1/me', from(undefined, restricted));
    expect(res.body.key.allowed_origins).toEqual(ALLOWED);
  });
});

describe('rotation', () => {
  it('keeps the allowlist: the new secret is still restricted', async () => {
    const old = await createKey({ name: 'rotating-browser', allowed_origins: ['https://app.example.com'] });
    const rotated = await t.request('POST', `${keysPath()}/rotating-browser/rotate`, { key: t.adminKey });
    expect(rotated.status).toBe(200);
    expect(rotated.body.allowed_origins).toEqual(['https://app.example.com']);
    const fresh: string = rotated.body.key;
    expectOriginRefused(await t.request('GET', '/v1/me', from('https://evil.test', fresh)), 'https://evil.test');
    expectPassedWithCors(await t.request('GET', '/v1/me', from('https://app.example.com', fresh)), 'https://app.example.com');
    expect((await t.request('GET', '/v1/me', from('https://app.example.com', old))).status).toBe(401);
  });
});

describe('changing the allowlist', () => {
  it('applies to the very next request, and an empty list lifts the restriction', async () => {
    const key = await createKey({ name: 'changing-browser', allowed_origins: ['https://one.example.com'] });
    expect((await t.request('GET', '/v1/me', from('https://one.example.com', key))).status).toBe(200);
    const patch = await t.request('PATCH', `${keysPath()}/changing-browser`, {
      key: t.adminKey,
      body: { allowed_origins: ['https://two.example.com'] },
    });
    expect(patch.status).toBe(200);
    expectOriginRefused(await t.request('GET', '/v1/me', from('https://one.example.com', key)), 'https://one.example.com');
    expect((await t.request('GET', '/v1/me', from('https://two.example.com', key))).status).toBe(200);
    const clear = await t.request('PATCH', `${keysPath()}/changing-browser`, { key: t.adminKey, body: { allowed_origins: [] } });
    expect(clear.status).toBe(200);
    expectPassedWithCors(await t.request('GET', '/v1/me', from('https://anywhere.example.org', key)), 'https://anywhere.example.org');
  });
});

describe('a key without allowed_origins', () => {
  it('passes any origin and echoes it', async () => {
    const key = await createKey({ name: 'unrestricted' });
    expectPassedWithCors(await t.request('GET', '/v1/me', from('https://anything.example.org', key)), 'https://anything.example.org');
  });
});

describe('CORS preflight', () => {
  it('answers OPTIONS with 204 and the allowed methods and headers, without a key', async () => {
    const res = await t.request('OPTIONS', '/v1/namespaces', {
      headers: {
        Origin: 'https://app.example.com',
        'Access-Control-Request-Method': 'POST',
        'Access-Control-Request-Headers': 'authorization, content-type, x-namespace',
      },
    });
    expect(res.status).toBe(204);
    expect(res.headers.get('access-control-allow-origin')).toBe('https://app.example.com');
    const methods = (res.headers.get('access-control-allow-methods') ?? '').split(/,\s*/);
    expect(methods).toEqual(expect.arrayContaining(['GET', 'POST']));
    const headers = (res.headers.get('access-control-allow-headers') ?? '').toLowerCase();
    for (const h of ['authorization', 'content-type', 'x-namespace']) expect(headers).toContain(h);
    expect(res.text).toBe('');
  });

  it('answers OPTIONS on a parameterized admin route with 204', async () => {
    const res = await t.request('OPTIONS', `${keysPath()}/browser`, {
      headers: { Origin: 'https://admin.example.com', 'Access-Control-Request-Method': 'PATCH' },
    });
    expect(res.status).toBe(204);
    expect((res.headers.get('access-control-allow-methods') ?? '').split(/,\s*/)).toEqual(
      expect.arrayContaining(['GET', 'PATCH', 'DELETE']),
    );
  });
});
