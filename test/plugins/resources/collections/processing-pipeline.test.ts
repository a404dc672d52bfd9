/**
 * The processor extracts a chunk's records a group at a time and writes each group's documents while the
 * next group is extracted. With a chunk of several groups: every record gets its result, each error is
 * listed once by its extractor, every document is written once; small inputs are extracted 32 at a time,
 * large ones 4, all under one bound on ffmpeg processes; the next group is extracted while the
 * first one is written; and a write that fails meanwhile fails the whole call (the task is retried) with
 * its error, never as an unhandled rejection. What a call wrote is announced (retriever caches, document
 * events) once for all its groups, also when a later group's write fails.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ServiceUnavailableError } from '../../../../kernel/errors.js';
import { ProcessSlots } from '../../../../kernel/media/process-slots.js';
import { CollectionProcessor, EventBus, PluginRegistry } from '../../../../kernel/tokens.js';
import builtins from '../../../../plugins/index.js';
import { Documents } from '../../../../plugins/resources/collections/index.js';
import { startTestKernel, type TestKernel } from '../../../support/kernel.js';
import flakyExtractor from '../../../support/plugins/flaky-extractor.js';

const RECORDS = 300; // three groups of 128 or fewer
const FAILING = new Set([5, 150, 290]);

describe('processing a chunk of several groups', () => {
  let t: TestKernel;
  let ids: string[];
  let organizationId: string;
  let collectionId: string;
  const unhandled: unknown[] = [];
  const onUnhandled = (reason: unknown) => unhandled.push(reason);

  beforeAll(async () => {
    process.on('unhandledRejection', onUnhandled);
    t = await startTestKernel({ plugins: [...builtins, flakyExtractor], config: { runTasks: false, mediaProcesses: 3 } });
    expect((await t.client().POST('/v1/namespaces', { body: { namespace_name: 'work' } })).response.status).toBe(201);
    const api = (method: string, p: string, body?: unknown) =>
      t.request(method, p, { key: t.adminKey, headers: { 'X-Namespace': 'work' }, ...(body !== undefined ? { body } : {}) });
    const bucket = await api('POST', '/v1/buckets', { bucket_name: 'many' });
    expect(bucket.status, JSON.stringify(bucket.body)).toBe(201);
    const objects = Array.from({ length: RECORDS }, (_, i) => ({ key: `n/${i}.txt`, metadata: { fail: FAILING.has(i) }, blobs: [{ property: 'content', text: `note ${i}` }] }));
    const bulk = await api('POST', '/v1/buckets/many/objects/bulk', { objects });
    expect(bulk.status, JSON.stringify(bulk.body).slice(0, 300)).toBe(201);
    ids = (bulk.body.results as Array<{ object_id: string }>).map((o) => o.object_id);
    const created = await api('POST', '/v1/collections/create', {
      collection_name: 'copies',
      source: { type: 'bucket', bucket_id: 'many' },
      feature_extractors: [{ feature_extractor_name: 'flaky_extractor' }],
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    collectionId = created.body.collection_id as string;
    organizationId = (await api('GET', '/v1/me')).body.organization.organization_id as string;
  }, 120_000);

  afterAll(async () => {
    process.off('unhandledRejection', onUnhandled);
    await t?.stop();
  });

  it('gives every record its result and writes every document once', async () => {
    const processor = t.kernel.services.get(CollectionProcessor);
    const outcome = await processor.process({ organizationId, collectionId, recordIds: ids, processingTier: 0, origin: 'test' });
    expect(outcome.documents_written).toBe(RECORDS - FAILING.size);
    const results = ids.map((id) => outcome.records[id]?.result);
    expect(results.filter((r) => r === 'written')).toHaveLength(RECORDS - FAILING.size);
    expect([...FAILING].map((i) => results[i])).toEqual(['failed', 'failed', 'failed']);
    // The message names the object: three errors, in three groups, each listed once by the extractor too.
    const errors = outcome.errors.filter((e) => e.component === 'flaky_extractor');
    expect(errors).toHaveLength(3);
    expect(outcome.extractors).toHaveLength(1);
    expect(outcome.extractors[0]).toMatchObject({ extractor_type: 'flaky_extractor', documents_written: RECORDS - FAILING.size });
    expect(outcome.extractors[0]!.errors).toHaveLength(3);
    expect(new Set(outcome.extractors[0]!.errors).size).toBe(3);
    const count = () => t.request('GET', `/v1/collections/${collectionId}`, { key: t.adminKey, headers: { 'X-Namespace': 'work' } });
    expect((await count()).body.document_count).toBe(RECORDS - FAILING.size);

    // Again: the same documents are updated in place, none added.
    const again = await processor.process({ organizationId, collectionId, recordIds: ids, processingTier: 0, origin: 'test' });
    expect(again.documents_written).toBe(RECORDS - FAILING.size);
    expect((await count()).body.document_count).toBe(RECORDS - FAILING.size);
  });

  /** The document events published for the collection while `work` runs (and shortly after). */
  async function documentEvents(work: () => Promise<unknown>, expected: number): Promise<Array<{ type: string; count: unknown }>> {
    const seen: Array<{ type: string; count: unknown }> = [];
    const unsubscribe = t.kernel.services.get(EventBus).subscribe('document.*', (event) => {
      if (event.data.collection_id === collectionId) seen.push({ type: event.type, count: event.data.count });
    });
    try {
      await work();
      for (let i = 0; i < 100 && seen.length < expected; i++) await new Promise((r) => setTimeout(r, 20));
      await new Promise((r) => setTimeout(r, 100));
      return seen;
    } finally {
      unsubscribe();
    }
  }

  it('announces what a call wrote once for all its groups', async () => {
    const processor = t.kernel.services.get(CollectionProcessor);
    const events = await documentEvents(() => processor.process({ organizationId, collectionId, recordIds: ids, processingTier: 0, origin: 'test' }), 1);
    // Written before by the test above: every document is updated, in one event for the three groups.
    expect(events).toEqual([{ type: 'document.updated', count: RECORDS - FAILING.size }]);
  });

  it('announces the groups written before a later group failed to write', async () => {
    const documents = t.kernel.services.get(Documents);
    const originalUpsert = documents.upsertMany.bind(documents);
    let calls = 0;
    documents.upsertMany = async (writes, db) => {
      // A group's write; on PostgreSQL the store calls itself again inside its transaction (the same write).
      if (!db?.isTransaction && ++calls === 2) throw new ServiceUnavailableError('the database went away');
      return originalUpsert(writes, db);
    };
    try {
      const processor = t.kernel.services.get(CollectionProcessor);
      const events = await documentEvents(
        () => expect(processor.process({ organizationId, collectionId, recordIds: ids, processingTier: 0, origin: 'test' })).rejects.toThrow('the database went away'),
        1,
      );
      // The first group: 128 records, one of them failing.
      expect(events).toEqual([{ type: 'document.updated', count: 127 }]);
    } finally {
      documents.upsertMany = originalUpsert;
    }
  });

  it('extracts 32 records at once when every input is small, 4 when an input is large', async () => {
    const api = (method: string, p: string, body?: unknown) =>
      t.request(method, p, { key: t.adminKey, headers: { 'X-Namespace': 'work' }, ...(body !== undefined ? { body } : {}) });
    expect((await api('POST', '/v1/buckets', { bucket_name: 'large' })).status).toBe(201);
    const large: string[] = [];
    for (let i = 0; i < 20; i++) {
      const res = await api('POST', '/v1/buckets/large/objects', { key: `l/${i}.txt`, blobs: [{ property: 'content', text: `${i} `.padEnd(300 * 1024, 'x') }] });
      expect(res.status).toBe(201);
      large.push(res.body.object_id as string);
    }
    const created = await api('POST', '/v1/collections/create', {
      collection_name: 'large-copies',
      source: { type: 'bucket', bucket_id: 'large' },
      feature_extractors: [{ feature_extractor_name: 'flaky_extractor' }],
    });
    expect(created.status).toBe(201);

    const extractor = t.kernel.services.get(PluginRegistry).extractors.get('flaky_extractor')!;
    const originalExtract = extractor.extract.bind(extractor);
    let active = 0;
    let most = 0;
    const bounds = new Set<ProcessSlots | undefined>();
    extractor.extract = async function* (ctx, input) {
      bounds.add(ctx.mediaProcesses);
      active += 1;
      most = Math.max(most, active);
      try {
        // Held a moment, so every lane has a record in hand at once.
        await new Promise((r) => setTimeout(r, 20));
        yield* originalExtract(ctx, input);
      } finally {
        active -= 1;
      }
    };
    try {
      const processor = t.kernel.services.get(CollectionProcessor);
      await processor.process({ organizationId, collectionId, recordIds: ids, processingTier: 0, origin: 'test' });
      expect(most).toBe(32);
      most = 0;
      const outcome = await processor.process({ organizationId, collectionId: created.body.collection_id as string, recordIds: large, processingTier: 0, origin: 'test' });
      expect(outcome.documents_written).toBe(20);
      expect(most).toBe(4);
      // Every record of every call shares one bound on ffmpeg processes, sized by TESSERA_MEDIA_PROCESSES.
      expect(bounds.size).toBe(1);
      expect([...bounds][0]).toBeInstanceOf(ProcessSlots);
      expect([...bounds][0]!.limit).toBe(3);
    } finally {
      extractor.extract = originalExtract;
    }
  });

  it('extracts the next group while a group is written; a write that fails then fails the call with its error', async () => {
    const documents = t.kernel.services.get(Documents);
    const extractor = t.kernel.services.get(PluginRegistry).extractors.get('flaky_extractor')!;
    const originalUpsert = documents.upsertMany.bind(documents);
    const originalExtract = extractor.extract.bind(extractor);
    let extracted = 0;
    extractor.extract = (ctx, input) => {
      extracted += 1;
      return originalExtract(ctx, input);
    };
    let calls = 0;
    let extractedAtFirstWrite = -1;
    let extractedDuringFirstWrite = -1;
    documents.upsertMany = async (writes, db) => {
      calls += 1;
      if (calls > 1) return originalUpsert(writes, db);
      extractedAtFirstWrite = extracted;
      // The next group is extracted while this write runs: wait for it (bounded), then the database "goes away".
      for (let waited = 0; extracted < 256 && waited < 15_000; waited += 10) await new Promise((r) => setTimeout(r, 10));
      extractedDuringFirstWrite = extracted;
      throw new ServiceUnavailableError('the database went away');
    };
    try {
      const processor = t.kernel.services.get(CollectionProcessor);
      await expect(processor.process({ organizationId, collectionId, recordIds: ids, processingTier: 0, origin: 'test' })).rejects.toThrow('the database went away');
      expect(extractedAtFirstWrite).toBe(128);
      expect(extractedDuringFirstWrite).toBe(256);
      // The failure stopped the call before another write started.
      expect(calls).toBe(1);
      await new Promise((r) => setTimeout(r, 50));
      expect(unhandled).toEqual([]);
    } finally {
      documents.upsertMany = originalUpsert;
      extractor.extract = originalExtract;
    }
  });
});
