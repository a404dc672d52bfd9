/**
 * Spawned workers load a model only when a call for it reaches them, and the pool shares the machine's
 * cores out between its workers as model threads: both visible in what each worker reports over the
 * Health RPC. Default pool size: one worker per four cores, at least one.
 */
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startInferenceWorkers, type InferenceRuntime } from '../../../kernel/inference/index.js';
import { defaultInferenceWorkers } from '../../../kernel/inference/model-io.js';
import { silentLogger } from '../../support/logs.js';

const MODELS = path.join(__dirname, 'models.ts');

describe('pool sizing', () => {
  it('spawns one worker per four cores, at least one', () => {
    expect([1, 2, 3, 4, 7, 8, 16, 64].map(defaultInferenceWorkers)).toEqual([1, 1, 1, 1, 1, 2, 4, 16]);
  });
});

describe('lazy models in spawned workers', () => {
  let runtime: InferenceRuntime;
  beforeAll(async () => {
    runtime = await startInferenceWorkers({
      plugins: [MODELS],
      workers: 2,
      log: silentLogger(),
      pool: { logLevel: 'silent', shutdownGraceMs: 2_000 },
      client: { timeoutMs: 10_000 },
    });
  });
  afterAll(async () => {
    await runtime?.stop();
  });

  it('gives each worker its share of the cores as model threads', async () => {
    const health = await runtime.client.health();
    const share = Math.max(1, Math.floor(os.availableParallelism() / 2));
    expect(runtime.pool!.threadsPerWorker()).toBe(share);
    expect(health.workers.map((w) => w.modelThreads)).toEqual([share, share]);
    for (const worker of health.workers) expect(worker.rssBytes).toBeGreaterThan(0);
  });

  it('loads a model only in the worker a call reached; a model never asked for is loaded nowhere', async () => {
    const before = await runtime.client.health();
    expect(before.workers.map((w) => w.loadedModels)).toEqual([[], []]);
    // One call: round-robin sends it to one worker.
    await runtime.client.embedText('chars', ['only one worker sees this']);
    const after = await runtime.client.health();
    const loaded = after.workers.map((w) => w.loadedModels ?? []);
    expect(loaded.filter((models) => models.includes('chars'))).toHaveLength(1);
    expect(loaded.flat()).not.toContain('reader');
    // The OCR model loads where the OCR call lands, and only there.
    await runtime.client.ocr('reader', [Buffer.from('text')]);
    const last = (await runtime.client.health()).workers.map((w) => w.loadedModels ?? []);
    expect(last.filter((models) => models.includes('reader'))).toHaveLength(1);
  });
});
