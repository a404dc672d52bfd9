/**
 * What a batch says matches what happened: a retry runs only what failed and the batch's status and
 * counts cover every run; a cancel stops running work and counts what it wrote; progress counts records
 * once with percent and ETA in the same unit; with nobody taking tasks, health and the batch say so.
 * Test extractors (test/support/plugins) fail on demand (flaky_extractor) or wait at a gate the test opens
 * (gate_extractor). These kernels run no task runner: the tests run the queued tasks with drain().
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TesseraEvent } from '../../../../kernel/events/event-bus.js';
import { EventBus, TaskQueue } from '../../../../kernel/tokens.js';
import builtins from '../../../../plugins/index.js';
import { startTestKernel, type TestKernel } from '../../../support/kernel.js';
import flakyExtractor from '../../../support/plugins/flaky-extractor.js';
import gateExtractor, { gate } from '../../../support/plugins/gate-extractor.js';

const TERMINAL = ['COMPLETED', 'COMPLETED_WITH_ERRORS', 'FAILED', 'CANCELED'];

function harness(getKernel: () => TestKernel) {
  const api = (method: string, p: string, body?: unknown) =>
    getKernel().request(method, p, { key: getKernel().adminKey, headers: { 'X-Namespace': 'work' }, ...(body !== undefined ? { body } : {}) });

  async function until<T>(what: string, probe: () => Promise<T | undefined> | T | undefined): Promise<T> {
    for (let i = 0; i < 600; i++) {
      const value = await probe();
      if (value !== undefined && value !== false) return value;
      await new Promise((r) => setTimeout(r, 50));
    }
    throw new Error(`gave up waiting: ${what}`);
  }

  async function finish(bucket: string, batchId: string): Promise<Record<string, any>> {
    return until(`batch ${batchId} to end`, async () => {
      await getKernel().kernel.services.get(TaskQueue).drain();
      const res = await api('GET', `/v1/buckets/${bucket}/batches/${batchId}`);
      return TERMINAL.includes(res.body.status) ? (res.body as Record<string, any>) : undefined;
    });
  }

  async function submit(bucket: string, objectIds: string[]): Promise<string> {
    const created = await api('POST', `/v1/buckets/${bucket}/batches`, { object_ids: objectIds });
    expect(created.status).toBe(201);
    expect((await api('POST', `/v1/buckets/${bucket}/batches/${created.body.batch_id}/submit`)).status).toBe(202);
    return created.body.batch_id as string;
  }

  async function objects(bucket: string, count: number, metadata: (i: number) => Record<string, unknown> = () => ({})): Promise<string[]> {
    expect((await api('POST', '/v1/buckets', { bucket_name: bucket })).status).toBe(201);
    const ids: string[] = [];
    for (let i = 0; i < count; i++) {
      const res = await api('POST', `/v1/buckets/${bucket}/objects`, { key: `n/${i}.txt`, metadata: metadata(i), blobs: [{ property: 'content', text: `note ${i}` }] });
      expect(res.status).toBe(201);
      ids.push(res.body.object_id);
    }
    return ids;
  }

  async function collection(name: string, bucket: string, extractor: string): Promise<string> {
    const res = await api('POST', '/v1/collections/create', {
      collection_name: name,
      source: { type: 'bucket', bucket_id: bucket },
      feature_extractors: [{ feature_extractor_name: extractor }],
    });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    return res.body.collection_id as string;
  }

  const documentCount = async (name: string) => (await api('GET', `/v1/collections/${name}`)).body.document_count as number;

  return { api, until, finish, submit, objects, collection, documentCount };
}

describe('batch retries, progress and waiting for a worker', () => {
  let t: TestKernel;
  const h = harness(() => t);

  beforeAll(async () => {
    t = await startTestKernel({
      plugins: [...builtins, flakyExtractor, gateExtractor],
      config: { batchChunkSize: 2, batchHealthIntervalMs: 0, runTasks: false, taskWaitWarnMs: 0 },
    });
    expect((await t.client().POST('/v1/namespaces', { body: { namespace_name: 'work' } })).response.status).toBe(201);
  }, 120_000);

  afterAll(async () => {
    gate.open();
    await t?.stop();
  });

  it('retries only the failed records: counts keep what earlier runs wrote, and a retry that fixes them completes', async () => {
    const failures: TesseraEvent[] = [];
    const unsubscribe = t.kernel.services.get(EventBus).subscribe('extractor.failure', async (event) => void failures.push(event));
    const ids = await h.objects('notes', 3, (i) => ({ fail: i === 1 }));
    await h.collection('steady', 'notes', 'passthrough_extractor');
    const flaky = await h.collection('flaky', 'notes', 'flaky_extractor');

    const batchId = await h.submit('notes', ids);
    const first = await h.finish('notes', batchId);
    expect(first.status).toBe('COMPLETED_WITH_ERRORS');
    expect(first.tier_tasks[0]).toMatchObject({ status: 'COMPLETED_WITH_ERRORS', documents_written: 5 });
    expect(first.tier_tasks[0].errors).toEqual([
      expect.objectContaining({ error_type: 'extraction', component: 'flaky_extractor', collection_id: flaky, collection_name: 'flaky', affected_document_ids: [ids[1]] }),
    ]);
    expect(first.error_summary).toEqual({ extraction: 1 });
    expect(first.progress).toMatchObject({ records_total: 3, records_done: 3, records_failed: 1, documents_written: 5, percent: 100 });
    const logged = t.logs.filter((line) => line.includes(batchId));
    expect(logged.some((line) => line.includes('batch records failed') && line.includes('"level":40'))).toBe(true);
    expect(logged.some((line) => line.includes('batch finished'))).toBe(true);
    // Webhooks hear of it: one extractor.failure for the failed record, naming the collection and the extractor.
    await h.until('the extractor.failure event', () => failures.length > 0 || undefined);
    expect(failures).toHaveLength(1);
    expect(failures[0]).toMatchObject({
      type: 'extractor.failure',
      organization_id: expect.stringMatching(/^org_/),
      data: { collection_id: flaky, collection_name: 'flaky', extractor: 'flaky_extractor', error_type: 'extraction', affected_document_ids: [ids[1]], affected_count: 1 },
    });
    unsubscribe();

    // Retried while the record still fails: still COMPLETED_WITH_ERRORS, and what the other collection wrote still counts.
    expect((await h.api('POST', `/v1/buckets/notes/batches/${batchId}/retry`)).status).toBe(202);
    const second = await h.finish('notes', batchId);
    expect(second.status).toBe('COMPLETED_WITH_ERRORS');
    expect(second.tier_tasks[0]).toMatchObject({ documents_written: 5, source_documents_fetched: 6 });
    expect(second.tier_tasks[0].errors).toEqual([expect.objectContaining({ collection_id: flaky, affected_document_ids: [ids[1]], affected_count: 1 })]);
    expect(second.progress).toMatchObject({ records_total: 3, records_done: 3, records_failed: 1, documents_written: 5 });
    // Only the failed record of the failed collection ran again: one chunk.
    const retryTier = await t.kernel.services.get(TaskQueue).get(second.tier_tasks[0].task_id);
    expect(retryTier?.result).toEqual({ chunks: 1 });

    // Fixed, then retried: everything succeeded, over both runs.
    expect((await h.api('PATCH', `/v1/buckets/notes/objects/${ids[1]}`, { metadata: { fail: false } })).status).toBe(200);
    expect((await h.api('POST', `/v1/buckets/notes/batches/${batchId}/retry`)).status).toBe(202);
    const third = await h.finish('notes', batchId);
    expect(third.status).toBe('COMPLETED');
    expect(third.error_summary).toBeNull();
    expect(third.tier_tasks[0]).toMatchObject({ status: 'COMPLETED', errors: [], documents_written: 6 });
    expect(third.progress).toMatchObject({ records_total: 3, records_done: 3, records_failed: 0, documents_written: 6, percent: 100, eta_seconds: 0 });
    expect(await h.documentCount('steady')).toBe(3);
    expect(await h.documentCount('flaky')).toBe(3);
  });

  it('fails a tier where every record failed, naming the collection', async () => {
    const ids = await h.objects('doomed', 2, () => ({ fail: true }));
    const flaky = await h.collection('doomed-flaky', 'doomed', 'flaky_extractor');
    const ended: TesseraEvent[] = [];
    const unsubscribe = t.kernel.services.get(EventBus).subscribe('batch.*', async (event) => void ended.push(event));
    const done = await h.finish('doomed', await h.submit('doomed', ids));
    unsubscribe();
    expect(done.status).toBe('FAILED');
    // The same fields as batch.completed and batch.canceled, and why it failed.
    expect(ended.filter((e) => e.data.batch_id === done.batch_id)).toEqual([
      expect.objectContaining({
        type: 'batch.failed',
        data: {
          batch_id: done.batch_id, bucket_id: done.bucket_id, namespace_id: expect.stringMatching(/^ns_/), status: 'FAILED', documents_written: 0,
          error_summary: done.error_summary, error: done.error, failed_tier: 0,
        },
      }),
    ]);
    expect(done.error).toContain(`tier 0 failed: collection 'doomed-flaky' (${flaky}), flaky_extractor:`);
    expect(done.progress).toMatchObject({ records_total: 2, records_done: 2, records_failed: 2, documents_written: 0 });
    expect(t.logs.some((line) => line.includes(done.batch_id) && line.includes('batch failed'))).toBe(true);
  });

  it('counts progress in records (not record × collection), with percent and ETA from the same count', async () => {
    const ids = await h.objects('gated', 6);
    await h.collection('gated-copies', 'gated', 'passthrough_extractor');
    await h.collection('gated-held', 'gated', 'gate_extractor');
    gate.reset();
    gate.hold(2);
    const batchId = await h.submit('gated', ids);
    const draining = t.kernel.services.get(TaskQueue).drain();
    // The gate let one chunk of two records through; the next chunk waits at it.
    await h.until('a second gated chunk', () => gate.entered >= 4);
    const mid = (await h.api('GET', `/v1/buckets/gated/batches/${batchId}`)).body.progress;
    expect(mid.records_total).toBe(6);
    expect(mid.records_done).toBeLessThan(6);
    expect(mid.percent).toBeCloseTo((mid.records_done / mid.records_total) * 100, 1);
    if (mid.records_done > 0) {
      expect(mid.rate_per_second).toBeGreaterThan(0);
      expect(mid.eta_seconds).toBeCloseTo((mid.records_total - mid.records_done) / mid.rate_per_second, 0);
    } else {
      expect(mid.eta_seconds).toBeNull();
    }
    gate.open();
    await draining;
    const done = await h.finish('gated', batchId);
    expect(done.status).toBe('COMPLETED');
    expect(done.progress).toMatchObject({ records_total: 6, records_done: 6, percent: 100, eta_seconds: 0, documents_written: 12 });
    expect(done.tier_tasks[0]).toMatchObject({ source_documents_fetched: 12, documents_written: 12 });
    for (const stage of done.tier_tasks[0].performance.bottlenecks) {
      expect(stage.wall_time_ms).toBeGreaterThanOrEqual(0);
      expect(stage.wall_time_ms).toBeGreaterThanOrEqual(stage.max_time_ms);
    }
  });

  it('with no process taking tasks, health is degraded and a batch says it waits for a worker', async () => {
    const ids = await h.objects('idle', 1);
    await h.collection('idle-copies', 'idle', 'passthrough_extractor');
    const batchId = await h.submit('idle', ids);

    const waiting = await h.api('GET', `/v1/buckets/idle/batches/${batchId}`);
    expect(waiting.body.status).toBe('PENDING');
    expect(waiting.body.progress.waiting_for_worker).toBe(true);
    expect(waiting.body.progress.status_message).toMatch(/Waiting for a worker.*tessera worker.*TESSERA_RUN_TASKS=true/);

    const health = await h.api('GET', '/v1/health');
    expect(health.status).toBe(200);
    expect(health.body.status).toBe('degraded');
    expect(health.body.components.task_queue).toMatchObject({
      status: 'degraded',
      required: false,
      details: { live_consumers: 0, queued: expect.any(Number), oldest_queued_age_seconds: expect.any(Number) },
    });
    expect(health.body.components.task_queue.details.queued).toBeGreaterThanOrEqual(1);
    expect(health.body.components.task_queue.error).toMatch(/no process is taking tasks/);

    const done = await h.finish('idle', batchId);
    expect(done.progress.waiting_for_worker).toBe(false);
    const after = await h.api('GET', '/v1/health');
    expect(after.body.components.task_queue).toMatchObject({ status: 'up', details: { queued: 0, oldest_queued_age_seconds: null } });
  });
});

describe('canceling a batch while a chunk runs', () => {
  let t: TestKernel;
  const h = harness(() => t);

  beforeAll(async () => {
    t = await startTestKernel({
      plugins: [...builtins, gateExtractor],
      config: { batchChunkSize: 40, batchHealthIntervalMs: 0, runTasks: false },
    });
    expect((await t.client().POST('/v1/namespaces', { body: { namespace_name: 'work' } })).response.status).toBe(201);
  }, 120_000);

  afterAll(async () => {
    gate.open();
    await t?.stop();
  });

  it('stops the chunk early and counts exactly the documents it wrote; a retry runs the rest', async () => {
    // 34 records in one chunk: 32 are extracted side by side (and held at the gate), 2 wait for a free lane.
    const ids = await h.objects('many', 34);
    await h.collection('held', 'many', 'gate_extractor');
    gate.reset();
    gate.hold(0);
    const batchId = await h.submit('many', ids);
    const draining = t.kernel.services.get(TaskQueue).drain();
    await h.until('32 records at the gate', () => gate.entered >= 32);

    const canceled = await h.api('POST', `/v1/buckets/many/batches/${batchId}/cancel`);
    expect(canceled.status).toBe(200);
    expect(canceled.body.status).toBe('CANCELED');
    await h.until('the chunk to notice the cancel', () => t.logs.some((line) => line.includes(batchId) && line.includes('batch chunk stopping')));
    gate.open();
    await draining;

    const after = (await h.api('GET', `/v1/buckets/many/batches/${batchId}`)).body;
    const written = await h.documentCount('held');
    expect(written).toBe(32);
    expect(after.status).toBe('CANCELED');
    expect(after.progress).toMatchObject({ documents_written: written, records_total: 34, records_done: 32 });
    expect(after.tier_tasks[0]).toMatchObject({ status: 'CANCELED', documents_written: written });

    expect((await h.api('POST', `/v1/buckets/many/batches/${batchId}/retry`)).status).toBe(202);
    const done = await h.finish('many', batchId);
    expect(done.status).toBe('COMPLETED');
    expect(await h.documentCount('held')).toBe(34);
    expect(done.progress).toMatchObject({ documents_written: 34, records_total: 34, records_done: 34, percent: 100 });
    expect(done.tier_tasks[0]).toMatchObject({ status: 'COMPLETED', documents_written: 34 });
  });
});
