/**
 * Grants: an owner's key (or a key that is not user-scoped) lets other principals read a document;
 * grants survive reprocessing, follow the derivation chain to documents made from it, and reach the
 * payload beside the document's vectors.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { VectorIndex } from '../../../../kernel/tokens.js';
import { featureIndexName } from '../../../../kernel/vectors/naming.js';
import { startTestKernel, type TestKernel } from '../../../support/kernel.js';

type Principal = 'alice' | 'bob' | 'carol';

describe('document grants', () => {
  let t: TestKernel;
  const keys: Record<Principal, string> = {} as never;
  let objectId: string;
  let page: { document_id: string };

  const api = (method: string, path: string, body?: unknown, key = t.adminKey) =>
    t.request(method, path, { key, headers: { 'X-Namespace': 'grants' }, ...(body !== undefined ? { body } : {}) });

  async function processObject(): Promise<void> {
    const batch = await api('POST', '/v1/buckets/files/batches', { object_ids: [objectId] });
    expect(batch.status).toBe(201);
    expect((await api('POST', `/v1/buckets/files/batches/${batch.body.batch_id}/submit`)).status).toBe(202);
    // A loop, not expect.poll: this also runs in beforeAll.
    for (let i = 0; i < 300; i++) {
      const status = (await api('GET', `/v1/buckets/files/batches/${batch.body.batch_id}`)).body.status as string;
      if (status === 'COMPLETED') return;
      if (['COMPLETED_WITH_ERRORS', 'FAILED', 'CANCELED'].includes(status)) throw new Error(`batch ended ${status}`);
      await new Promise((r) => setTimeout(r, 200));
    }
    throw new Error('batch did not finish');
  }

  beforeAll(async () => {
    t = await startTestKernel();
    await t.request('POST', '/v1/namespaces', { key: t.adminKey, body: { namespace_name: 'grants' } });
    await api('POST', '/v1/buckets', { bucket_name: 'files' });
    for (const principal of ['alice', 'bob', 'carol'] as const) {
      const res = await t.request('POST', `/v1/organizations/users/${encodeURIComponent(t.adminEmail)}/api-keys`, {
        key: t.adminKey,
        body: { name: `user-${principal}`, principal_id: principal, permissions: ['read', 'write'] },
      });
      expect(res.status).toBe(201);
      keys[principal] = res.body.key;
    }
    const collection = await api('POST', '/v1/collections/create', {
      collection_name: 'pages',
      source: { type: 'bucket', bucket_id: 'files' },
      feature_extractors: [{ feature_extractor_name: 'passthrough_extractor' }],
    });
    expect(collection.status).toBe(201);
    const object = await api('POST', '/v1/buckets/files/objects', { blobs: [{ property: 'content', text: 'alice diary' }], owner_principal: 'alice' });
    expect(object.status).toBe(201);
    objectId = object.body.object_id;
    await processObject();
    page = (await api('GET', '/v1/collections/pages/documents')).body.results[0];
  });
  afterAll(async () => {
    await t.stop();
  });

  it('lets a granted principal read the document; revoking takes it back', async () => {
    const path = `/v1/collections/pages/documents/${page.document_id}`;
    expect((await api('GET', path, undefined, keys.bob)).status).toBe(404);
    // Only the owner's keys (or keys that are not user-scoped) grant; others do not even see it.
    expect((await api('POST', `${path}/grants`, { principal_ids: ['bob'] }, keys.carol)).status).toBe(404);

    const granted = await api('POST', `${path}/grants`, { principal_ids: ['bob', 'dave'] }, keys.alice);
    expect(granted.status).toBe(200);
    expect(granted.body).toEqual({ document_id: page.document_id, owner_principal: 'alice', grants: ['bob', 'dave'], derived_documents: 0 });
    const seen = await api('GET', path, undefined, keys.bob);
    expect(seen.status).toBe(200);
    expect(seen.body.owner_principal).toBe('alice');
    // Who else was granted is the owner's business.
    expect(seen.body.grants).toBeUndefined();
    expect((await api('GET', '/v1/collections/pages/documents', undefined, keys.bob)).body.results).toHaveLength(1);
    expect((await api('POST', `${path}/grants`, { principal_ids: ['carol'] }, keys.bob)).status).toBe(403);

    const revoked = await api('DELETE', `${path}/grants/dave`, undefined, keys.alice);
    expect(revoked.status).toBe(200);
    expect(revoked.body.grants).toEqual(['bob']);
    expect((await api('DELETE', `${path}/grants/nobody`)).body.grants).toEqual(['bob']);
    expect((await api('DELETE', `${path}/grants/bob`)).body.grants).toEqual([]);
    expect((await api('GET', path, undefined, keys.bob)).status).toBe(404);
    expect((await api('POST', '/v1/collections/pages/documents/list', {}, keys.bob)).body.results).toEqual([]);
  });

  it('keeps grants through reprocessing and carries owner and grants to derived documents, then follows later changes', async () => {
    const path = `/v1/collections/pages/documents/${page.document_id}`;
    expect((await api('POST', `${path}/grants`, { principal_ids: ['bob'] })).status).toBe(200);
    const summaries = await api('POST', '/v1/collections/create', {
      collection_name: 'summaries',
      source: { type: 'collection', collection_id: 'pages' },
      feature_extractors: [{ feature_extractor_name: 'passthrough_extractor' }],
    });
    expect(summaries.status).toBe(201);
    await processObject();

    expect((await api('GET', path)).body).toMatchObject({ owner_principal: 'alice', grants: ['bob'] });
    const derived = (await api('GET', '/v1/collections/summaries/documents')).body.results;
    expect(derived).toHaveLength(1);
    expect(derived[0]).toMatchObject({ source_document_id: page.document_id, owner_principal: 'alice', grants: ['bob'] });
    expect((await api('GET', '/v1/collections/summaries/documents', undefined, keys.bob)).body.results).toHaveLength(1);
    expect((await api('GET', '/v1/collections/summaries/documents', undefined, keys.carol)).body.results).toEqual([]);

    const more = await api('POST', `${path}/grants`, { principal_ids: ['carol'] }, keys.alice);
    expect(more.body).toMatchObject({ grants: ['bob', 'carol'], derived_documents: 1 });
    expect((await api('GET', '/v1/collections/summaries/documents', undefined, keys.carol)).body.results).toHaveLength(1);
    expect((await api('DELETE', `${path}/grants/bob`, undefined, keys.alice)).body.derived_documents).toBe(1);
    expect((await api('GET', `/v1/collections/summaries/documents/${derived[0].document_id}`)).body.grants).toEqual(['carol']);
    expect((await api('GET', '/v1/collections/summaries/documents', undefined, keys.bob)).body.results).toEqual([]);
  });

  it('puts grants (and metadata) into the payload beside the document\'s vectors', async () => {
    await api('POST', '/v1/buckets', { bucket_name: 'vsrc' });
    const vecs = await api('POST', '/v1/collections/create', {
      collection_name: 'vecs',
      source: { type: 'bucket', bucket_id: 'vsrc' },
      feature_extractors: [{ feature_extractor_name: 'text_extractor' }],
    });
    expect(vecs.status).toBe(201);
    const vector = Array.from({ length: 384 }, (_, i) => (i === 0 ? 1 : 0));
    const written = await api('POST', '/v1/collections/vecs/documents', { key: 'a', fields: { text: 'a' }, vectors: { text_embedding: vector } }, keys.alice);
    expect(written.status).toBe(201);
    const id = written.body.document_id as string;
    expect((await api('POST', `/v1/collections/vecs/documents/${id}/grants`, { principal_ids: ['bob'] }, keys.alice)).status).toBe(200);
    expect((await api('PATCH', `/v1/collections/vecs/documents/${id}`, { metadata: { topic: 'shared' } }, keys.bob)).status).toBe(200);
    const index = featureIndexName(vecs.body.collection_id, 'text_embedding');
    const [stored] = await t.kernel.services.get(VectorIndex).get(index, [id]);
    expect(stored!.payload).toMatchObject({ owner_principal: 'alice', grants: ['bob'], metadata: { topic: 'shared' } });
    expect(stored!.vector[0]).toBeCloseTo(1, 5);
  });
});
