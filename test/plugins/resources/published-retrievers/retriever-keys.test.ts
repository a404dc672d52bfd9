/**
 * `ret_sk_` keys on the public execute endpoints: in X-Public-API-Key on the named execute, alone on
 * POST /v1/public/retrievers/execute; allowed origins (an allowed origin passes, another is a 403, no Origin
 * header is not a browser and passes), expiry (401), revocation (401 at once), only the retriever it was made
 * for, only while published; no password needed (the owner issued it); the key never shows in any response.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DatabaseHandle, KeyStore } from '../../../../kernel/tokens.js';
import { organizationMe, type RawResponse } from '../../../support/kernel.js';
import { startPublishedFixture, type PublishedFixture } from './setup.js';

const SITE = 'https://shop.example.com';

describe('ret_sk_ keys on the public execute endpoints', () => {
  let f: PublishedFixture;
  let key: string;
  let keyId: string;
  let otherKey: string;
  const responses: RawResponse[] = [];

  const makeKey = async (retriever: string, body: Record<string, unknown>) => {
    const res = await f.api('POST', `/v1/retrievers/${retriever}/api-keys`, body);
    expect(res.status, res.text).toBe(201);
    f.secrets.add(res.body.key);
    f.secrets.add(res.body.key_id);
    return res.body as { key: string; key_id: string };
  };
  const keyed = async (path: string, apiKey: string | undefined, headers: Record<string, string> = {}, body: unknown = { inputs: { n: 2 } }) => {
    const res = await f.anon('POST', path, body, { ...(apiKey ? { 'X-Public-API-Key': apiKey } : {}), ...headers });
    responses.push(res);
    return res;
  };
  const byName = (apiKey: string | undefined, headers?: Record<string, string>) => keyed('/v1/public/retrievers/lamp-shop/execute', apiKey, headers);
  const alone = (apiKey: string | undefined, headers?: Record<string, string>) => keyed('/v1/public/retrievers/execute', apiKey, headers);
  const keyedMe = async (apiKey: string) => {
    const res = await f.t.request('GET', '/v1/me', { key: apiKey, headers: { 'X-Namespace': 'anything' } });
    responses.push(res);
    return res;
  };

  beforeAll(async () => {
    f = await startPublishedFixture();
    await f.retriever('lamps');
    await f.retriever('other');
    const published = await f.api('POST', '/v1/retrievers/lamps/publish', {
      public_name: 'lamp-shop', password: 'correct horse battery', display_config: { exposed_fields: ['title'] },
    });
    expect(published.status, published.text).toBe(201);
    f.secrets.add('correct horse battery');
    expect((await f.api('POST', '/v1/retrievers/other/publish', { public_name: 'other-shop' })).status).toBe(201);
    ({ key, key_id: keyId } = await makeKey('lamps', { name: 'site', allowed_origins: [SITE, 'https://*.example.org'] }));
    ({ key: otherKey } = await makeKey('other', { name: 'other-site' }));
  }, 120_000);
  afterAll(async () => {
    await f?.t.stop();
  });

  it('executes its retriever by name and alone, without the password, only exposed fields', async () => {
    for (const res of [await byName(key), await alone(key), await byName(key, { Origin: SITE }), await alone(key, { Origin: 'https://a.b.example.org' })]) {
      expect(res.status, res.text).toBe(200);
      expect(res.body.execution_id).toEqual(expect.any(String));
      expect(res.body.documents).toHaveLength(3);
      for (const doc of res.body.documents) expect(Object.keys(doc.payload ?? {})).toEqual(['title']);
    }
    // Streaming works with the key alone as well.
    const streamed = await keyed('/v1/public/retrievers/execute', key, {}, { inputs: { n: 1 }, stream: true });
    expect(streamed.status).toBe(200);
    expect(streamed.text).toContain('execution_complete');
    // Authorization: Bearer is accepted on the key-alone endpoint too (servers).
    const bearer = await f.t.request('POST', '/v1/public/retrievers/execute', { key, body: { inputs: { n: 0 } } });
    expect(bearer.status, bearer.text).toBe(200);
    responses.push(bearer);
  });

  it('applies allowed_origins: another origin (or null) is a 403, no Origin header passes', async () => {
    for (const origin of ['https://evil.example.net', 'null', 'http://shop.example.com', 'https://example.org']) {
      for (const res of [await byName(key, { Origin: origin }), await alone(key, { Origin: origin })]) {
        expect(res.status, `${origin}: ${res.text}`).toBe(403);
        expect(res.body.error.message).toContain('not allowed');
      }
    }
    expect((await alone(key)).status).toBe(200);
    // Interactions sent with the key follow the same origin rule.
    const click = (origin: string) => keyed('/v1/public/retrievers/lamp-shop/interactions', key, { Origin: origin }, { document_id: 'doc_1', interaction_type: ['CLICK'] });
    expect((await click('https://evil.example.net')).status).toBe(403);
    const allowed = await click(SITE);
    expect(allowed.status, allowed.text).toBe(200);
  });

  it('executes only its own retriever', async () => {
    const wrong = await keyed('/v1/public/retrievers/other-shop/execute', key);
    expect(wrong.status).toBe(403);
    expect(wrong.body.error.message).toContain('another retriever');
    expect((await byName(otherKey)).status).toBe(403);
    // The other key alone runs the other retriever.
    expect((await alone(otherKey)).status).toBe(200);
  });

  it('answers GET /v1/me (it works for every valid key) with what the key executes and nothing of the organization', async () => {
    const me = await keyedMe(key);
    expect(me.status, me.text).toBe(200);
    expect(me.body).toEqual({
      key: { key_prefix: expect.stringMatching(/^ret_sk_/), key_type: 'retriever', allowed_origins: [SITE, 'https://*.example.org'], expires_at: null, rate_limit_per_minute: null },
      bound_retriever: { kind: 'retriever', public_name: 'lamp-shop', allowed_endpoints: ['POST /v1/public/retrievers/execute', 'POST /v1/public/retrievers/{public_name}/execute'] },
    });
    // A page embedding the key shows it to every visitor: no organization, user, id or email in the answer.
    const organization = organizationMe((await f.t.client().GET('/v1/me', {})).data);
    for (const hidden of [organization.organization.organization_id, organization.organization.name, organization.user.email, keyId]) expect(me.text).not.toContain(hidden);
    for (const path of ['/v1/retrievers', '/v1/organizations/usage']) {
      const refused = await f.t.request('GET', path, { key, headers: { 'X-Namespace': 'anything' } });
      expect(refused.status, path).toBe(403);
      expect(refused.body.error.message).toContain('retriever key (ret_sk_) can only execute');
    }
  });

  it('refuses other keys, no key and garbage on the key-alone endpoint', async () => {
    expect((await alone(undefined)).status).toBe(401);
    expect((await alone(f.t.adminKey)).status).toBe(401);
    const prk = (await f.api('GET', '/v1/retrievers/other/publish')).body.public_api_key as string;
    f.secrets.add(prk);
    expect((await alone(prk)).status).toBe(401);
    expect((await alone(`ret_sk_${'x'.repeat(53)}`)).status).toBe(401);
    expect((await byName(`ret_sk_${'x'.repeat(53)}`)).status).toBe(401);
    // An organization key in X-Public-API-Key is no public key.
    expect((await byName(f.t.adminKey)).status).toBe(401);
  });

  it('works only while the retriever is published', async () => {
    expect((await f.api('PATCH', '/v1/retrievers/other/publish', { active: false })).status).toBe(200);
    const off = await alone(otherKey);
    expect(off.status).toBe(404);
    expect((await f.api('PATCH', '/v1/retrievers/other/publish', { active: true })).status).toBe(200);
    expect((await alone(otherKey)).status).toBe(200);
    expect((await f.api('DELETE', '/v1/retrievers/other/publish')).status).toBe(200);
    expect((await alone(otherKey)).status).toBe(404);
    expect((await keyed('/v1/public/retrievers/other-shop/execute', otherKey)).status).toBe(404);
  });

  it('stops at expiry (401)', async () => {
    const { key: expiring, key_id: id } = await makeKey('lamps', { name: 'expiring', expires_at: '2999-01-01T00:00:00Z' });
    expect((await alone(expiring)).status).toBe(200);
    // Move expiry into the past (the clock is not ours to move here), and drop the cached lookup.
    await f.t.kernel.services.get(DatabaseHandle).db('api_keys').where({ key_id: id }).update({ expires_at: new Date(Date.now() - 1000) });
    f.t.kernel.services.get(KeyStore).evict(id);
    for (const res of [await alone(expiring), await byName(expiring)]) {
      expect(res.status).toBe(401);
      expect(res.body.error.message).toContain('expired');
    }
    const listed = await f.api('GET', '/v1/retrievers/lamps/api-keys');
    expect(listed.body.results.find((k: { key_id: string }) => k.key_id === id)).toMatchObject({ status: 'expired' });
  });

  it('stops at once when revoked (401)', async () => {
    expect((await alone(key)).status).toBe(200);
    expect((await f.api('DELETE', `/v1/retrievers/lamps/api-keys/${keyId}`)).status).toBe(200);
    expect((await alone(key)).status).toBe(401);
    expect((await byName(key)).status).toBe(401);
  });

  it('records executions as made with the key, and never shows a secret in a public response', async () => {
    const history = await f.api('GET', '/v1/retrievers/lamps/executions');
    expect(history.body.results.map((e: { created_by: string }) => e.created_by)).toContain(`public:lamp-shop:retriever_key:${keyId}`);
    for (const res of responses) {
      for (const secret of f.secrets) expect(res.text, `${secret} in a public response`).not.toContain(secret);
    }
  });
});

describe('bound keys on the public endpoints: failures per address', () => {
  it('limits failed key checks per address like Authorization: Bearer failures (429 with Retry-After)', async () => {
    const { startTestKernel } = await import('../../../support/kernel.js');
    const t = await startTestKernel({ config: { runTasks: false, unauthenticatedRateLimitPerMinute: 3 } });
    try {
      const bad = (i: number) => t.request('POST', '/v1/public/retrievers/execute', { headers: { 'X-Public-API-Key': `ret_sk_${String(i).padStart(53, 'x')}` }, body: {} });
      for (let i = 0; i < 3; i++) expect((await bad(i)).status).toBe(401);
      const limited = await bad(99);
      expect(limited.status).toBe(429);
      expect(Number(limited.headers.get('retry-after'))).toBeGreaterThan(0);
      // The same budget as Bearer failures from this address.
      expect((await t.request('GET', '/v1/me', { key: `svc_sk_${'y'.repeat(40)}` })).status).toBe(429);
    } finally {
      await t.stop();
    }
  });
});
