/**
 * The batch path's bookkeeping, made cheap, says the same as before:
 * - chunk record ids and outcomes remembered by the store once committed read back exactly as stored,
 *   and what a rolled back transaction planned or finished is never remembered;
 * - a chunk's input blobs read ahead of extraction give the documents the extractor's own reads give
 *   (byte order mark, multi-byte text cut at max_chars, a blob too large to read ahead), one per record.
 */
import { Buffer } from 'node:buffer';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ProcessingOutcome } from '../../../../kernel/processing.js';
import { DatabaseHandle, TaskQueue } from '../../../../kernel/tokens.js';
import builtins from '../../../../plugins/index.js';
import { BatchStore, type ChunkRow } from '../../../../plugins/resources/batches/store.js';
import { startTestKernel, type TestKernel } from '../../../support/kernel.js';

const TERMINAL = ['COMPLETED', 'COMPLETED_WITH_ERRORS', 'FAILED', 'CANCELED'];

describe('batch bookkeeping', () => {
  let t: TestKernel;
  const api = (method: string, p: string, body?: unknown) =>
    t.request(method, p, { key: t.adminKey, headers: { 'X-Namespace': 'books' }, ...(body !== undefined ? { body } : {}) });

  beforeAll(async () => {
    t = await startTestKernel({
      plugins: builtins,
      inferencePlugins: [path.resolve(__dirname, '../../../../plugins/models/hashed-ngram-text/index.ts')],
      config: { inferenceWorkers: 1, batchChunkSize: 3, batchHealthIntervalMs: 0, runTasks: false },
    });
    expect((await t.client().POST('/v1/namespaces', { body: { namespace_name: 'books' } })).response.status).toBe(201);
  }, 120_000);

  afterAll(async () => {
    await t?.stop();
  });

  it('remembers committed chunks only, and reads them back exactly as stored', async () => {
    expect((await api('POST', '/v1/buckets', { bucket_name: 'ledger' })).status).toBe(201);
    const object = await api('POST', '/v1/buckets/ledger/objects', { key: 'a.txt', blobs: [{ property: 'content', text: 'a' }] });
    const batch = await api('POST', '/v1/buckets/ledger/batches', { object_ids: [object.body.object_id] });
    expect(batch.status).toBe(201);
    const batchId = batch.body.batch_id as string;
    const db = t.kernel.services.get(DatabaseHandle).db;
    const store = new BatchStore(db);
    const chunk = (index: number, records: string[]): ChunkRow => ({
      batch_id: batchId, generation: 7, tier: 0, collection_id: 'col_x', chunk_index: index, record_ids: records,
      status: 'PENDING', task_id: null, outcome: null, started_at: null, completed_at: null,
    });
    const key = { batch_id: batchId, generation: 7, tier: 0, collection_id: 'col_x', chunk_index: 0 };
    const outcome = (documents: number): ProcessingOutcome =>
      ({ documents_written: documents, errors: [], records: { r1: { result: 'written', documents, submitted: true } } }) as unknown as ProcessingOutcome;
    const raw = async () =>
      (await db('batch_chunks').where({ batch_id: batchId }).orderBy([{ column: 'generation' }, { column: 'tier' }, { column: 'chunk_index' }])) as ChunkRow[];

    // Planned, read inside the transaction, then rolled back: neither the plan nor its record ids are remembered.
    await db
      .transaction(async (trx) => {
        await store.insertChunks([chunk(0, ['r1', 'r2'])], trx);
        expect((await store.chunksOf(batchId, 7, 0, trx)).map((c) => c.record_ids)).toEqual([['r1', 'r2']]);
        throw new Error('roll back');
      })
      .catch(() => undefined);
    expect(await store.allChunks(batchId)).toEqual([]);

    // Planned again with other records and committed: those are what is read, from memory the second time.
    await db.transaction((trx) => store.insertChunks([chunk(0, ['r1']), chunk(1, ['r3'])], trx));
    expect(await store.allChunks(batchId)).toEqual(await raw());
    expect((await store.allChunks(batchId)).map((c) => c.record_ids)).toEqual([['r1'], ['r3']]);

    // Finished inside a transaction that rolls back: still PENDING, without an outcome, for every reader.
    await db
      .transaction(async (trx) => {
        await store.finish(key, 'COMPLETED', outcome(1), new Date(), trx);
        expect((await store.chunksOfTier(batchId, 0, trx))[0]).toMatchObject({ status: 'COMPLETED', outcome: outcome(1) });
        throw new Error('roll back');
      })
      .catch(() => undefined);
    expect((await store.chunksOfTier(batchId, 0))[0]).toMatchObject({ status: 'PENDING', outcome: null });
    expect(await new BatchStore(db).chunksOfTier(batchId, 0)).toEqual(await store.chunksOfTier(batchId, 0));

    // Finished and committed (by another process's store): this one reads the outcome, then keeps it.
    const other = new BatchStore(db);
    await db.transaction((trx) => other.finish(key, 'COMPLETED', outcome(2), new Date(), trx));
    expect(await store.allChunks(batchId)).toEqual(await raw());
    expect((await store.allChunks(batchId))[0]).toMatchObject({ status: 'COMPLETED', outcome: outcome(2), record_ids: ['r1'] });
    expect(await store.allChunks(batchId)).toEqual(await raw());
  });

  it('reads a submitted batch\'s object id lists once, a draft\'s every time, and holds a bounded number of ids', async () => {
    expect((await api('POST', '/v1/buckets', { bucket_name: 'lists' })).status).toBe(201);
    const create = await api('POST', '/v1/collections/create', {
      collection_name: 'lists', source: { type: 'bucket', bucket_id: 'lists' }, feature_extractors: [{ feature_extractor_name: 'text_extractor' }],
    });
    expect(create.status, JSON.stringify(create.body)).toBe(201);
    const ids: string[] = [];
    for (const key of ['a', 'b', 'c']) ids.push((await api('POST', '/v1/buckets/lists/objects', { key, blobs: [{ property: 'content', text: key }] })).body.object_id);
    const db = t.kernel.services.get(DatabaseHandle).db;
    const org = (await db('buckets').where({ bucket_name: 'lists' }).first('organization_id')).organization_id as string;
    const store = new BatchStore(db, { knownObjectIds: 5 });
    const fresh = (batchId: string) => new BatchStore(db).find(org, batchId);

    // A DRAFT batch's objects change: every read sees the latest.
    const draft = (await api('POST', '/v1/buckets/lists/batches', { object_ids: [ids[0]] })).body.batch_id as string;
    expect((await store.find(org, draft))?.object_ids).toEqual([ids[0]]);
    expect((await api('POST', `/v1/buckets/lists/batches/${draft}/objects`, { object_ids: [ids[1]] })).status).toBe(200);
    expect((await store.find(org, draft))?.object_ids).toEqual([ids[0], ids[1]]);

    // Submitted, its lists never change again: read once. The change written behind the store's back here only
    // shows which read answered; the other columns are read every time.
    expect((await api('POST', `/v1/buckets/lists/batches/${draft}/submit`)).status).toBe(202);
    const submitted = await store.find(org, draft);
    expect(submitted).toEqual(await fresh(draft));
    expect(submitted).toMatchObject({ status: 'PENDING', object_ids: [ids[0], ids[1]], loaded_object_ids: [ids[0], ids[1]] });
    await db('batches').where({ batch_id: draft }).update({ object_ids: JSON.stringify(['obj_written_behind']), metadata: JSON.stringify({ seen: true }) });
    expect(await store.find(org, draft)).toMatchObject({ object_ids: [ids[0], ids[1]], loaded_object_ids: [ids[0], ids[1]], metadata: { seen: true } });
    expect((await fresh(draft))?.object_ids).toEqual(['obj_written_behind']);
    expect(Object.isFrozen((await store.find(org, draft))?.object_ids)).toBe(true);
    // Lists and the running batches complete their rows from the same memory.
    const listed = (await store.list(org, (await db('buckets').where({ bucket_name: 'lists' }).first('bucket_id')).bucket_id, { limit: 10 })).rows;
    expect(listed.map((r) => [r.batch_id, r.object_ids])).toEqual([[draft, [ids[0], ids[1]]]]);
    expect((await store.running()).find((r) => r.batch_id === draft)?.loaded_object_ids).toEqual([ids[0], ids[1]]);

    // A second submitted batch (2 more ids, 6 in all, past the 5 held): the least recently read goes.
    const second = (await api('POST', '/v1/buckets/lists/batches', { object_ids: [ids[2]] })).body.batch_id as string;
    expect((await api('POST', `/v1/buckets/lists/batches/${second}/submit`)).status).toBe(202);
    expect((await store.find(org, second))?.object_ids).toEqual([ids[2]]);
    await db('batches').where({ batch_id: second }).update({ object_ids: JSON.stringify(['obj_second_behind']) });
    expect((await store.find(org, second))?.object_ids).toEqual([ids[2]]);
    expect((await store.find(org, draft))?.object_ids).toEqual(['obj_written_behind']);

    // Read inside a transaction (which may roll back): not remembered.
    const inTransaction = new BatchStore(db);
    await db.transaction((trx) => inTransaction.find(org, second, trx));
    await db('batches').where({ batch_id: second }).update({ object_ids: JSON.stringify(['obj_after_transaction']) });
    expect((await inTransaction.find(org, second))?.object_ids).toEqual(['obj_after_transaction']);
  });

  it('gives the documents the extractor would read itself, from blobs read ahead or not, one per record', async () => {
    expect((await api('POST', '/v1/buckets', { bucket_name: 'texts' })).status).toBe(201);
    const create = await api('POST', '/v1/collections/create', {
      collection_name: 'cut',
      source: { type: 'bucket', bucket_id: 'texts' },
      feature_extractors: [{ feature_extractor_name: 'text_extractor', parameters: { max_chars: 7 } }],
    });
    expect(create.status, JSON.stringify(create.body)).toBe(201);
    const bom = Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from('héllo wörld', 'utf8')]);
    // Past what a chunk reads ahead (1 MiB a blob): the extractor reads it itself, with a ranged read.
    const large = `wörld ${'x'.repeat((1 << 20) + 10)}`;
    const inputs: Array<{ key: string; blob: Record<string, unknown>; text: string; truncated: boolean }> = [
      { key: 'bom.txt', blob: { property: 'content', type: 'text', base64: bom.toString('base64'), filename: 'bom.txt' }, text: 'héllo w', truncated: true },
      { key: 'short.txt', blob: { property: 'content', text: 'ünï' }, text: 'ünï', truncated: false },
      { key: 'large.txt', blob: { property: 'content', text: large }, text: 'wörld x', truncated: true },
      { key: 'seven.txt', blob: { property: 'content', text: 'seven c' }, text: 'seven c', truncated: false },
    ];
    const ids: string[] = [];
    for (const input of inputs) {
      const res = await api('POST', '/v1/buckets/texts/objects', { key: input.key, blobs: [input.blob] });
      expect(res.status, JSON.stringify(res.body)).toBe(201);
      ids.push(res.body.object_id as string);
    }
    const run = async () => {
      const batch = await api('POST', '/v1/buckets/texts/batches', { object_ids: ids });
      expect((await api('POST', `/v1/buckets/texts/batches/${batch.body.batch_id}/submit`)).status).toBe(202);
      for (let i = 0; i < 600; i++) {
        await t.kernel.services.get(TaskQueue).drain();
        const res = await api('GET', `/v1/buckets/texts/batches/${batch.body.batch_id}`);
        if (TERMINAL.includes(res.body.status)) return res.body as Record<string, any>;
        await new Promise((r) => setTimeout(r, 50));
      }
      throw new Error('batch did not end');
    };
    const documents = async () => {
      const res = await api('POST', '/v1/collections/cut/documents/list', {});
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      return res.body.results as Array<Record<string, any>>;
    };

    const first = await run();
    expect(first.status, JSON.stringify(first.tier_tasks?.[0]?.errors)).toBe('COMPLETED');
    expect(first.tier_tasks[0]).toMatchObject({ documents_written: 4, source_documents_fetched: 4 });
    const written = await documents();
    expect(written).toHaveLength(4);
    for (const [i, input] of inputs.entries()) {
      const doc = written.find((d) => d.root_object_id === ids[i]);
      expect(doc, input.key).toBeDefined();
      expect(doc!.fields ?? doc).toMatchObject({ text: input.text, truncated: input.truncated, chunk_index: 0, chunk_count: 1 });
    }
    // Run again (a redelivery, a retry): the same documents updated in place, none added.
    await run();
    const again = await documents();
    expect(again.map((d) => d.document_id).sort()).toEqual(written.map((d) => d.document_id).sort());
    expect((await api('GET', '/v1/collections/cut')).body.document_count).toBe(4);
  });
});
