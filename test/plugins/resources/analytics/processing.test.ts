/**
 * Engine and extractor analytics from a real batch: text objects processed by `text_extractor` through the
 * task queue, then `/v1/analytics/engine/performance` and `/v1/analytics/extractors/{name}/performance`
 * report what ran, and a failing object counts as a failure.
 */
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TaskQueue, TenantStore } from '../../../../kernel/tokens.js';
import builtins from '../../../../plugins/index.js';
import { startTestKernel, type TestKernel } from '../../../support/kernel.js';

const TERMINAL = ['COMPLETED', 'COMPLETED_WITH_ERRORS', 'FAILED', 'CANCELED'];
const NS = 'library';

describe('engine and extractor analytics', () => {
  let t: TestKernel;
  let batch: Record<string, any>;
  const api = (method: string, p: string, body?: unknown, key = t.adminKey, ns: string | null = NS) =>
    t.request(method, p, { key, headers: ns ? { 'X-Namespace': ns } : {}, ...(body !== undefined ? { body } : {}) });

  beforeAll(async () => {
    t = await startTestKernel({
      plugins: builtins,
      inferencePlugins: [path.resolve(__dirname, '../../../../plugins/models/hashed-ngram-text/index.ts')],
      config: { inferenceWorkers: 1, batchChunkSize: 2, batchHealthIntervalMs: 0, runTasks: false },
    });
    expect((await api('POST', '/v1/namespaces', { namespace_name: NS }, t.adminKey, null)).status).toBe(201);
    expect((await api('POST', '/v1/buckets', { bucket_name: 'texts' })).status).toBe(201);
    const collection = await api('POST', '/v1/collections/create', {
      collection_name: 'passages', source: { type: 'bucket', bucket_id: 'texts' }, feature_extractors: [{ feature_extractor_name: 'text_extractor' }],
    });
    expect(collection.status, collection.text).toBe(201);
    const ids: string[] = [];
    for (const [key, text] of [['a.txt', 'warm desk lamp'], ['b.txt', 'brass floor lamp'], ['c.txt', 'paper lantern'], ['d.txt', 'steel pendant'], ['e.txt', 'spare bulb']]) {
      const res = await api('POST', '/v1/buckets/texts/objects', { key, blobs: [{ property: 'content', text }] });
      expect(res.status, res.text).toBe(201);
      ids.push(res.body.object_id);
    }
    const created = await api('POST', '/v1/buckets/texts/batches', { object_ids: ids });
    expect((await api('POST', `/v1/buckets/texts/batches/${created.body.batch_id}/submit`)).status).toBe(202);
    for (let i = 0; i < 600 && !batch; i++) {
      await t.kernel.services.get(TaskQueue).drain();
      const res = await api('GET', `/v1/buckets/texts/batches/${created.body.batch_id}`);
      if (TERMINAL.includes(res.body.status)) batch = res.body;
      else await new Promise((r) => setTimeout(r, 50));
    }
    expect(batch?.status).toBe('COMPLETED');
  }, 180_000);

  afterAll(async () => {
    await t?.stop();
  });

  it('reports the extractor: objects, documents, time per object, no failures; a namespace narrows it', async () => {
    const res = await api('GET', '/v1/analytics/extractors/text_extractor/performance', undefined, t.adminKey, null);
    expect(res.status, res.text).toBe(200);
    expect(res.body).toMatchObject({ extractor_name: 'text_extractor', namespace_id: null, batches: 1 });
    expect(res.body.totals).toMatchObject({ chunks: 3, objects: 5, documents_written: 5, failed_objects: 0, failure_rate: 0, retries: 0 });
    expect(res.body.totals.total_ms).toBeGreaterThan(0);
    expect(res.body.totals.avg_ms_per_object).toBeCloseTo(res.body.totals.total_ms / 5, 2);
    expect(res.body.collections).toEqual([expect.objectContaining({ collection_id: expect.stringMatching(/^col_/), objects: 5 })]);

    expect((await api('GET', '/v1/analytics/extractors/text_extractor/performance')).body.totals.objects).toBe(5);
    expect((await api('POST', '/v1/namespaces', { namespace_name: 'empty-shelf' }, t.adminKey, null)).status).toBe(201);
    const other = await api('GET', '/v1/analytics/extractors/text_extractor/performance', undefined, t.adminKey, 'empty-shelf');
    expect(other.body).toMatchObject({ batches: 0, totals: { objects: 0, failure_rate: null, avg_ms_per_object: null }, collections: [] });
    expect((await api('GET', '/v1/analytics/extractors/image_extractor/performance')).body.totals.objects).toBe(0);

    const unknown = await api('GET', '/v1/analytics/extractors/no_such_extractor/performance');
    expect(unknown.status).toBe(404);
    expect(unknown.body.error.message).toContain('GET /v1/collections/features/extractors');
  });

  it('reports model calls: per model and method, with latency read from the histogram and throughput', async () => {
    const res = await api('GET', '/v1/analytics/inference/performance', undefined, t.adminKey, null);
    expect(res.status, res.text).toBe(200);
    const embed = res.body.models.find((m: { method: string }) => m.method === 'embedText');
    expect(embed).toMatchObject({ model: expect.any(String), errors: 0, error_rate: 0 });
    // Five texts were embedded (possibly in fewer calls: small calls are sent together).
    expect(embed.items).toBeGreaterThanOrEqual(5);
    expect(embed.calls).toBeGreaterThanOrEqual(1);
    expect(embed.latency.p50_ms).toBeLessThanOrEqual(embed.latency.max_ms);
    expect(embed.latency.p95_ms).toBeGreaterThanOrEqual(embed.latency.p50_ms);
    expect(embed.items_per_second).toBeGreaterThan(0);
    expect(res.body.totals.calls).toBe(res.body.models.reduce((sum: number, m: { calls: number }) => sum + m.calls, 0));
    expect((await api('GET', '/v1/analytics/inference/performance?end_time=2026-01-01T00:00:00Z', undefined, t.adminKey, null)).body.totals)
      .toMatchObject({ calls: 0, error_rate: null, latency: { p50_ms: null, max_ms: null } });
  });

  it('reports the engine: tasks by type with run and wait times, utilization, the queue and the workers', async () => {
    const res = await api('GET', '/v1/analytics/engine/performance', undefined, t.adminKey, null);
    expect(res.status, res.text).toBe(200);
    const { totals, by_type: byType } = res.body;
    expect(totals.tasks).toBeGreaterThanOrEqual(4);
    expect(totals.completed).toBe(totals.tasks - totals.waiting - totals.running - totals.failed);
    expect(totals.run_ms.p50_ms).toBeGreaterThanOrEqual(0);
    expect(totals.busy_ms).toBeGreaterThan(0);
    expect(res.body.utilization).toBeGreaterThan(0);
    expect(byType.reduce((sum: number, row: { tasks: number }) => sum + row.tasks, 0)).toBe(totals.tasks);
    expect(byType.map((row: { task_type: string }) => row.task_type)).toEqual(expect.arrayContaining([expect.stringMatching(/batch|chunk|tier/)]));
    expect(res.body.queue).toEqual({ due: 0, scheduled: 0, running: 0 });
    expect(res.body.workers.live).toBeGreaterThanOrEqual(0);
    expect(res.body.series).toEqual([]);

    const daily = await api('GET', '/v1/analytics/engine/performance?group_by=day', undefined, t.adminKey, null);
    expect(daily.body.by_type).toEqual([]);
    expect(daily.body.series.reduce((sum: number, row: { tasks: number }) => sum + row.tasks, 0)).toBe(totals.tasks);

    // Another organization ran nothing.
    const otherKey = (await t.kernel.services.get(TenantStore).createOrganization({ name: 'org-b', ownerEmail: 'b@example.test' })).adminKeyPlaintext;
    const other = await api('GET', '/v1/analytics/engine/performance', undefined, otherKey, null);
    expect(other.body.totals.tasks).toBe(0);
  });
});
