/**
 * A chunk starts only while its batch run goes on: `BatchStore.markStarted` checks the batch row (its
 * generation, IN_PROGRESS) under that row's lock and marks the chunk in the same statement.
 */
import type { Knex } from 'knex';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DatabaseHandle } from '../../../../kernel/tokens.js';
import { BatchStore, type ChunkKey } from '../../../../plugins/resources/batches/store.js';
import { startTestKernel, type TestKernel } from '../../../support/kernel.js';

describe('starting a batch chunk', () => {
  let t: TestKernel;
  let db: Knex;
  let store: BatchStore;
  const api = (method: string, p: string, body?: unknown) =>
    t.request(method, p, { key: t.adminKey, headers: { 'X-Namespace': 'chunks' }, ...(body !== undefined ? { body } : {}) });

  /** A submitted batch over `count` objects, put IN_PROGRESS with one pending chunk per object as the runner would; nothing runs its tasks. */
  async function submitted(name: string, count: number): Promise<{ batchId: string; keys: ChunkKey[] }> {
    expect((await api('POST', '/v1/buckets', { bucket_name: name })).status).toBe(201);
    const objects = Array.from({ length: count }, (_, i) => ({ key: `k${i}`, blobs: [{ property: 'content', text: `text ${i}` }] }));
    const ids = (await api('POST', `/v1/buckets/${name}/objects/bulk`, { objects })).body.results.map((o: { object_id: string }) => o.object_id);
    expect((await api('POST', '/v1/collections/create', {
      collection_name: name, source: { type: 'bucket', bucket_id: name }, feature_extractors: [{ feature_extractor_name: 'text_extractor' }],
    })).status).toBe(201);
    const batch = await api('POST', `/v1/buckets/${name}/batches`, { object_ids: ids });
    expect((await api('POST', `/v1/buckets/${name}/batches/${batch.body.batch_id}/submit`)).status).toBeLessThan(300);
    const batchId = batch.body.batch_id as string;
    const row = (await db('batches').where({ batch_id: batchId }).first()) as { generation: number | string };
    await db('batches').where({ batch_id: batchId }).update({ status: 'IN_PROGRESS' });
    const collectionId = (await db('collections').where({ collection_name: name }).first()).collection_id as string;
    const keys: ChunkKey[] = ids.map((_: string, i: number) => ({ batch_id: batchId, generation: Number(row.generation), tier: 0, collection_id: collectionId, chunk_index: i }));
    await db('batch_chunks').insert(keys.map((k, i) => ({ ...k, record_ids: JSON.stringify([ids[i]]), status: 'PENDING' })));
    return { batchId, keys };
  }
  const startedAt = async (key: ChunkKey) => ((await db('batch_chunks').where(key).first()) as { started_at: Date | null }).started_at;

  beforeAll(async () => {
    t = await startTestKernel({ config: { runTasks: false } });
    db = t.kernel.services.get(DatabaseHandle).db;
    store = new BatchStore(db);
    expect((await t.client().POST('/v1/namespaces', { body: { namespace_name: 'chunks' } })).response.status).toBe(201);
  }, 60_000);
  afterAll(async () => {
    await t?.stop();
  });

  it('marks a pending chunk of a running batch once, keeping its first start time', async () => {
    const { keys } = await submitted('running', 2);
    const first = new Date('2026-01-01T00:00:00Z');
    expect(await store.markStarted(keys[0]!, first)).toBe(true);
    expect((await startedAt(keys[0]!))?.toISOString()).toBe(first.toISOString());
    // A redelivered task starts it again: still pending, the first start time stays.
    expect(await store.markStarted(keys[0]!, new Date('2026-01-02T00:00:00Z'))).toBe(true);
    expect((await startedAt(keys[0]!))?.toISOString()).toBe(first.toISOString());
    // Another run's task (an older generation) starts nothing.
    expect(await store.markStarted({ ...keys[1]!, generation: keys[1]!.generation + 1 }, new Date())).toBe(false);
    expect(await startedAt(keys[1]!)).toBeNull();
  });

  it('starts nothing once the batch is canceled, even a chunk the cancel left pending', async () => {
    const { batchId, keys } = await submitted('canceled', 2);
    expect((await api('POST', `/v1/buckets/canceled/batches/${batchId}/cancel`)).status).toBeLessThan(300);
    await db('batch_chunks').where({ batch_id: batchId }).update({ status: 'PENDING', completed_at: null });
    for (const key of keys) {
      expect(await store.markStarted(key, new Date())).toBe(false);
      expect(await startedAt(key)).toBeNull();
    }
  });
});
