/**
 * A batch over every object of a bucket, or of a key prefix (`prefix` on create and add-objects), through
 * HTTP: the selection, the whole bucket, keys with LIKE wildcards taken literally, the 100,000-object cap, and
 * another namespace's objects (in a bucket of the same name) never included.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DatabaseHandle } from '../../../../kernel/tokens.js';
import { startTestKernel, type TestKernel } from '../../../support/kernel.js';

const KEYS = ['photos/a.jpg', 'photos/b.jpg', 'photos/sub/c.jpg', 'photosX/d.jpg', 'docs/e.txt', '100%_done/f.txt', '100_x/g.txt', '100%Zdone/h.txt'];

describe('batches over a key prefix', () => {
  let t: TestKernel;
  const idOf = new Map<string, string>();

  const api = (method: string, p: string, body?: unknown, namespace = 'pfx') =>
    t.request(method, p, { key: t.adminKey, headers: { 'X-Namespace': namespace }, ...(body !== undefined ? { body } : {}) });

  const keysOf = (objectIds: string[]) => objectIds.map((id) => [...idOf].find(([, v]) => v === id)?.[0] ?? `foreign:${id}`).sort();

  beforeAll(async () => {
    t = await startTestKernel({ config: { runTasks: false } });
    for (const ns of ['pfx', 'other']) {
      expect((await t.client().POST('/v1/namespaces', { body: { namespace_name: ns } })).response.status).toBe(201);
      expect((await api('POST', '/v1/buckets', { bucket_name: 'media' }, ns)).status).toBe(201);
    }
    const created = await api('POST', '/v1/buckets/media/objects/bulk', {
      objects: KEYS.map((key) => ({ key, blobs: [{ property: 'content', text: key }] })),
    });
    expect(created.status, created.text).toBe(201);
    for (const o of created.body.results as Array<{ key: string; object_id: string }>) idOf.set(o.key, o.object_id);
    // The same keys in another namespace's bucket of the same name: never part of this namespace's batches.
    const foreign = await api('POST', '/v1/buckets/media/objects/bulk', { objects: KEYS.map((key) => ({ key, blobs: [{ property: 'content', text: key }] })) }, 'other');
    expect(foreign.status, foreign.text).toBe(201);
  }, 120_000);

  afterAll(async () => {
    await t?.stop();
  });

  it('selects the objects whose key starts with the prefix', async () => {
    const res = await api('POST', '/v1/buckets/media/batches', { prefix: 'photos/' });
    expect(res.status, res.text).toBe(201);
    expect(keysOf(res.body.object_ids)).toEqual(['photos/a.jpg', 'photos/b.jpg', 'photos/sub/c.jpg']);
  });

  it('"" is the whole bucket, and object_ids come along once', async () => {
    const res = await api('POST', '/v1/buckets/media/batches', { prefix: '', object_ids: [idOf.get('docs/e.txt')] });
    expect(res.status, res.text).toBe(201);
    expect(res.body.object_ids).toHaveLength(KEYS.length);
    expect(keysOf(res.body.object_ids)).toEqual([...KEYS].sort());
  });

  it('takes % and _ in the prefix literally', async () => {
    const percent = await api('POST', '/v1/buckets/media/batches', { prefix: '100%_' });
    expect(percent.status, percent.text).toBe(201);
    expect(keysOf(percent.body.object_ids)).toEqual(['100%_done/f.txt']);
    const underscore = await api('POST', '/v1/buckets/media/batches', { prefix: '100_' });
    expect(keysOf(underscore.body.object_ids)).toEqual(['100_x/g.txt']);
    const none = await api('POST', '/v1/buckets/media/batches', { prefix: '%' });
    expect(none.status).toBe(201);
    expect(none.body.object_ids).toEqual([]);
  });

  it('adds a prefix to a DRAFT batch, keeping ids already in it once', async () => {
    const created = await api('POST', '/v1/buckets/media/batches', { object_ids: [idOf.get('photos/a.jpg')] });
    const added = await api('POST', `/v1/buckets/media/batches/${created.body.batch_id}/objects`, { prefix: 'photos' });
    expect(added.status, added.text).toBe(200);
    expect(keysOf(added.body.object_ids)).toEqual(['photos/a.jpg', 'photos/b.jpg', 'photos/sub/c.jpg', 'photosX/d.jpg']);
    const empty = await api('POST', `/v1/buckets/media/batches/${created.body.batch_id}/objects`, {});
    expect(empty.status).toBe(422);
  });

  it('refuses more than 100,000 objects with a 400 that says to split by prefix', async () => {
    // 100,001 objects are written straight into the table (one statement): the cap is what is tested, through HTTP.
    const db = t.kernel.services.get(DatabaseHandle).db;
    const bucket = await db('buckets').where({ bucket_name: 'media' }).whereIn('namespace_id', db('namespaces').select('namespace_id').where({ namespace_name: 'pfx' })).first();
    const now = new Date();
    await db.raw(
      `insert into objects (object_id, organization_id, namespace_id, bucket_id, key, metadata, blobs, size_bytes, created_at, updated_at)
       select 'obj_bulk' || lpad(i::text, 7, '0'), ?, ?, ?, 'bulk/' || lpad(i::text, 7, '0'), '{}'::jsonb, '[]'::jsonb, 0, ?, ?
       from generate_series(1, 100001) as i`,
      [bucket.organization_id, bucket.namespace_id, bucket.bucket_id, now, now],
    );
    const over = await api('POST', '/v1/buckets/media/batches', { prefix: 'bulk/' });
    expect(over.status, over.text).toBe(400);
    expect(over.body.error.message).toMatch(/at most 100000 objects.*split/);
    const fits = await api('POST', '/v1/buckets/media/batches', { prefix: 'bulk/00' });
    expect(fits.status, fits.text).toBe(201);
    expect(fits.body.object_ids).toHaveLength(99_999);
    const added = await api('POST', `/v1/buckets/media/batches/${fits.body.batch_id}/objects`, { prefix: 'bulk/0100000' });
    expect(added.status).toBe(200);
    expect(added.body.object_ids).toHaveLength(100_000);
    const beyond = await api('POST', `/v1/buckets/media/batches/${fits.body.batch_id}/objects`, { prefix: 'photos/' });
    expect(beyond.status).toBe(400);
    expect(beyond.body.error.message).toMatch(/split/);
  }, 120_000);
});
