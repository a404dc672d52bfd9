/**
 * Batches end to end through HTTP: objects in a bucket, a text collection (tier 0) and a collection chained
 * on it (tier 1), processed by the task runner with a spawned inference worker; counters, progress, errors,
 * events, cancel, retry and idempotence.
 */
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EventBus, TaskQueue, VectorIndex } from '../../../../kernel/tokens.js';
import { featureIndexName } from '../../../../kernel/vectors/naming.js';
import { BatchHealth } from '../../../../plugins/resources/batches/index.js';
import { startTestKernel, type TestKernel } from '../../../support/kernel.js';

const TERMINAL = ['COMPLETED', 'COMPLETED_WITH_ERRORS', 'FAILED', 'CANCELED'];
/** A 1×1 PNG: an object text_extractor cannot read. */
const PIXEL_PNG = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==';

describe('batches', () => {
  let t: TestKernel;
  const events: Array<{ type: string; data: Record<string, unknown> }> = [];
  const objectIds: string[] = [];
  let chunks: { collection_id: string };
  let summaries: { collection_id: string };

  const api = (method: string, p: string, body?: unknown) =>
    t.request(method, p, { key: t.adminKey, headers: { 'X-Namespace': 'media' }, ...(body !== undefined ? { body } : {}) });

  /** This kernel runs no task runner: the test runs the queued tasks itself, so it can hold work back. */
  async function waitFor(batchId: string, bucket = 'docs'): Promise<Record<string, any>> {
    for (let i = 0; i < 600; i++) {
      await t.kernel.services.get(TaskQueue).drain();
      const res = await api('GET', `/v1/buckets/${bucket}/batches/${batchId}`);
      expect(res.status).toBe(200);
      if (TERMINAL.includes(res.body.status)) return res.body;
      await new Promise((r) => setTimeout(r, 100));
    }
    throw new Error(`batch ${batchId} did not finish`);
  }

  async function runBatch(ids: string[], bucket = 'docs'): Promise<Record<string, any>> {
    const created = await api('POST', `/v1/buckets/${bucket}/batches`, { object_ids: ids });
    expect(created.status).toBe(201);
    const submitted = await api('POST', `/v1/buckets/${bucket}/batches/${created.body.batch_id}/submit`);
    expect(submitted.status).toBe(202);
    return waitFor(created.body.batch_id, bucket);
  }

  beforeAll(async () => {
    t = await startTestKernel({
      inferencePlugins: [path.resolve(__dirname, '../../../../plugins/models/hashed-ngram-text/index.ts')],
      config: { inferenceWorkers: 1, batchChunkSize: 2, batchHealthIntervalMs: 0, batchStallAfterMs: 60_000, runTasks: false },
    });
    t.kernel.services.get(EventBus).subscribe('batch.*', async (e) => void events.push({ type: e.type, data: e.data as Record<string, unknown> }));
    t.kernel.services.get(EventBus).subscribe('extractor.*', async (e) => void events.push({ type: e.type, data: e.data as Record<string, unknown> }));
    expect((await t.client().POST('/v1/namespaces', { body: { namespace_name: 'media' } })).response.status).toBe(201);
    expect((await api('POST', '/v1/buckets', { bucket_name: 'docs' })).status).toBe(201);
    const texts = [
      'Lighthouses guide ships along rocky coasts. Their lamps turn all night.',
      'Bread needs flour, water, salt and time. The crust forms in a hot oven.',
      'Glaciers carve valleys over thousands of years. Meltwater feeds the rivers below.',
    ];
    for (const [i, text] of texts.entries()) {
      const res = await api('POST', '/v1/buckets/docs/objects', { key: `texts/${i}.txt`, metadata: { topic: `t${i}` }, blobs: [{ property: 'content', text }] });
      expect(res.status).toBe(201);
      objectIds.push(res.body.object_id);
    }
    const created = await api('POST', '/v1/collections/create', {
      collection_name: 'chunks',
      source: { type: 'bucket', bucket_id: 'docs' },
      feature_extractors: [{ feature_extractor_name: 'text_extractor', parameters: { split_by: 'sentences', chunk_size: 1, chunk_overlap: 0 } }],
    });
    expect(created.status).toBe(201);
    chunks = created.body;
    const chained = await api('POST', '/v1/collections/create', {
      collection_name: 'summaries',
      source: { type: 'collection', collection_id: 'chunks' },
      feature_extractors: [{ feature_extractor_name: 'passthrough_extractor' }],
    });
    expect(chained.status).toBe(201);
    summaries = chained.body;
  }, 120_000);

  afterAll(async () => {
    await t?.stop();
  });

  it('processes a batch tier by tier into documents with vectors, counters, progress and an event', async () => {
    const draft = await api('POST', '/v1/buckets/docs/batches', { object_ids: objectIds.slice(0, 2), metadata: { run: 1 } });
    expect(draft.status).toBe(201);
    expect(draft.body).toMatchObject({ status: 'DRAFT', type: 'BUCKET', object_ids: objectIds.slice(0, 2), tier_tasks: [], total_tiers: 1, dag_tiers: null });
    expect(draft.body.batch_id).toMatch(/^btch_/);
    const added = await api('POST', `/v1/buckets/docs/batches/${draft.body.batch_id}/objects`, { object_ids: [objectIds[2], objectIds[0]] });
    expect(added.body.object_ids).toEqual(objectIds);

    const submitted = await api('POST', `/v1/buckets/docs/batches/${draft.body.batch_id}/submit`);
    expect(submitted.status).toBe(202);
    expect(submitted.body).toMatchObject({
      status: 'PENDING',
      total_tiers: 2,
      dag_tiers: [[chunks.collection_id], [summaries.collection_id]],
      collection_ids: [chunks.collection_id, summaries.collection_id],
    });
    expect(submitted.body.manifest_key).toContain(draft.body.batch_id);
    expect(submitted.body.tier_tasks).toHaveLength(1);
    expect(submitted.body.task_id).toBe(submitted.body.tier_tasks[0].task_id);

    const done = await waitFor(draft.body.batch_id);
    expect(done.status).toBe('COMPLETED');
    expect(done.current_tier).toBe(1);
    expect(done.error).toBeNull();
    expect(done.error_summary).toBeNull();
    const [tier0, tier1] = done.tier_tasks;
    expect(tier0).toMatchObject({
      tier_num: 0,
      source_type: 'bucket',
      status: 'COMPLETED',
      collection_ids: [chunks.collection_id],
      source_documents_fetched: 3,
      documents_after_source_filter: 3,
      documents_missing_input_fields: 0,
      documents_submitted_to_engine: 3,
      documents_written: 6,
    });
    expect(tier0.extractor_jobs).toEqual([expect.objectContaining({ extractor_type: 'text_extractor', status: 'COMPLETED', documents_written: 6 })]);
    expect(tier0.performance.bottlenecks.map((b: { stage_name: string }) => b.stage_name)).toEqual(
      expect.arrayContaining(['fetch', 'filter', 'extract:text_extractor', 'write:documents', 'write:vectors']),
    );
    expect(tier1).toMatchObject({
      tier_num: 1,
      source_type: 'collection',
      status: 'COMPLETED',
      source_collection_ids: [chunks.collection_id],
      parent_task_id: tier0.task_id,
      source_documents_fetched: 6,
      documents_written: 6,
    });
    expect(done.progress).toMatchObject({ records_total: 9, records_done: 9, documents_written: 12, percent: 100, eta_seconds: 0 });
    expect(done.progress.rate_per_second).toBeGreaterThan(0);
    expect(done.metadata).toEqual({ run: 1 });

    const docs = await api('POST', '/v1/collections/chunks/documents/list', { limit: 100 });
    expect(docs.body.results).toHaveLength(6);
    expect(new Set(docs.body.results.map((d: { root_object_id: string }) => d.root_object_id))).toEqual(new Set(objectIds));
    expect(docs.body.results.every((d: { processing_tier: number }) => d.processing_tier === 0)).toBe(true);
    const chained = await api('POST', '/v1/collections/summaries/documents/list', { limit: 100 });
    expect(chained.body.results).toHaveLength(6);
    const parentIds = new Set(docs.body.results.map((d: { document_id: string }) => d.document_id));
    for (const d of chained.body.results) {
      expect(d.processing_tier).toBe(1);
      expect(d.source_collection_id).toBe(chunks.collection_id);
      expect(parentIds.has(d.source_document_id)).toBe(true);
      expect(typeof d.fields.text).toBe('string');
    }
    const vectors = t.kernel.services.get(VectorIndex);
    expect(await vectors.count(featureIndexName(chunks.collection_id, 'text_embedding'))).toBe(6);
    const tree = await api('GET', `/v1/objects/${objectIds[0]}/decomposition-tree`);
    expect(tree.status).toBe(200);

    expect(events.find((e) => e.type === 'batch.completed' && e.data.batch_id === draft.body.batch_id)).toEqual({
      type: 'batch.completed',
      data: { batch_id: draft.body.batch_id, bucket_id: done.bucket_id, namespace_id: expect.stringMatching(/^ns_/), status: 'COMPLETED', documents_written: 12, error_summary: done.error_summary },
    });
  });

  it('never duplicates documents when the same objects are processed again', async () => {
    const again = await runBatch(objectIds);
    expect(again.status).toBe('COMPLETED');
    expect((await api('GET', '/v1/collections/chunks')).body.document_count).toBe(6);
    expect((await api('GET', '/v1/collections/summaries')).body.document_count).toBe(6);
    expect(await t.kernel.services.get(VectorIndex).count(featureIndexName(chunks.collection_id, 'text_embedding'))).toBe(6);
  });

  it('skips records an extractor cannot read, counting why, and completes', async () => {
    const noBlob = await api('POST', '/v1/buckets/docs/objects', { key: 'meta-only', metadata: { topic: 'meta' } });
    expect(noBlob.status).toBe(201);
    const image = await api('POST', '/v1/buckets/docs/objects', { key: 'pixel.png', blobs: [{ property: 'content', base64: PIXEL_PNG }] });
    expect(image.status).toBe(201);

    const done = await runBatch([objectIds[0]!, noBlob.body.object_id, image.body.object_id]);
    expect(done.status).toBe('COMPLETED');
    expect(done.error).toBeNull();
    expect(done.error_summary).toBeNull();
    const tier0 = done.tier_tasks[0];
    expect(tier0).toMatchObject({
      status: 'COMPLETED',
      errors: [],
      source_documents_fetched: 3,
      documents_submitted_to_engine: 1,
      documents_skipped: 2,
      skipped_reasons: { no_input_field: 1, unsupported_type: 1 },
      documents_missing_input_fields: 1,
      documents_written: 2,
    });
    expect(tier0.extractor_jobs[0]).toMatchObject({ extractor_type: 'text_extractor', status: 'COMPLETED', documents_skipped: 2, documents_written: 2 });
    // Progress counts records: 3 objects, then the 2 chunk documents tier 1 reads.
    expect(done.progress).toMatchObject({ records_total: 5, records_done: 5, records_skipped: 2, records_failed: 0, documents_written: 4, percent: 100 });
  });

  it('cancels queued work, and refuses what the state machine does not allow', async () => {
    const queue = t.kernel.services.get(TaskQueue);
    const created = await api('POST', '/v1/buckets/docs/batches', { object_ids: objectIds });
    const id = created.body.batch_id;
    expect((await api('POST', `/v1/buckets/docs/batches/${id}/retry`)).status).toBe(409);
    expect((await api('POST', `/v1/buckets/docs/batches/${id}/cancel`)).status).toBe(409);
    expect((await api('POST', `/v1/buckets/docs/batches/${id}/submit`)).status).toBe(202);
    expect((await api('POST', `/v1/buckets/docs/batches/${id}/submit`)).status).toBe(409);
    expect((await api('POST', `/v1/buckets/docs/batches/${id}/objects`, { object_ids: [objectIds[0]] })).status).toBe(409);
    expect((await api('DELETE', `/v1/buckets/docs/batches/${id}`)).status).toBe(409);

    expect(await t.kernel.services.get(BatchHealth).run()).toBeGreaterThanOrEqual(1);
    const probed = await api('GET', `/v1/buckets/docs/batches/${id}`);
    expect(probed.body.internal_metadata.last_health_check).toMatchObject({
      health_status: 'healthy',
      total_documents: 0,
      processed_documents: 0,
      vector_populated_count: 0,
      missing_features: [],
    });
    expect(probed.body.internal_metadata.last_health_check.stall_duration_seconds).toBeGreaterThanOrEqual(0);

    const canceled = await api('POST', `/v1/buckets/docs/batches/${id}/cancel`);
    expect(canceled.status).toBe(200);
    expect(canceled.body.status).toBe('CANCELED');
    expect(canceled.body.tier_tasks[0].status).toBe('CANCELED');
    await expect.poll(() => events.filter((e) => e.data.batch_id === id)).toEqual([
      {
        type: 'batch.canceled',
        data: { batch_id: id, bucket_id: canceled.body.bucket_id, namespace_id: expect.stringMatching(/^ns_/), status: 'CANCELED', documents_written: 0, error_summary: canceled.body.error_summary, canceled_tier: canceled.body.current_tier },
      },
    ]);
    await queue.drain();
    const still = await api('GET', `/v1/buckets/docs/batches/${id}`);
    expect(still.body.status).toBe('CANCELED');
    expect(still.body.progress.records_done).toBe(0);

    const patched = await api('PATCH', `/v1/buckets/docs/batches/${id}`, { metadata: { note: 'kept' } });
    expect(patched.status).toBe(200);
    expect(patched.body).toMatchObject({ batch_id: id, status: 'CANCELED', metadata: { note: 'kept' } });
    expect(Array.isArray(patched.body.tier_tasks)).toBe(true);
    expect((await api('DELETE', `/v1/buckets/docs/batches/${id}`)).body).toEqual({ batch_id: id, deleted: true });
    expect((await api('GET', `/v1/buckets/docs/batches/${id}`)).status).toBe(404);
  });

  it('validates input: unknown objects, empty submit, bad bodies', async () => {
    const unknown = await api('POST', '/v1/buckets/docs/batches', { object_ids: ['obj_nope'] });
    expect(unknown.status).toBe(400);
    expect(unknown.body.detail ?? unknown.body.message ?? JSON.stringify(unknown.body)).toBeTruthy();
    const empty = await api('POST', '/v1/buckets/docs/batches', {});
    expect(empty.status).toBe(201);
    expect((await api('POST', `/v1/buckets/docs/batches/${empty.body.batch_id}/submit`)).status).toBe(400);
    expect((await api('POST', '/v1/buckets/docs/batches', { object_ids: 'x' })).status).toBe(422);
    expect((await api('PATCH', `/v1/buckets/docs/batches/${empty.body.batch_id}`, {})).status).toBe(422);
    expect((await api('GET', '/v1/buckets/docs/batches/btch_missing')).status).toBe(404);

    const list = await api('GET', '/v1/buckets/docs/batches?limit=2');
    expect(list.status).toBe(200);
    expect(list.body.results).toHaveLength(2);
    expect(list.body.has_next).toBe(true);
    const next = await api('GET', `/v1/buckets/docs/batches?limit=2&cursor=${encodeURIComponent(list.body.next_cursor)}`);
    expect(next.body.results[0].batch_id).not.toBe(list.body.results[1].batch_id);
    const drafts = await api('GET', '/v1/buckets/docs/batches?status=DRAFT');
    expect(drafts.body.results.every((b: { status: string }) => b.status === 'DRAFT')).toBe(true);
  });

  it("takes only the bucket's own objects, and submits only those still there", async () => {
    expect((await api('POST', '/v1/buckets', { bucket_name: 'elsewhere' })).status).toBe(201);
    const foreign = await api('POST', '/v1/buckets/elsewhere/objects', { blobs: [{ property: 'content', text: 'not in docs' }] });
    const mixed = await api('POST', '/v1/buckets/docs/batches', { object_ids: [foreign.body.object_id] });
    expect(mixed.status).toBe(400);
    expect(mixed.body.error.details.missing_object_ids).toEqual([foreign.body.object_id]);

    const doomed = await api('POST', '/v1/buckets/docs/objects', { blobs: [{ property: 'content', text: 'deleted before submit' }] });
    const draft = await api('POST', '/v1/buckets/docs/batches', { object_ids: [doomed.body.object_id] });
    expect(draft.status).toBe(201);
    expect((await api('DELETE', `/v1/buckets/docs/objects/${doomed.body.object_id}`)).status).toBe(200);
    const submit = await api('POST', `/v1/buckets/docs/batches/${draft.body.batch_id}/submit`);
    expect(submit.status).toBe(400);
    expect(submit.body.error.message).toMatch(/None of the batch objects exists any more/);
    expect((await api('GET', `/v1/buckets/docs/batches/${draft.body.batch_id}`)).body.status).toBe('DRAFT');
  });

  it('refuses to submit when no collection reads the bucket', async () => {
    expect((await api('POST', '/v1/buckets', { bucket_name: 'lonely' })).status).toBe(201);
    const obj = await api('POST', '/v1/buckets/lonely/objects', { blobs: [{ property: 'content', text: 'alone' }] });
    const batch = await api('POST', '/v1/buckets/lonely/batches', { object_ids: [obj.body.object_id] });
    const submit = await api('POST', `/v1/buckets/lonely/batches/${batch.body.batch_id}/submit`);
    expect(submit.status).toBe(409);
    expect(submit.body.message ?? submit.body.error?.message).toMatch(/No enabled collection reads this bucket/);
  });

  it("removes vectors with their documents, and a collection's indexes with the collection", async () => {
    const vectors = t.kernel.services.get(VectorIndex);
    const index = featureIndexName(chunks.collection_id, 'text_embedding');
    const before = await vectors.count(index);
    const docs = await api('POST', '/v1/collections/chunks/documents/list', { limit: 1 });
    const id = docs.body.results[0].document_id;
    expect((await api('DELETE', `/v1/collections/chunks/documents/${id}`)).status).toBe(200);
    expect(await vectors.count(index)).toBe(before - 1);
    expect(await vectors.get(index, [id])).toEqual([]);
    expect((await api('DELETE', '/v1/collections/summaries')).status).toBe(200);
    expect((await api('DELETE', '/v1/collections/chunks')).status).toBe(200);
    await expect(vectors.count(index)).rejects.toThrow();
  });
});
