/**
 * Refusing a key that does not exist is cheap: the database is asked once per unknown secret (then the
 * secret is remembered until a key is minted or rotated anywhere), and a client address that keeps
 * failing gets 429 with Retry-After while requests with a valid key from the same address go through.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { clientAddress } from '../../../kernel/auth/authenticator.js';
import { KeyStore as KeyStoreClass } from '../../../kernel/auth/key-store.js';
import { TenantStore as TenantStoreClass } from '../../../kernel/auth/tenants.js';
import { ManualClock, systemClock } from '../../../kernel/clock.js';
import { DatabaseHandle, EventBus, KeyStore, TenantStore } from '../../../kernel/tokens.js';
import { startTestKernel, type TestKernel } from '../../support/kernel.js';

const newSecret = () => `svc_sk_${randomBytes(24).toString('hex')}`;

describe('unknown keys', () => {
  let t: TestKernel;
  beforeAll(async () => {
    t = await startTestKernel();
  });
  afterAll(async () => {
    await t.stop();
  });

  it('asks the database once for a repeated unknown key', async () => {
    const keys = t.kernel.services.get(KeyStore);
    const secret = newSecret();
    const before = keys.lookups;
    for (let i = 0; i < 5; i++) expect((await t.request('GET', '/v1/me', { key: secret })).status).toBe(401);
    expect(keys.lookups - before).toBe(1);
  });

  it('refuses a secret that cannot be a key without asking the database', async () => {
    const keys = t.kernel.services.get(KeyStore);
    const before = keys.lookups;
    expect((await t.request('GET', '/v1/me', { key: 'short' })).status).toBe(401);
    expect(keys.lookups).toBe(before);
  });

  it('lets a key minted in this process work at once after its secret was tried as unknown', async () => {
    const secret = newSecret();
    expect((await t.request('GET', '/v1/me', { key: secret })).status).toBe(401);
    await t.kernel.services.get(TenantStore).createOrganization({ name: 'minted-here', ownerEmail: 'a@minted.test', adminKeyPlaintext: secret });
    expect((await t.request('GET', '/v1/me', { key: secret })).status).toBe(200);
  });

  it('forgets unknown secrets when another process announces a minted key', async () => {
    const secret = newSecret();
    expect((await t.request('GET', '/v1/me', { key: secret })).status).toBe(401);
    // Another process (`tessera orgs create`) writes the key with its own KeyStore, then announces it.
    const db = t.kernel.services.get(DatabaseHandle).db;
    const elsewhere = new TenantStoreClass(db, new KeyStoreClass(db, systemClock, 0), systemClock);
    const created = await elsewhere.createOrganization({ name: 'minted-elsewhere', ownerEmail: 'b@minted.test', adminKeyPlaintext: secret });
    // Still remembered as unknown here: the cache is what saves the query.
    expect((await t.request('GET', '/v1/me', { key: secret })).status).toBe(401);
    await t.kernel.services.get(EventBus).publish({
      type: 'api_key.created',
      organization_id: created.organization.organization_id,
      data: { key_id: created.adminKey.key_id },
    });
    await expect.poll(async () => (await t.request('GET', '/v1/me', { key: secret })).status).toBe(200);
  });

  it('lets a rotated secret work at once', async () => {
    const create = await t.client().POST('/v1/organizations/users/{user_email}/api-keys', {
      params: { path: { user_email: t.adminEmail } },
      body: { name: `rotating-${randomBytes(3).toString('hex')}` },
    });
    expect(create.response.status).toBe(201);
    const name = create.data!.name;
    const rotated = await t.request('POST', `/v1/organizations/users/${encodeURIComponent(t.adminEmail)}/api-keys/${name}/rotate`, { key: t.adminKey });
    expect(rotated.status).toBe(200);
    expect((await t.request('GET', '/v1/me', { key: rotated.body.key })).status).toBe(200);
  });
});

describe('per-address limit on requests without a valid key', () => {
  let t: TestKernel;
  const limit = 5;
  // Mid-minute on a clock that only moves when told, so the fixed window cannot roll over mid-test.
  const clock = new ManualClock(new Date('2030-01-01T00:00:30Z'));
  beforeAll(async () => {
    t = await startTestKernel({ clock, config: { unauthenticatedRateLimitPerMinute: limit } });
  });
  afterAll(async () => {
    await t.stop();
  });

  it('answers 429 with Retry-After once an address used up its failures, while a valid key from it is served', async () => {
    expect((await t.request('GET', '/v1/me', { key: t.adminKey })).status).toBe(200);
    for (let i = 0; i < limit; i++) expect((await t.request('GET', '/v1/me', { key: newSecret() })).status).toBe(401);

    const limited = await t.request('GET', '/v1/me', { key: newSecret() });
    expect(limited.status).toBe(429);
    expect(Number(limited.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(limited.body).toMatchObject({ success: false, status: 429, error: { type: 'RateLimitError', details: { limit } } });
    // No key at all counts the same; a forged X-Forwarded-For changes nothing while no proxy is trusted.
    expect((await t.request('GET', '/v1/me')).status).toBe(429);
    expect((await t.request('GET', '/v1/me', { key: newSecret(), headers: { 'X-Forwarded-For': '203.0.113.9' } })).status).toBe(429);

    const served = await t.request('GET', '/v1/me', { key: t.adminKey });
    expect(served.status).toBe(200);
    // Public operations need no key and are not limited.
    expect((await t.request('GET', '/v1/health')).status).not.toBe(429);

    // The next minute starts afresh.
    clock.advance(60_000);
    expect((await t.request('GET', '/v1/me', { key: newSecret() })).status).toBe(401);
  });

  it('takes the client address from X-Forwarded-For only as far as trusted proxies reach', () => {
    expect(clientAddress('::ffff:10.0.0.2', '198.51.100.7, 203.0.113.1', 0)).toBe('10.0.0.2');
    expect(clientAddress('10.0.0.2', '198.51.100.7, 203.0.113.1', 1)).toBe('203.0.113.1');
    expect(clientAddress('10.0.0.2', '198.51.100.7, 203.0.113.1', 2)).toBe('198.51.100.7');
    expect(clientAddress('10.0.0.2', '198.51.100.7', 5)).toBe('198.51.100.7');
    expect(clientAddress('10.0.0.2', undefined, 1)).toBe('10.0.0.2');
  });
});
