/**
 * Bring your own vectors: documents written directly into a collection, with vectors by feature name,
 * one at a time or 1000 per request, all or none, idempotent by key, owned like objects; batches never
 * remove them.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { VectorIndex } from '../../../../kernel/tokens.js';
import { featureIndexName } from '../../../../kernel/vectors/naming.js';
import { startTestKernel, type TestKernel } from '../../../support/kernel.js';

const DIMS = 384;

/** A deterministic unit vector around one of a few directions, so each document has a findable neighbourhood. */
function vectorFor(i: number): number[] {
  let seed = i * 2654435761 + 1;
  const random = () => ((seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648) - 0.5;
  const v = Array.from({ length: DIMS }, (_, d) => (d % 8 === i % 8 ? 1 : 0) + random() * 0.2);
  const norm = Math.hypot(...v);
  return v.map((x) => x / norm);
}

describe('documents written directly', () => {
  let t: TestKernel;
  let collection: { collection_id: string };
  const users: Record<'alice' | 'bob', string> = {} as never;

  const api = (method: string, path: string, body?: unknown, key = t.adminKey) =>
    t.request(method, path, { key, headers: { 'X-Namespace': 'byo' }, ...(body !== undefined ? { body } : {}) });
  const bulk = (documents: unknown[], key = t.adminKey) => api('POST', '/v1/collections/vecs/documents/bulk', { documents }, key);
  const index = () => featureIndexName(collection.collection_id, 'text_embedding');
  const count = async () => (await api('GET', '/v1/collections/vecs')).body.document_count as number;

  beforeAll(async () => {
    t = await startTestKernel();
    await t.request('POST', '/v1/namespaces', { key: t.adminKey, body: { namespace_name: 'byo' } });
    await api('POST', '/v1/buckets', { bucket_name: 'src' });
    const created = await api('POST', '/v1/collections/create', {
      collection_name: 'vecs',
      source: { type: 'bucket', bucket_id: 'src' },
      feature_extractors: [{ feature_extractor_name: 'text_extractor' }],
    });
    expect(created.status).toBe(201);
    collection = created.body;
    for (const principal of ['alice', 'bob'] as const) {
      const key = await t.request('POST', `/v1/organizations/users/${encodeURIComponent(t.adminEmail)}/api-keys`, {
        key: t.adminKey,
        body: { name: `user-${principal}`, principal_id: principal, permissions: ['read', 'write', 'delete'] },
      });
      expect(key.status).toBe(201);
      users[principal] = key.body.key;
    }
  });
  afterAll(async () => {
    await t.stop();
  });

  it('writes 1000 documents with vectors in one request; they are readable and their vectors findable', async () => {
    const documents = Array.from({ length: 1000 }, (_, i) => ({
      key: `item-${i}`,
      fields: { text: `item number ${i}`, group: i % 8 },
      metadata: { batch: 'first' },
      vectors: { text_embedding: vectorFor(i) },
    }));
    const res = await bulk(documents);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ created: 1000, replaced: 0 });
    expect(res.body.results).toHaveLength(1000);
    expect(res.body.results[7]).toMatchObject({ key: 'item-7', created: true });
    expect(await count()).toBe(1000);

    const one = await api('GET', `/v1/collections/vecs/documents/${res.body.results[7].document_id}`);
    expect(one.status).toBe(200);
    expect(one.body).toMatchObject({ key: 'item-7', fields: { text: 'item number 7', group: 7 }, metadata: { batch: 'first' }, owner_principal: null, grants: [] });

    const vectors = t.kernel.services.get(VectorIndex);
    expect(await vectors.count(index())).toBe(1000);
    const hits = await vectors.search(index(), { vector: vectorFor(42), limit: 5 });
    expect(hits[0]).toMatchObject({ id: res.body.results[42].document_id });
    // The same payload processing writes, so search filters treat both alike.
    expect(hits[0]!.payload).toMatchObject({
      organization_id: expect.any(String),
      namespace_id: expect.any(String),
      collection_id: collection.collection_id,
      document_id: res.body.results[42].document_id,
      owner_principal: null,
      grants: [],
      metadata: { batch: 'first' },
      fields: { text: 'item number 42', group: 2 },
    });
  });

  it('replaces on re-sending: same ids, same count, new fields and vectors', async () => {
    const before = await bulk([{ key: 'item-3', fields: { text: 'renamed' }, vectors: { text_embedding: vectorFor(500) } }]);
    expect(before.status).toBe(200);
    expect(before.body).toMatchObject({ created: 0, replaced: 1, results: [{ key: 'item-3', created: false }] });
    expect(await count()).toBe(1000);
    const id = before.body.results[0].document_id;
    const doc = await api('GET', `/v1/collections/vecs/documents/${id}`);
    expect(doc.body.fields).toEqual({ text: 'renamed' });
    expect(doc.body.metadata).toEqual({});
    const [stored] = await t.kernel.services.get(VectorIndex).get(index(), [id]);
    expect(stored!.vector[0]).toBeCloseTo(vectorFor(500)[0]!, 5);

    const single = await api('POST', '/v1/collections/vecs/documents', { key: 'item-3', fields: { text: 'again' } });
    expect(single.status).toBe(200);
    expect(single.body).toMatchObject({ document_id: id, key: 'item-3', fields: { text: 'again' } });
    // Left out on a replacement, a feature's vector goes.
    expect(await t.kernel.services.get(VectorIndex).get(index(), [id])).toEqual([]);
    expect(await count()).toBe(1000);

    const fresh = await api('POST', '/v1/collections/vecs/documents', { fields: { text: 'no key' } });
    expect(fresh.status).toBe(201);
    expect(fresh.body.key).toBeNull();
    const byId = await api('POST', '/v1/collections/vecs/documents', { document_id: fresh.body.document_id, fields: { text: 'replaced by id' } });
    expect(byId.status).toBe(200);
    expect(byId.body).toMatchObject({ document_id: fresh.body.document_id, fields: { text: 'replaced by id' } });
    expect(await count()).toBe(1001);
  });

  it('refuses a vector of the wrong size with a 422 naming the index, and writes nothing of the request', async () => {
    const documents = [
      { key: 'ok-1', vectors: { text_embedding: vectorFor(1) } },
      { key: 'bad', vectors: { text_embedding: [0.1, 0.2, 0.3] } },
      { key: 'ok-2', vectors: { text_embedding: vectorFor(2) } },
      { key: 'stray', vectors: { image_embedding: [1] } },
      { key: 'ok-1' },
    ];
    const res = await bulk(documents);
    expect(res.status).toBe(422);
    const problems = res.body.detail as Array<{ loc: Array<string | number>; msg: string; type: string }>;
    expect(problems).toContainEqual(
      expect.objectContaining({ loc: ['body', 'documents', 1, 'vectors', 'text_embedding'], type: 'dims_mismatch', msg: expect.stringContaining(index()) }),
    );
    expect(problems.find((p) => p.type === 'dims_mismatch')!.msg).toContain('expects 384');
    expect(problems).toContainEqual(expect.objectContaining({ loc: ['body', 'documents', 3, 'vectors', 'image_embedding'], type: 'unknown_feature' }));
    expect(problems).toContainEqual(expect.objectContaining({ loc: ['body', 'documents', 4, 'key'], type: 'duplicate' }));
    // Named twice, once by key and once by id, is the same document twice.
    const item9 = (await api('POST', '/v1/collections/vecs/documents/list', { filters: { AND: [{ field: 'text', operator: 'eq', value: 'item number 9' }] } })).body.results[0];
    const twice = await bulk([{ key: 'item-9', fields: {} }, { document_id: item9.document_id, fields: {} }]);
    expect(twice.status).toBe(422);
    expect(twice.body.detail).toEqual([expect.objectContaining({ loc: ['body', 'documents', 1, 'document_id'], type: 'duplicate' })]);
    expect(await count()).toBe(1001);
    const listed = await api('POST', '/v1/collections/vecs/documents/list', { filters: { AND: [{ field: 'text', operator: 'eq', value: 'never' }] } });
    expect(listed.body.results).toEqual([]);
    expect(await t.kernel.services.get(VectorIndex).count(index())).toBe(999);

    const huge = await api('POST', '/v1/collections/vecs/documents', { key: 'huge', vectors: { text_embedding: vectorFor(5).map((v, i) => (i === 0 ? 1e39 : v)) } });
    expect(huge.status).toBe(422);
    expect(huge.body.detail[0]).toMatchObject({ loc: ['body', 'vectors', 'text_embedding'], type: 'not_float32' });
    const zero = await api('POST', '/v1/collections/vecs/documents', { key: 'zero', vectors: { text_embedding: new Array(384).fill(0) } });
    expect(zero.body.detail[0]).toMatchObject({ type: 'zero_vector' });

    const single = await api('POST', '/v1/collections/vecs/documents', { key: 'bad', vectors: { text_embedding: [1, 2] } });
    expect(single.status).toBe(422);
    expect(single.body.detail[0].loc).toEqual(['body', 'vectors', 'text_embedding']);
  });

  it('answers odd documents with a 4xx, never a 5xx', async () => {
    const odd: unknown[] = [
      { vectors: { text_embedding: 'x' } },
      { vectors: { text_embedding: [[1]] } },
      { vectors: { text_embedding: [] } },
      { vectors: { text_embedding: [1, 'a'] } },
      { vectors: Object.fromEntries(Array.from({ length: 40 }, (_, i) => [`f${i}`, [1]])) },
      { key: '' },
      { document_id: 'bulk' },
      { document_id: 'doc_x', key: 'both' },
      { grants: ['a', 'a'] },
      { owner_principal: '' },
      { fields: { text_embedding: [1, 2] } },
      { key: 'k', extra: true },
    ];
    for (const document of odd) {
      const res = await bulk([document]);
      expect([400, 422], JSON.stringify(document)).toContain(res.status);
    }
    expect((await api('POST', '/v1/collections/vecs/documents/bulk', { documents: [] })).status).toBeGreaterThanOrEqual(400);
    expect((await api('POST', '/v1/collections/vecs/documents/bulk', { documents: Array.from({ length: 1001 }, () => ({})) })).status).toBe(422);
  });

  it('refuses naming a document that does not exist', async () => {
    const unknown = await api('POST', '/v1/collections/vecs/documents', { document_id: 'doc_doesNotExist0000000', fields: {} });
    expect(unknown.status).toBe(422);
    expect(unknown.body.detail[0]).toMatchObject({ loc: ['body', 'document_id'], type: 'unknown_document' });
  });

  it('gives a user-scoped key its own principal as owner, and keeps others out', async () => {
    const mine = await bulk([{ key: 'alice-note', fields: { text: 'alice' }, vectors: { text_embedding: vectorFor(3) } }], users.alice);
    expect(mine.status).toBe(200);
    const id = mine.body.results[0].document_id;
    const read = await api('GET', `/v1/collections/vecs/documents/${id}`, undefined, users.alice);
    expect(read.body).toMatchObject({ owner_principal: 'alice', grants: [] });
    const [stored] = await t.kernel.services.get(VectorIndex).get(index(), [id]);
    expect(stored!.payload.owner_principal).toBe('alice');

    expect((await api('GET', `/v1/collections/vecs/documents/${id}`, undefined, users.bob)).status).toBe(404);
    expect((await api('GET', '/v1/collections/vecs/documents', undefined, users.bob)).body.results).toEqual([]);
    // Bob cannot take over alice's key, nor write for alice.
    const takeover = await bulk([{ key: 'alice-note', fields: { text: 'bob was here' } }], users.bob);
    expect(takeover.status).toBe(422);
    expect(takeover.body.detail[0]).toMatchObject({ loc: ['body', 'documents', 0, 'key'], type: 'not_yours' });
    expect((await bulk([{ key: 'for-alice', owner_principal: 'alice' }], users.bob)).status).toBe(403);
    expect((await api('GET', `/v1/collections/vecs/documents/${id}`)).body.fields).toEqual({ text: 'alice' });

    // Alice replacing her own document keeps her the owner; a write key may name an owner.
    expect((await bulk([{ key: 'alice-note', fields: { text: 'alice v2' } }], users.alice)).status).toBe(200);
    expect((await api('GET', `/v1/collections/vecs/documents/${id}`)).body).toMatchObject({ owner_principal: 'alice', fields: { text: 'alice v2' } });
    const filed = await api('POST', '/v1/collections/vecs/documents', { key: 'filed', owner_principal: 'bob', fields: { text: 'for bob' } });
    expect(filed.body.owner_principal).toBe('bob');
    const bobSees = await api('POST', '/v1/collections/vecs/documents/list', {}, users.bob);
    expect(bobSees.body.results.map((d: { key: string }) => d.key)).toEqual(['filed']);
    // Deleting by filter reaches only what the key may see.
    const deleted = await api('POST', '/v1/collections/vecs/documents/delete', { filters: { AND: [{ field: 'text', operator: 'eq', value: 'alice v2' }] } }, users.bob);
    expect(deleted.body.deleted).toBe(0);
  });

  it('never loses directly written documents to batch processing (replace handling included)', async () => {
    // A bucket of its own: the text collection on 'src' would need inference workers.
    await api('POST', '/v1/buckets', { bucket_name: 'plainsrc' });
    const plain = await api('POST', '/v1/collections/create', {
      collection_name: 'plain',
      source: { type: 'bucket', bucket_id: 'plainsrc' },
      feature_extractors: [{ feature_extractor_name: 'passthrough_extractor', document_output_handling: 'replace' }],
    });
    expect(plain.status).toBe(201);
    const direct = await api('POST', '/v1/collections/plain/documents/bulk', {
      documents: [{ key: 'mine-1', fields: { note: 1 } }, { key: 'mine-2', fields: { note: 2 } }],
    });
    expect(direct.status).toBe(200);
    const object = await api('POST', '/v1/buckets/plainsrc/objects', { key: 'a.txt', blobs: [{ property: 'content', text: 'hello' }] });
    expect(object.status).toBe(201);
    for (let run = 0; run < 2; run++) {
      const batch = await api('POST', '/v1/buckets/plainsrc/batches', { object_ids: [object.body.object_id] });
      expect((await api('POST', `/v1/buckets/plainsrc/batches/${batch.body.batch_id}/submit`)).status).toBe(202);
      await expect
        .poll(
          async () => (await api('GET', `/v1/buckets/plainsrc/batches/${batch.body.batch_id}`)).body.status,
          { timeout: 60_000, interval: 200 },
        )
        .toMatch(/^COMPLETED/);
    }
    const docs = (await api('POST', '/v1/collections/plain/documents/list', { limit: 100 })).body.results as Array<{
      document_id: string;
      key: string | null;
      root_object_id: string | null;
    }>;
    expect(docs.map((d) => d.key).sort()).toEqual(['mine-1', 'mine-2', null]);
    expect((await api('GET', '/v1/collections/plain')).body.document_count).toBe(3);

    // What processing made belongs to processing: it cannot be replaced by a direct write.
    const processed = docs.find((d) => d.root_object_id === object.body.object_id)!;
    const refused = await api('POST', '/v1/collections/plain/documents', { document_id: processed.document_id, fields: {} });
    expect(refused.status).toBe(422);
    expect(refused.body.detail[0]).toMatchObject({ loc: ['body', 'document_id'], type: 'not_direct' });
  });
});
