/**
 * An ONNX text model dropped into TESSERA_MODEL_DIR, used end to end: a collection picks it for the text
 * extractor (its dims become the feature's), a batch embeds the objects through a spawned inference
 * worker, and nearest-neighbour search over the written vectors finds the text on the same topic.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Inference, VectorIndex } from '../../../kernel/tokens.js';
import { featureIndexName } from '../../../kernel/vectors/naming.js';
import builtins from '../../../plugins/index.js';
import { createOnnxModels } from '../../../plugins/models/onnx/index.js';
import { writeTinyOnnxModels } from '../../support/onnx/index.js';
import { startTestKernel, type TestKernel } from '../../support/kernel.js';

describe('an ONNX model from TESSERA_MODEL_DIR through a collection', () => {
  let t: TestKernel;
  let dir: string;
  let textModel: string;
  let textDims: number;
  const previous = process.env.TESSERA_MODEL_DIR;

  const api = (method: string, p: string, body?: unknown) =>
    t.request(method, p, { key: t.adminKey, headers: { 'X-Namespace': 'onnx' }, ...(body !== undefined ? { body } : {}) });

  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'tessera-onnx-collection-'));
    ({ textModelName: textModel, textDims } = await writeTinyOnnxModels(dir));
    // Spawned inference workers inherit the environment and find the folder the same way the server does.
    process.env.TESSERA_MODEL_DIR = dir;
    t = await startTestKernel({
      plugins: [...builtins, ...createOnnxModels(dir)],
      inferencePlugins: [path.resolve(__dirname, '../../../plugins/models/onnx/index.ts')],
      config: { inferenceWorkers: 1, batchHealthIntervalMs: 0 },
    });
    expect((await t.client().POST('/v1/namespaces', { body: { namespace_name: 'onnx' } })).response.status).toBe(201);
  }, 120_000);

  afterAll(async () => {
    await t?.stop();
    if (previous === undefined) delete process.env.TESSERA_MODEL_DIR;
    else process.env.TESSERA_MODEL_DIR = previous;
    await rm(dir, { recursive: true, force: true });
  });

  it('refuses a collection naming a model nobody serves, saying where an onnx- model comes from', async () => {
    expect((await api('POST', '/v1/buckets', { bucket_name: 'ghost' })).status).toBe(201);
    const res = await api('POST', '/v1/collections/create', {
      collection_name: 'nope',
      source: { type: 'bucket', bucket_id: 'ghost' },
      feature_extractors: [{ feature_extractor_name: 'text_extractor', parameters: { model: 'onnx-missing' } }],
    });
    expect(res.status, res.text).toBe(422);
    expect(res.body.detail).toEqual([
      {
        loc: ['body', 'feature_extractors', 0, 'parameters', 'model'],
        msg: expect.stringMatching(/^unknown model; served models: .*onnx-tiny-text.*\. An 'onnx-missing' model is served from a folder 'missing' in TESSERA_MODEL_DIR/),
        type: 'unknown_model',
      },
    ]);
  });

  it('embeds documents with the chosen model and finds them by meaning', async () => {
    expect((await api('POST', '/v1/buckets', { bucket_name: 'notes' })).status).toBe(201);
    const texts = { pets: 'my cat and the puppy', finance: 'the bank loan and stock price', sky: 'rain and wind in a storm' };
    const ids: Record<string, string> = {};
    for (const [name, text] of Object.entries(texts)) {
      const res = await api('POST', '/v1/buckets/notes/objects', { key: name, blobs: [{ property: 'content', text }] });
      expect(res.status).toBe(201);
      ids[name] = res.body.object_id;
    }
    const created = await api('POST', '/v1/collections/create', {
      collection_name: 'semantic',
      source: { type: 'bucket', bucket_id: 'notes' },
      feature_extractors: [{ feature_extractor_name: 'text_extractor', parameters: { model: textModel } }],
    });
    expect(created.status).toBe(201);
    expect(created.body.output_schema.properties.text_embedding['x-feature']).toMatchObject({ dims: textDims, model: textModel });

    const batch = await api('POST', '/v1/buckets/notes/batches', { object_ids: Object.values(ids) });
    await api('POST', `/v1/buckets/notes/batches/${batch.body.batch_id}/submit`);
    let done: Record<string, any> = {};
    for (let i = 0; i < 300; i++) {
      done = (await api('GET', `/v1/buckets/notes/batches/${batch.body.batch_id}`)).body;
      if (!['PENDING', 'IN_PROGRESS'].includes(done.status)) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(done.status).toBe('COMPLETED');
    expect(done.tier_tasks[0].documents_written).toBe(3);

    const query = (await t.kernel.services.get(Inference).embedText(textModel, ['a dog with fur']))[0]!;
    expect(query).toHaveLength(textDims);
    const hits = await t.kernel.services.get(VectorIndex).search(featureIndexName(created.body.collection_id, 'text_embedding'), { vector: query, limit: 3 });
    expect(hits).toHaveLength(3);
    expect(hits[0]!.payload.root_object_id).toBe(ids.pets);
  });
});
