/** The kernel spawns inference workers over the built-in plugins, and the API process reaches their models. */
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Inference } from '../../../kernel/tokens.js';
import { startTestKernel, type TestKernel } from '../../support/kernel.js';

describe('inference in the kernel', () => {
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

  it('serves the built-in models from a spawned worker and reports it in health', async () => {
    const inference = t.kernel.services.get(Inference);
    const models = await inference.listModels();
    expect(models.map((m) => m.name).sort()).toEqual(['hashed-ngram-text', 'image-descriptor', 'lexical-reranker', 'log-mel-audio', 'paddle-ocr']);
    const [a, b] = await inference.embedText('hashed-ngram-text', ['a lamp for the desk', 'a desk lamp']);
    expect(a).toHaveLength(384);
    expect(a!.reduce((sum, x, i) => sum + x * b![i]!, 0)).toBeGreaterThan(0.3);
    const health = (await t.client(undefined).GET('/v1/health', {})).data!;
    expect(health.components.inference).toMatchObject({ status: 'up', required: false });
  });

  it('answers ServiceUnavailable from a kernel without workers', async () => {
    const bare = await startTestKernel();
    try {
      await expect(bare.kernel.services.get(Inference).embedText('hashed-ngram-text', ['x'])).rejects.toMatchObject({ status: 503 });
    } finally {
      await bare.stop();
    }
  });
});
