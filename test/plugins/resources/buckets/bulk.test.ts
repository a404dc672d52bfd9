/** Creating many objects in one request: all or none, problems located by index, keys unique. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Stores } from '../../../../plugins/resources/buckets/index.js';
import { startTestKernel, type TestKernel } from '../../../support/kernel.js';

describe('bulk object creation', () => {
  let t: TestKernel;
  const api = (method: string, p: string, body?: unknown) =>
    t.request(method, p, { key: t.adminKey, headers: { 'X-Namespace': 'bulk' }, ...(body !== undefined ? { body } : {}) });
  const count = async () => (await api('GET', '/v1/buckets/many')).body.object_count;

  beforeAll(async () => {
    t = await startTestKernel();
    expect((await t.client().POST('/v1/namespaces', { body: { namespace_name: 'bulk' } })).response.status).toBe(201);
    expect(
      (await api('POST', '/v1/buckets', { bucket_name: 'many', schema: { properties: { lang: { type: 'string' }, content: { type: 'text' } } } })).status,
    ).toBe(201);
  });
  afterAll(async () => {
    await t.stop();
  });

  it('creates every object in request order, with sniffed blobs and bucket totals', async () => {
    const res = await api('POST', '/v1/buckets/many/objects/bulk', {
      objects: [
        { key: 'a.txt', metadata: { lang: 'en' }, blobs: [{ property: 'content', text: 'hello' }] },
        { key: 'b.txt', blobs: [{ property: 'content', text: 'bonjour' }] },
        { metadata: { lang: 'de' } },
      ],
    });
    expect(res.status).toBe(201);
    expect(res.body.created).toBe(3);
    expect(res.body.results.map((o: { key: string }) => o.key).slice(0, 2)).toEqual(['a.txt', 'b.txt']);
    expect(res.body.results[2].key).toBe(res.body.results[2].object_id);
    expect(res.body.results[0].blobs[0]).toMatchObject({ property: 'content', size_bytes: 5 });
    const fetched = await api('GET', `/v1/buckets/many/objects/${res.body.results[1].object_id}`);
    expect(fetched.status).toBe(200);
    expect(await count()).toBe(3);
    expect((await api('GET', '/v1/buckets/many')).body.total_size_bytes).toBe(5 + 7);
  });

  it('stores nothing when a key is taken between the check and the insert', async () => {
    const { objects } = t.kernel.services.get(Stores);
    const before = (await api('GET', '/v1/buckets/many')).body;
    const keysTaken = objects.keysTaken.bind(objects);
    // Another request took 'a.txt' after this one looked: the insert itself meets the unique key.
    objects.keysTaken = async () => [];
    try {
      const res = await api('POST', '/v1/buckets/many/objects/bulk', {
        objects: [{ key: 'fresh.txt', blobs: [{ property: 'content', text: 'fresh' }] }, { key: 'a.txt', blobs: [{ property: 'content', text: 'again' }] }],
      });
      expect(res.status).toBe(409);
      expect(JSON.stringify(res.body)).toMatch(/taken by another request/);
    } finally {
      objects.keysTaken = keysTaken;
    }
    const after = (await api('GET', '/v1/buckets/many')).body;
    expect([after.object_count, after.total_size_bytes]).toEqual([before.object_count, before.total_size_bytes]);
    expect((await api('POST', '/v1/buckets/many/objects/list', { filters: { AND: [{ field: 'key', operator: 'eq', value: 'fresh.txt' }] } })).body.results).toEqual([]);
  });

  it('stores nothing when one object is bad, and says which', async () => {
    const before = await count();
    const res = await api('POST', '/v1/buckets/many/objects/bulk', {
      objects: [
        { key: 'ok.txt', blobs: [{ property: 'content', text: 'fine' }] },
        { key: 'bad.txt', metadata: { lang: 7 } },
      ],
    });
    expect(res.status).toBe(422);
    expect(res.body.detail.some((d: { loc: unknown[] }) => d.loc[0] === 'body' && d.loc[1] === 'objects' && d.loc[2] === 1)).toBe(true);
    expect(await count()).toBe(before);
    expect((await api('POST', '/v1/buckets/many/objects/list', { filters: { AND: [{ field: 'key', operator: 'eq', value: 'ok.txt' }] } })).body.results).toEqual([]);
  });

  it('refuses keys given twice or already taken, and uploads, with nothing stored', async () => {
    const before = await count();
    const twice = await api('POST', '/v1/buckets/many/objects/bulk', { objects: [{ key: 'x' }, { key: 'x' }] });
    expect(twice.status).toBe(409);
    const taken = await api('POST', '/v1/buckets/many/objects/bulk', { objects: [{ key: 'new.txt' }, { key: 'a.txt' }] });
    expect(taken.status).toBe(409);
    const upload = await api('POST', '/v1/buckets/many/objects/bulk', { objects: [{ blobs: [{ property: 'content', upload_id: 'upl_x' }] }] });
    expect(upload.status).toBe(422);
    expect((await api('POST', '/v1/buckets/many/objects/bulk', { objects: [] })).status).toBe(422);
    expect(await count()).toBe(before);
  });
});
