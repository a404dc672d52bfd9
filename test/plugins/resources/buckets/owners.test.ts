/**
 * Objects follow the documents' principal rule: a user-scoped (`usr_sk_`) key creates objects owned by
 * its principal and sees (lists, gets, downloads, changes) only those; other keys see every object and
 * may name an owner.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestKernel, type TestKernel } from '../../../support/kernel.js';

describe('object owners', () => {
  let t: TestKernel;
  const ns = 'owners_ns';
  const keys: Record<'alice' | 'bob', string> = {} as never;
  const objects: Record<'alice' | 'bob' | 'forAlice', string> = {} as never;

  const api = (key: string, method: string, path: string, body?: unknown) =>
    t.request(method, path, { key, headers: { 'X-Namespace': ns }, ...(body !== undefined ? { body } : {}) });
  const create = async (key: string, text: string, extra: Record<string, unknown> = {}) => {
    const res = await api(key, 'POST', '/v1/buckets/files/objects', { blobs: [{ property: 'content', text }], ...extra });
    expect(res.status).toBe(201);
    return res.body as { object_id: string; owner_principal: string | null };
  };
  const listed = async (key: string) => {
    const res = await api(key, 'GET', '/v1/buckets/files/objects');
    expect(res.status).toBe(200);
    return (res.body.results as Array<{ object_id: string }>).map((o) => o.object_id).sort();
  };

  beforeAll(async () => {
    t = await startTestKernel();
    await t.request('POST', '/v1/namespaces', { key: t.adminKey, body: { namespace_name: ns } });
    await api(t.adminKey, 'POST', '/v1/buckets', { bucket_name: 'files' });
    for (const principal of ['alice', 'bob'] as const) {
      const res = await t.request('POST', `/v1/organizations/users/${encodeURIComponent(t.adminEmail)}/api-keys`, {
        key: t.adminKey,
        body: { name: `user-${principal}`, principal_id: principal },
      });
      expect(res.status).toBe(201);
      expect(res.body.key).toMatch(/^usr_sk_/);
      keys[principal] = res.body.key;
    }
    const alice = await create(keys.alice, 'alice private notes');
    expect(alice.owner_principal).toBe('alice');
    objects.alice = alice.object_id;
    objects.bob = (await create(keys.bob, 'bob private notes')).object_id;
    const forAlice = await create(t.adminKey, 'filed for alice', { owner_principal: 'alice' });
    expect(forAlice.owner_principal).toBe('alice');
    objects.forAlice = forAlice.object_id;
  });
  afterAll(async () => {
    await t.stop();
  });

  it('lists only the objects the key\'s principal owns; the admin key lists all', async () => {
    expect(await listed(keys.alice)).toEqual([objects.alice, objects.forAlice].sort());
    expect(await listed(keys.bob)).toEqual([objects.bob]);
    expect(await listed(t.adminKey)).toEqual([objects.alice, objects.bob, objects.forAlice].sort());
    const searched = await api(keys.bob, 'POST', '/v1/buckets/files/objects/list', {});
    expect(searched.status).toBe(200);
    expect(searched.body.results.map((o: { object_id: string }) => o.object_id)).toEqual([objects.bob]);
  });

  it('cannot get, download, change or delete another principal\'s object (404), but can its own', async () => {
    expect((await api(keys.bob, 'GET', `/v1/buckets/files/objects/${objects.alice}`)).status).toBe(404);
    expect((await api(keys.bob, 'PATCH', `/v1/buckets/files/objects/${objects.alice}`, { metadata: { taken: true } })).status).toBe(404);
    expect((await api(keys.bob, 'DELETE', `/v1/buckets/files/objects/${objects.alice}`)).status).toBe(404);
    const listedWithUrls = await api(keys.bob, 'GET', '/v1/buckets/files/objects?return_presigned_urls=true');
    expect(listedWithUrls.body.results.every((o: { owner_principal: string }) => o.owner_principal === 'bob')).toBe(true);

    const own = await api(keys.alice, 'GET', `/v1/buckets/files/objects/${objects.alice}`);
    expect(own.status).toBe(200);
    expect(await (await fetch(own.body.blobs[0].url)).text()).toBe('alice private notes');
    expect((await api(t.adminKey, 'GET', `/v1/buckets/files/objects/${objects.alice}`)).status).toBe(200);
  });

  it('cannot put another principal\'s object into a batch: to it that id is unknown (400)', async () => {
    const foreign = await api(keys.bob, 'POST', '/v1/buckets/files/batches', { object_ids: [objects.alice] });
    expect(foreign.status).toBe(400);
    expect(foreign.body.error.details.missing_object_ids).toEqual([objects.alice]);
    const own = await api(keys.bob, 'POST', '/v1/buckets/files/batches', { object_ids: [objects.bob] });
    expect(own.status).toBe(201);
    const added = await api(keys.bob, 'POST', `/v1/buckets/files/batches/${own.body.batch_id}/objects`, { object_ids: [objects.forAlice] });
    expect(added.status).toBe(400);
    expect((await api(t.adminKey, 'POST', '/v1/buckets/files/batches', { object_ids: [objects.alice, objects.bob] })).status).toBe(201);
  });

  it('refuses a user-scoped key naming another owner (403); its own name is fine', async () => {
    const res = await api(keys.bob, 'POST', '/v1/buckets/files/objects', { blobs: [{ property: 'content', text: 'x' }], owner_principal: 'alice' });
    expect(res.status).toBe(403);
    const bulk = await api(keys.bob, 'POST', '/v1/buckets/files/objects/bulk', { objects: [{ owner_principal: 'alice' }] });
    expect(bulk.status).toBe(403);
    expect((await create(keys.bob, 'mine', { owner_principal: 'bob' })).owner_principal).toBe('bob');
  });

  it('gives documents made from an object the object\'s owner, so each principal reads only its own', async () => {
    const collection = await api(t.adminKey, 'POST', '/v1/collections/create', {
      collection_name: 'owned-docs',
      source: { type: 'bucket', bucket_id: 'files' },
      feature_extractors: [{ feature_extractor_name: 'passthrough_extractor' }],
    });
    expect(collection.status).toBe(201);
    const batch = await api(t.adminKey, 'POST', '/v1/buckets/files/batches', { object_ids: [objects.alice, objects.bob] });
    expect(batch.status).toBe(201);
    expect((await api(t.adminKey, 'POST', `/v1/buckets/files/batches/${batch.body.batch_id}/submit`)).status).toBe(202);
    await expect
      .poll(async () => (await api(t.adminKey, 'GET', `/v1/buckets/files/batches/${batch.body.batch_id}`)).body.status, { timeout: 60_000, interval: 200 })
      .toMatch(/^COMPLETED/);
    const owners = async (key: string) =>
      ((await api(key, 'POST', '/v1/collections/owned-docs/documents/list', { limit: 100 })).body.results as Array<{ owner_principal: string | null }>)
        .map((d) => d.owner_principal);
    expect(await owners(keys.alice)).toEqual(['alice']);
    expect(await owners(keys.bob)).toEqual(['bob']);
    expect((await owners(t.adminKey)).sort()).toEqual(['alice', 'bob']);
  });

  it('keeps uploads to their owner: another principal cannot see or confirm them', async () => {
    const upload = await api(keys.alice, 'POST', '/v1/buckets/files/uploads', { filename: 'a.txt' });
    expect(upload.status).toBe(201);
    const id = upload.body.upload_id as string;
    expect((await fetch(upload.body.presigned_url, { method: 'PUT', body: 'alice upload' })).status).toBe(200);
    expect((await api(keys.bob, 'GET', `/v1/buckets/files/uploads/${id}`)).status).toBe(404);
    expect((await api(keys.bob, 'POST', `/v1/buckets/files/uploads/${id}/confirm`, {})).status).toBe(404);
    expect((await api(keys.bob, 'GET', '/v1/buckets/files/uploads')).body.results).toEqual([]);
    const confirmed = await api(keys.alice, 'POST', `/v1/buckets/files/uploads/${id}/confirm`, {});
    expect(confirmed.status).toBe(200);
    const object = await api(keys.alice, 'GET', `/v1/buckets/files/objects/${confirmed.body.object_id}`);
    expect(object.body.owner_principal).toBe('alice');
    expect((await api(keys.bob, 'GET', `/v1/buckets/files/objects/${confirmed.body.object_id}`)).status).toBe(404);
  });
});
