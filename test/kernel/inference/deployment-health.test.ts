/**
 * GET /v1/health shows each part of the deployment with its memory: this API process, every inference
 * worker as it reports itself over gRPC (rss, loaded models, threads), and on PostgreSQL the processes
 * taking tasks (heartbeat rows). Models load lazily per worker, which health makes visible: a worker that
 * never got an OCR call has not loaded OCR. Runs on both backends (TEST_DATABASE_URL / NATS_URL).
 */
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Inference } from '../../../kernel/tokens.js';
import { startTestKernel, type TestKernel } from '../../support/kernel.js';

interface WorkerEntry {
  address: string;
  status: string;
  pid: number;
  rss_bytes: number;
  heap_used_bytes: number;
  loaded_models: string[];
  model_threads: number;
}

describe('health shows every part of the deployment and its memory', () => {
  let t: TestKernel;
  beforeAll(async () => {
    t = await startTestKernel({
      config: { inferenceWorkers: 1 },
      inferencePlugins: [path.resolve(__dirname, '../../../plugins/index.ts')],
    });
  });
  afterAll(async () => {
    await t.stop();
  });

  async function health() {
    const res = await t.client(undefined).GET('/v1/health', {});
    expect(res.response.status).toBe(200);
    return res.data!;
  }

  function workersOf(body: Awaited<ReturnType<typeof health>>): WorkerEntry[] {
    return (body.components.inference?.details as { workers: WorkerEntry[] }).workers;
  }

  it('reports this API process with its resident memory and heap', async () => {
    const body = await health();
    const api = body.components.api!;
    expect(api).toMatchObject({ status: 'up', kind: 'process', required: false });
    const details = api.details as Record<string, number>;
    expect(details.pid).toBe(process.pid);
    expect(details.rss_bytes).toBeGreaterThan(0);
    expect(details.heap_used_bytes).toBeGreaterThan(0);
    expect(details.heap_used_bytes).toBeLessThanOrEqual(details.heap_total_bytes!);
  });

  it('reports each inference worker as the worker reports itself, and loads models only when asked', async () => {
    let workers = workersOf(await health());
    expect(workers).toHaveLength(1);
    const [worker] = workers;
    expect(worker).toMatchObject({ status: 'serving' });
    expect(worker!.pid).not.toBe(process.pid);
    expect(worker!.rss_bytes).toBeGreaterThan(0);
    expect(worker!.heap_used_bytes).toBeGreaterThan(0);
    expect(worker!.model_threads).toBeGreaterThanOrEqual(1);
    // Nothing has been asked of it yet: no model is loaded, OCR included.
    expect(worker!.loaded_models).toEqual([]);

    await t.kernel.services.get(Inference).embedText('hashed-ngram-text', ['a lamp for the desk']);
    workers = workersOf(await health());
    expect(workers[0]!.loaded_models).toEqual(['hashed-ngram-text']);
    expect(workers[0]!.loaded_models).not.toContain('paddle-ocr');
  });

  it('sums the memory of the components that run processes', async () => {
    const body = await health();
    const byComponent = body.memory!.by_component;
    expect(byComponent.api).toBe((body.components.api!.details as { rss_bytes: number }).rss_bytes);
    expect(byComponent.inference).toBe(workersOf(body).reduce((sum, w) => sum + w.rss_bytes, 0));
    expect(body.memory!.total_rss_bytes).toBe(Object.values(byComponent).reduce((sum, n) => sum + n, 0));
    // The database and event bus are listed (embedded or remote) whatever the backend.
    expect(body.components.database).toMatchObject({ status: 'up' });
    expect(body.components.event_bus).toMatchObject({ status: 'up', kind: process.env.NATS_URL ? 'nats' : expect.any(String) });
  });

  it.runIf(Boolean(process.env.TEST_DATABASE_URL))('lists the processes taking tasks from their heartbeats (PostgreSQL)', async () => {
    const body = await health();
    const component = body.components.task_workers!;
    expect(component).toMatchObject({ status: 'up', required: false });
    const workers = (component.details as { workers: Array<Record<string, unknown>> }).workers;
    // This API process takes tasks too (TESSERA_RUN_TASKS defaults on); it is listed but counted as `api`.
    const self = workers.find((w) => w.this_process === true);
    expect(self).toMatchObject({ pid: process.pid, role: 'api', transport: process.env.NATS_URL ? 'nats' : 'database' });
    expect(self!.rss_bytes as number).toBeGreaterThan(0);
    expect(body.memory!.by_component.task_workers).toBe(0);
  });

  it.runIf(!process.env.TEST_DATABASE_URL)('has no task_workers component on the embedded database (one process)', async () => {
    const body = await health();
    expect(body.components.task_workers).toBeUndefined();
  });
});
