/**
 * Deleting a namespace deletes everything in it: its retrievers (their publications, whose public names are
 * free again, their history and their keys, revoked), its batches, its collections (documents, vectors, text
 * index) and its buckets (objects, blobs) — through the durable purge task queued with the delete. Until
 * the purge has run, nothing of the namespace is reachable by id either.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BlobStore, DatabaseHandle, TaskQueue, TenantStore, VectorIndex } from '../../../../kernel/tokens.js';
import { featureIndexName } from '../../../../kernel/vectors/naming.js';
import { startTestKernel, type TestKernel } from '../../../support/kernel.js';

const DIMS = 384;
const DISPLAY = { title: 'Lamps', description: 'Lamps for every room', exposed_fields: ['text'] };

function unitVector(i: number): number[] {
  const v = Array.from({ length: DIMS }, (_, d) => (d % 7 === i % 7 ? 1 : 0.01 * ((d * (i + 3)) % 5)));
  const norm = Math.hypot(...v);
  return v.map((x) => x / norm);
}

describe('deleting a namespace deletes what it holds', () => {
  let t: TestKernel;

  const api = (method: string, path: string, namespace: string | undefined, body?: unknown, key = t.adminKey) =>
    t.request(method, path, { key, ...(namespace ? { headers: { 'X-Namespace': namespace } } : {}), ...(body !== undefined ? { body } : {}) });
  const rows = async (table: string, where: Record<string, string>) => (await t.kernel.services.get(DatabaseHandle).db(table).where(where).count('* as n'))[0]!.n;

  /** A namespace with a bucket and an object, a collection with documents and vectors, a published retriever with a key, and a batch. */
  async function populate(name: string, publicName: string) {
    expect((await api('POST', '/v1/namespaces', undefined, { namespace_name: name })).status).toBe(201);
    expect((await api('POST', '/v1/buckets', name, { bucket_name: 'b' })).status).toBe(201);
    const object = await api('POST', '/v1/buckets/b/objects', name, { key: 'o1', blobs: [{ property: 'content', text: 'a lamp' }] });
    expect(object.status, object.text).toBe(201);
    const collection = await api('POST', '/v1/collections/create', name, {
      collection_name: 'c', source: { type: 'bucket', bucket_id: 'b' }, feature_extractors: [{ feature_extractor_name: 'text_extractor' }],
    });
    expect(collection.status, collection.text).toBe(201);
    const documents = Array.from({ length: 5 }, (_, i) => ({ key: `d${i}`, fields: { text: `lamp ${i}` }, vectors: { text_embedding: unitVector(i) } }));
    expect((await api('POST', '/v1/collections/c/documents/bulk', name, { documents })).status).toBe(200);
    const retriever = await api('POST', '/v1/retrievers', name, {
      retriever_name: 'r',
      collection_identifiers: ['c'],
      input_schema: { vector: { type: 'array', required: true } },
      stages: [{ stage_name: 'search', stage_type: 'filter', config: { stage_id: 'feature_search', parameters: {
        searches: [{ feature_uri: 'tessera://text_extractor@1.0/text_embedding', query: { vector: '{{inputs.vector}}' }, top_k: 3 }] } } }],
    });
    expect(retriever.status, retriever.text).toBe(201);
    const published = await api('POST', '/v1/retrievers/r/publish', name, { public_name: publicName, display_config: DISPLAY });
    expect(published.status, published.text).toBe(201);
    const key = await api('POST', '/v1/retrievers/r/api-keys', name, { name: 'site' });
    expect(key.status, key.text).toBe(201);
    const batch = await api('POST', '/v1/buckets/b/batches', name, { object_ids: [object.body.object_id] });
    expect(batch.status, batch.text).toBe(201);
    const execute = await t.request('POST', `/v1/public/retrievers/${publicName}/execute`, { body: { inputs: { vector: unitVector(1) } } });
    expect(execute.status, execute.text).toBe(200);
    return {
      namespaceId: (await api('GET', `/v1/namespaces/${name}`, undefined)).body.namespace_id as string,
      bucketId: object.body.bucket_id as string,
      collectionId: collection.body.collection_id as string,
      retrieverId: retriever.body.retriever.retriever_id as string,
      keyId: key.body.key_id as string,
      batchId: batch.body.batch_id as string,
    };
  }

  /** Runs queued tasks until the namespace's purge task has completed. */
  async function purged(namespaceId: string): Promise<void> {
    const tasks = t.kernel.services.get(TaskQueue);
    const db = t.kernel.services.get(DatabaseHandle).db;
    for (let i = 0; i < 200; i++) {
      await tasks.drain();
      const task = await db('tasks').where({ type: 'namespaces.purge' }).whereRaw("payload->>'namespace_id' = ?", [namespaceId]).first();
      if (task?.status === 'COMPLETED') return;
      await new Promise((r) => setTimeout(r, 20));
    }
    throw new Error('the namespace purge did not complete');
  }

  beforeAll(async () => {
    t = await startTestKernel({ config: { runTasks: false } });
  }, 120_000);
  afterAll(async () => {
    await t?.stop();
  });

  it('removes retrievers, publications, keys, batches, collections, documents, vectors, buckets and blobs; the public name is free again', async () => {
    const made = await populate('doomed', 'doomed-lamps');
    const index = featureIndexName(made.collectionId, 'text_embedding');
    const vectors = t.kernel.services.get(VectorIndex);
    expect(await vectors.count(index)).toBe(5);

    expect((await api('DELETE', '/v1/namespaces/doomed', undefined)).status).toBe(200);
    await purged(made.namespaceId);

    for (const [table, where] of [
      ['retrievers', { namespace_id: made.namespaceId }],
      ['published_retrievers', { retriever_id: made.retrieverId }],
      ['retriever_executions', { retriever_id: made.retrieverId }],
      ['batches', { namespace_id: made.namespaceId }],
      ['collections', { namespace_id: made.namespaceId }],
      ['documents', { collection_id: made.collectionId }],
      ['buckets', { namespace_id: made.namespaceId }],
      ['objects', { bucket_id: made.bucketId }],
    ] as const) {
      expect(Number(await rows(table, where)), table).toBe(0);
    }
    await expect(vectors.count(index)).rejects.toThrow(/not found/);
    const key = await t.kernel.services.get(DatabaseHandle).db('api_keys').where({ key_id: made.keyId }).first();
    expect(key).toMatchObject({ status: 'revoked', revoked_by: t.adminEmail });
    let blobs = 0;
    for await (const b of t.kernel.services.get(BlobStore).list('')) if (b.key.includes(made.namespaceId) || b.key.includes(made.batchId)) blobs += 1;
    expect(blobs).toBe(0);

    // Gone from the public side, and its public name can be published again.
    const list = await t.request('GET', '/v1/public/retrievers/?page_size=100&include_inactive=true');
    expect(list.body.results.map((r: { public_name: string }) => r.public_name)).not.toContain('doomed-lamps');
    expect((await t.request('POST', '/v1/public/retrievers/doomed-lamps/execute', { body: { inputs: { vector: unitVector(1) } } })).status).toBe(404);
    const again = await populate('doomed', 'doomed-lamps');
    expect(again.namespaceId).not.toBe(made.namespaceId);
  });

  it('before the purge has run, resources of the deleted namespace cannot be reached by id', async () => {
    const made = await populate('ghostly', 'ghostly-lamps');
    expect((await api('DELETE', '/v1/namespaces/ghostly', undefined)).status).toBe(200);
    // No task has run: the collection and bucket rows are still there, but their namespace is gone.
    expect(Number(await rows('collections', { collection_id: made.collectionId }))).toBe(1);
    for (const source of [{ type: 'collection', collection_id: made.collectionId }, { type: 'bucket', bucket_id: made.bucketId }]) {
      const ghost = await api('POST', '/v1/collections/create', undefined, { collection_name: 'ghost', source, feature_extractors: [{ feature_extractor_name: 'passthrough_extractor' }] });
      expect(ghost.status, ghost.text).toBe(404);
      expect(ghost.body.error.message).toMatch(/^Source (collection|bucket) '(col|bkt)_\w+' not found$/);
    }
    await purged(made.namespaceId);
  });

  it('an unknown source id without X-Namespace is a 404 naming it; a plain name still asks for X-Namespace', async () => {
    const unknown = await api('POST', '/v1/collections/create', undefined, {
      collection_name: 'x', source: { type: 'bucket', bucket_id: 'bkt_doesnotexist00000' }, feature_extractors: [{ feature_extractor_name: 'passthrough_extractor' }],
    });
    expect(unknown.status).toBe(404);
    expect(unknown.body.error.message).toBe("Source bucket 'bkt_doesnotexist00000' not found");
    const named = await api('POST', '/v1/collections/create', undefined, {
      collection_name: 'x', source: { type: 'bucket', bucket_id: 'catalog' }, feature_extractors: [{ feature_extractor_name: 'passthrough_extractor' }],
    });
    expect(named.status).toBe(400);
    expect(named.body.error.message).toMatch(/send X-Namespace/);
  });

  it('deleting a retriever revokes its keys', async () => {
    await populate('keys', 'keys-lamps');
    const key = await api('POST', '/v1/retrievers/r/api-keys', 'keys', { name: 'second' });
    expect((await api('DELETE', '/v1/retrievers/r', 'keys')).status).toBe(200);
    const stored = await t.kernel.services.get(DatabaseHandle).db('api_keys').where({ key_id: key.body.key_id }).first();
    expect(stored).toMatchObject({ status: 'revoked', revoked_by: t.adminEmail });
    const audit = await api('GET', `/v1/organizations/audit-log?resource_id=${key.body.key_id}`, undefined);
    expect(audit.body.results[0]).toMatchObject({ action: 'api_key_revoked', changes: { reason: 'retriever deleted' } });
  });

  it("ends other organizations' marketplace subscriptions to its retrievers and revokes their keys", async () => {
    const made = await populate('market', 'market-lamps');
    expect((await api('PATCH', '/v1/retrievers/r/publish', 'market', { marketplace_listed: true })).status).toBe(200);
    const buyer = await t.kernel.services.get(TenantStore).createOrganization({ name: 'buyer-org', ownerEmail: 'buyer@purge.test' });
    const subscribed = await t.request('POST', '/v1/marketplace/catalog/market-lamps/subscribe', { key: buyer.adminKeyPlaintext });
    expect(subscribed.status, subscribed.text).toBe(201);
    const execute = () => t.request('POST', '/v1/public/retrievers/execute', { headers: { 'X-Public-API-Key': subscribed.body.key }, body: { inputs: { vector: unitVector(2) } } });
    expect((await execute()).status).toBe(200);

    expect((await api('DELETE', '/v1/namespaces/market', undefined)).status).toBe(200);
    await purged(made.namespaceId);

    expect((await execute()).status).toBe(401);
    const all = await t.request('GET', '/v1/marketplace/subscriptions?include_cancelled=true', { key: buyer.adminKeyPlaintext });
    expect(all.body.results).toEqual([
      expect.objectContaining({ subscription_id: subscribed.body.subscription_id, status: 'cancelled', cancel_reason: 'retriever_deleted', key_status: 'revoked' }),
    ]);
    const task = await t.kernel.services.get(DatabaseHandle).db('tasks').where({ type: 'namespaces.purge' }).whereRaw("payload->>'namespace_id' = ?", [made.namespaceId]).first();
    expect(JSON.stringify(task.result)).toContain('"marketplace_subscriptions_ended":1');
  });
});
