/**
 * The marketplace over real HTTP: the public catalog (listed, active publications only; paginated; no secrets),
 * subscriptions from another organization (one `sk_marketplace_` key shown once), and their isolation: the key
 * executes that one retriever while it is published and listed, and nothing else — no other retriever, nothing
 * of the subscriber's own organization, no authenticated route; unsubscribing revokes it at once.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { operations } from '../../../../kernel/http/operations.js';
import { TenantStore } from '../../../../kernel/tokens.js';
import type { RawResponse } from '../../../support/kernel.js';
import { startPublishedFixture, type PublishedFixture } from '../published-retrievers/setup.js';

describe('marketplace: catalog, subscriptions and sk_marketplace_ isolation', () => {
  let f: PublishedFixture;
  /** The admin key of the subscribing organization. */
  let subscriberAdmin: string;
  let subscriberEmail: string;
  const publicResponses: RawResponse[] = [];
  const ownerResponses: RawResponse[] = [];

  const sub = (method: string, path: string, body?: unknown, key = subscriberAdmin, headers: Record<string, string> = {}) =>
    t().request(method, path, { key, headers, ...(body !== undefined ? { body } : {}) });
  const t = () => f.t;
  const anon = async (method: string, path: string, body?: unknown, headers?: Record<string, string>) => {
    const res = await f.anon(method, path, body, headers);
    publicResponses.push(res);
    return res;
  };
  const execute = (name: string, key: string | undefined, headers: Record<string, string> = {}) =>
    anon('POST', `/v1/public/retrievers/${name}/execute`, { inputs: { n: 1 } }, { ...(key ? { 'X-Public-API-Key': key } : {}), ...headers });
  const executeAlone = (key: string, headers: Record<string, string> = {}) =>
    anon('POST', '/v1/public/retrievers/execute', { inputs: { n: 1 } }, { 'X-Public-API-Key': key, ...headers });
  const subscribe = async (name: string, body?: unknown, key = subscriberAdmin) => {
    const res = await sub('POST', `/v1/marketplace/catalog/${name}/subscribe`, body, key);
    ownerResponses.push(res);
    return res;
  };

  beforeAll(async () => {
    f = await startPublishedFixture();
    for (const name of ['lamps', 'chairs', 'private-one', 'sleeping']) await f.retriever(name);
    const publish = async (retriever: string, body: Record<string, unknown>) => {
      const res = await f.api('POST', `/v1/retrievers/${retriever}/publish`, body);
      expect(res.status, res.text).toBe(201);
      f.secrets.add(res.body.public_api_key);
    };
    await publish('lamps', {
      public_name: 'lamp-market', title: 'Lamp finder', description: 'Finds lamps', marketplace_listed: true, password: 'lamp password 1',
      display_config: { exposed_fields: ['title'], logo_url: 'https://cdn.example.com/logo.png' },
    });
    f.secrets.add('lamp password 1');
    await publish('chairs', { public_name: 'chair-market', title: 'Chair finder', marketplace_listed: true });
    await publish('private-one', { public_name: 'not-listed', title: 'Not listed' });
    await publish('sleeping', { public_name: 'sleeping-market', title: 'Sleeping', marketplace_listed: true, active: false });
    const other = await t().kernel.services.get(TenantStore).createOrganization({ name: 'subscriber-org', ownerEmail: 'buyer@subscriber.test' });
    subscriberAdmin = other.adminKeyPlaintext;
    subscriberEmail = 'buyer@subscriber.test';
    f.secrets.add(other.organization.organization_id);
    f.secrets.add(subscriberAdmin);
    // The subscriber has data of its own, which a marketplace key must never reach.
    expect((await sub('POST', '/v1/namespaces', { namespace_name: 'mine' })).status).toBe(201);
    expect((await sub('POST', '/v1/buckets', { bucket_name: 'private-bucket' }, subscriberAdmin, { 'X-Namespace': 'mine' })).status).toBe(201);
  }, 120_000);
  afterAll(async () => {
    await f?.t.stop();
  });

  it('lists only active, listed publications, paginated, with nothing internal', async () => {
    const catalog = await anon('GET', '/v1/marketplace/catalog');
    expect(catalog.status, catalog.text).toBe(200);
    expect(catalog.body).toMatchObject({ page: 1, page_size: 20, total_count: 2, total_pages: 1 });
    expect(catalog.body.results.map((r: { public_name: string }) => r.public_name).sort()).toEqual(['chair-market', 'lamp-market']);
    const lamp = catalog.body.results.find((r: { public_name: string }) => r.public_name === 'lamp-market');
    expect(lamp).toEqual({
      public_name: 'lamp-market', title: 'Lamp finder', description: 'Finds lamps', logo_url: 'https://cdn.example.com/logo.png', template_type: null,
      password_protected: true, exposed_fields: ['title'], published_at: expect.any(String),
      config_url: '/v1/marketplace/catalog/lamp-market/config', execute_url: '/v1/public/retrievers/lamp-market/execute',
      page_url: '/p/lamp-market', subscribe_url: '/v1/marketplace/catalog/lamp-market/subscribe',
    });
    const page2 = await anon('GET', '/v1/marketplace/catalog?page=2&page_size=1');
    expect(page2.body).toMatchObject({ page: 2, page_size: 1, total_count: 2, total_pages: 2 });
    expect(page2.body.results).toHaveLength(1);
    expect((await anon('GET', '/v1/marketplace/catalog?page_size=101')).status).toBe(422);
    expect((await anon('GET', '/v1/marketplace/catalog?page=501')).status).toBe(422);
    const searched = await anon('GET', `/v1/marketplace/catalog?search=${encodeURIComponent('^CHAIR')}`);
    expect(searched.body.results.map((r: { public_name: string }) => r.public_name)).toEqual(['chair-market']);
    expect([400, 422]).toContain((await anon('GET', `/v1/marketplace/catalog?search=${encodeURIComponent('(a)\\1')}`)).status);
    expect((await anon('GET', `/v1/marketplace/catalog?search=${encodeURIComponent('(a+)+$')}`)).status).toBeLessThan(500);

    expect((await anon('GET', '/v1/marketplace/catalog/lamp-market')).body).toEqual(lamp);
    for (const name of ['not-listed', 'sleeping-market', 'nobody']) {
      const res = await anon('GET', `/v1/marketplace/catalog/${name}`);
      expect(res.status, name).toBe(404);
    }
  });

  it('subscribes another organization: a sk_marketplace_ key shown once; listed, active, foreign retrievers only', async () => {
    const res = await subscribe('lamp-market', { allowed_origins: ['https://buyer.example.com'] });
    expect(res.status, res.text).toBe(201);
    expect(res.body).toMatchObject({
      subscription_id: expect.stringMatching(/^msub_/), public_name: 'lamp-market', title: 'Lamp finder', status: 'active', available: true,
      key: expect.stringMatching(/^sk_marketplace_[A-Za-z0-9]{53}$/), key_type: 'marketplace', key_status: 'active',
      allowed_origins: ['https://buyer.example.com'], created_by: subscriberEmail, cancelled_at: null,
    });
    f.secrets.add(res.body.key);
    expect(res.body.key_prefix).toBe(`${res.body.key.slice(0, 10)}...`);
    // Nothing of the publisher: no retriever id, no organization.
    expect(JSON.stringify(res.body)).not.toMatch(/ret_|org_/);

    expect((await subscribe('lamp-market')).status).toBe(409);
    for (const name of ['not-listed', 'sleeping-market', 'nobody']) expect((await subscribe(name)).status, name).toBe(404);
    // The publisher's own organization makes ret_sk_ keys instead.
    const own = await subscribe('chair-market', undefined, t().adminKey);
    expect(own.status).toBe(409);
    expect(own.body.error.message).toContain('ret_sk_');
    // Subscribing mints a credential: admin only.
    const readKey = (await sub('POST', `/v1/organizations/users/${subscriberEmail}/api-keys`, { name: 'reader', permissions: ['read'] })).body.key as string;
    expect((await subscribe('chair-market', undefined, readKey)).status).toBe(403);
    const listed = await sub('GET', '/v1/marketplace/subscriptions', undefined, readKey);
    expect(listed.status).toBe(200);
    expect(listed.body.total).toBe(1);
  });

  it('executes its retriever (no password needed), by name and alone, from its allowed origins', async () => {
    const key = await freshKey('chair-market');
    const lampKey = await currentLampKey();
    for (const res of [await execute('lamp-market', lampKey), await executeAlone(lampKey), await execute('lamp-market', lampKey, { Origin: 'https://buyer.example.com' })]) {
      expect(res.status, res.text).toBe(200);
      for (const doc of res.body.documents) expect(Object.keys(doc.payload ?? {})).toEqual(['title']);
    }
    expect((await execute('lamp-market', lampKey, { Origin: 'https://evil.example.com' })).status).toBe(403);
    // Anonymous visitors still need the password.
    expect((await execute('lamp-market', undefined)).status).toBe(401);
    expect((await executeAlone(key)).status).toBe(200);
  });

  it('reaches no other retriever, nothing of its own organization and no authenticated route', async () => {
    const key = await currentLampKey();
    expect((await execute('chair-market', key)).status).toBe(403);
    expect((await execute('not-listed', key)).status).toBe(403);
    // Interactions on another retriever are refused as well.
    expect((await anon('POST', '/v1/public/retrievers/chair-market/interactions', { document_id: 'x', interaction_type: ['CLICK'] }, { 'X-Public-API-Key': key })).status).toBe(403);
    let walked = 0;
    for (const op of operations.values()) {
      if (op.public || op.boundKeys) continue;
      const path = op.path.replace(/\{[^}]+\}/g, 'x');
      for (const namespace of ['mine', 'storefront']) {
        const res = await t().request(op.method.toUpperCase(), path, { key, headers: { 'X-Namespace': namespace } });
        expect(res.status, `${op.method} ${op.path}: ${res.text}`).toBe(403);
        expect(res.body.error.message).toContain('marketplace key (sk_marketplace_) can only execute');
      }
      walked += 1;
    }
    expect(walked).toBeGreaterThan(50);
    for (const path of ['/v1/buckets', '/v1/retrievers']) {
      expect((await t().request('GET', path, { key, headers: { 'X-Namespace': 'mine' } })).status).toBe(403);
    }
    // GET /v1/me works for every valid key: it says what this one is for, and nothing of the publisher.
    const me = await t().request('GET', '/v1/me', { key, headers: { 'X-Namespace': 'mine' } });
    expect(me.status, me.text).toBe(200);
    expect(Object.keys(me.body).sort()).toEqual(['bound_retriever', 'key']);
    expect(me.body.key).toMatchObject({ key_type: 'marketplace', key_prefix: expect.stringMatching(/^sk_marketp/) });
    expect(me.body.bound_retriever).toMatchObject({ kind: 'marketplace', public_name: 'lamp-market' });
    expect(me.text).not.toMatch(/ret_[0-9a-z]|org_|usr_/);
  });

  it('works only while the retriever is published and listed', async () => {
    const key = await currentLampKey();
    expect((await f.api('PATCH', '/v1/retrievers/lamps/publish', { marketplace_listed: false })).status).toBe(200);
    const delisted = await execute('lamp-market', key);
    expect(delisted.status).toBe(403);
    expect(delisted.body.error.message).toContain('no longer listed');
    expect((await executeAlone(key)).status).toBe(403);
    expect((await sub('GET', '/v1/marketplace/subscriptions')).body.results[0]).toMatchObject({ public_name: 'lamp-market', available: false });
    expect((await f.api('PATCH', '/v1/retrievers/lamps/publish', { marketplace_listed: true, active: false })).status).toBe(200);
    expect((await executeAlone(key)).status).toBe(404);
    expect((await f.api('PATCH', '/v1/retrievers/lamps/publish', { active: true })).status).toBe(200);
    expect((await executeAlone(key)).status).toBe(200);
  });

  it('unsubscribing revokes the key at once; keys never show in any list', async () => {
    const key = await currentLampKey();
    const listed = await sub('GET', '/v1/marketplace/subscriptions');
    ownerResponses.push(listed);
    const lamp = listed.body.results.find((s: { public_name: string }) => s.public_name === 'lamp-market');
    // Another organization cannot cancel it.
    expect((await t().request('DELETE', `/v1/marketplace/subscriptions/${lamp.subscription_id}`, { key: t().adminKey })).status).toBe(404);
    expect((await executeAlone(key)).status).toBe(200);
    const cancelled = await sub('DELETE', `/v1/marketplace/subscriptions/${lamp.subscription_id}`);
    expect(cancelled.status, cancelled.text).toBe(200);
    expect(cancelled.body).toMatchObject({ status: 'cancelled', key_status: 'revoked', available: false, cancelled_by: subscriberEmail, cancel_reason: 'unsubscribed' });
    ownerResponses.push(cancelled);
    expect((await executeAlone(key)).status).toBe(401);
    expect((await execute('lamp-market', key)).status).toBe(401);
    expect((await sub('DELETE', `/v1/marketplace/subscriptions/${lamp.subscription_id}`)).status).toBe(404);
    const active = await sub('GET', '/v1/marketplace/subscriptions');
    expect(active.body.results.map((s: { subscription_id: string }) => s.subscription_id)).not.toContain(lamp.subscription_id);
    const all = await sub('GET', '/v1/marketplace/subscriptions?include_cancelled=true');
    expect(all.body.results.find((s: { subscription_id: string }) => s.subscription_id === lamp.subscription_id)).toMatchObject({ status: 'cancelled' });
    ownerResponses.push(active, all);
    // A new subscription after cancelling gives a new key.
    const again = await subscribe('lamp-market');
    expect(again.status).toBe(201);
    expect(again.body.key).not.toBe(key);
    f.secrets.add(again.body.key);
    // Nor in the subscriber's key lists.
    ownerResponses.push(await sub('GET', `/v1/organizations/users/${subscriberEmail}/api-keys?include_revoked=true`));
    const userKeys = ownerResponses.at(-1)!;
    expect(userKeys.body.results.map((k: { key_type: string }) => k.key_type)).not.toContain('marketplace');
    const keys = [...f.secrets].filter((s) => s.startsWith('sk_marketplace_'));
    expect(keys.length).toBeGreaterThanOrEqual(3);
    for (const res of ownerResponses.filter((r) => r !== again && r.status === 200)) {
      for (const k of keys) expect(res.text).not.toContain(k);
    }
  });

  it("deleting the retriever ends every organization's subscription to it and revokes their keys", async () => {
    const key = await freshKey('chair-market');
    expect((await executeAlone(key)).status).toBe(200);
    const before = (await sub('GET', '/v1/marketplace/subscriptions')).body.results.find((s: { public_name: string }) => s.public_name === 'chair-market');
    expect(before).toMatchObject({ status: 'active', cancel_reason: null, cancelled_by: null });

    const deleted = await f.api('DELETE', '/v1/retrievers/chairs');
    expect(deleted.status, deleted.text).toBe(200);

    // Revoked, not merely pointing at nothing: a key of a deleted retriever is refused as a key.
    expect((await executeAlone(key)).status).toBe(401);
    const active = await sub('GET', '/v1/marketplace/subscriptions');
    expect(active.body.results.map((s: { subscription_id: string }) => s.subscription_id)).not.toContain(before.subscription_id);
    const all = await sub('GET', '/v1/marketplace/subscriptions?include_cancelled=true');
    const ended = all.body.results.find((s: { subscription_id: string }) => s.subscription_id === before.subscription_id);
    expect(ended).toMatchObject({
      status: 'cancelled', cancel_reason: 'retriever_deleted', cancelled_by: null, cancelled_at: expect.any(String), key_status: 'revoked', available: false,
    });
    // The subscriber's audit log says why; the publisher's people are not named there.
    const audit = await sub('GET', `/v1/organizations/audit-log?action=api_key_revoked&resource_id=${before.key_id}`);
    expect(audit.status, audit.text).toBe(200);
    const entry = audit.body.results.find((e: { resource_id: string }) => e.resource_id === before.key_id);
    expect(entry).toMatchObject({ changes: { reason: 'marketplace_retriever_deleted', subscription_id: before.subscription_id } });
    expect(JSON.stringify(entry)).not.toContain(t().adminEmail);
    // The catalog no longer offers it; the other subscriptions are untouched.
    expect((await subscribe('chair-market')).status).toBe(404);
    expect((await sub('GET', '/v1/marketplace/subscriptions')).body.results.map((s: { public_name: string }) => s.public_name)).toContain('lamp-market');
  });

  it('never shows a secret in a public response', () => {
    for (const res of publicResponses) {
      for (const secret of f.secrets) expect(res.text, `${secret} in a public response`).not.toContain(secret);
    }
  });

  async function currentLampKey(): Promise<string> {
    lampKey ??= await freshKey('lamp-market');
    return lampKey;
  }
  let lampKey: string | undefined;
  async function freshKey(name: string): Promise<string> {
    const subscriptions = await sub('GET', '/v1/marketplace/subscriptions');
    const existing = subscriptions.body.results.find((s: { public_name: string }) => s.public_name === name);
    if (existing) await sub('DELETE', `/v1/marketplace/subscriptions/${existing.subscription_id}`);
    const res = await subscribe(name, name === 'lamp-market' ? { allowed_origins: ['https://buyer.example.com'] } : undefined);
    expect(res.status, res.text).toBe(201);
    f.secrets.add(res.body.key);
    return res.body.key as string;
  }
});
