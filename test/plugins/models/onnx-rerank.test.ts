/**
 * ONNX cross-encoders (task `rerank`) from a model folder: a tiny real graph built here (test/support/onnx)
 * with the tiny WordPiece tokenizer. The model contract; exact logits that prove the pair template, the
 * segment ids and the padding mask; the positive column of a two-class head with a sigmoid; truncation that
 * keeps the query; the folder rules; and the model served by a spawned worker found through TESSERA_MODEL_DIR.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { startInferenceWorkers, type InferenceRuntime } from '../../../kernel/inference/index.js';
import type { RerankInput } from '../../../kernel/inference/model-io.js';
import {
  ModelFolderError,
  createOnnxModel,
  createOnnxModels,
  readModelFolder,
  type OnnxRerankerPlugin,
  type RerankModelSpec,
} from '../../../plugins/models/onnx/index.js';
import { runModelContract } from '../../support/model-contract.js';
import { silentLogger } from '../../support/logs.js';
import {
  CROSS_ENCODER_HEAD,
  TEXT_EMBEDDINGS,
  TEXT_MAX_LENGTH,
  TEXT_VOCAB,
  TYPE_EMBEDDINGS,
  tinyCrossEncoderModel,
  tinyTextFolderFiles,
  writeModelFolder,
} from '../../support/onnx/index.js';

const ONNX_PLUGIN = path.resolve(__dirname, '../../../plugins/models/onnx/index.ts');
const NEGATIVE_HEAD = [0, 0, 0, 0, 0, 0, 0, 0];
const POSITIVE_HEAD = [0.1, 0.2, -0.1, 0, 0, 0, 0.05, 0.05];

const scratch = await mkdtemp(path.join(tmpdir(), 'tessera-onnx-rerank-'));
const modelDir = path.join(scratch, 'models');
const { 'model.onnx': _textGraph, 'tessera-model.json': _manifest, ...tokenizerFiles } = tinyTextFolderFiles();
// No manifest: token inputs and [batch, 1] logits make it a rerank model, named after its folder.
await writeModelFolder(path.join(modelDir, 'cross-encoder'), { ...tokenizerFiles, 'model.onnx': tinyCrossEncoderModel() });
await writeModelFolder(path.join(modelDir, 'two-class'), {
  ...tokenizerFiles,
  'model.onnx': tinyCrossEncoderModel([NEGATIVE_HEAD, POSITIVE_HEAD]),
  'tessera-model.json': { name: 'two-class-reranker', task: 'rerank', sigmoid: true },
});

afterAll(async () => {
  await rm(scratch, { recursive: true, force: true });
});

const spec = (folder: string) => readModelFolder(path.join(modelDir, folder)) as RerankModelSpec;
const crossEncoder = createOnnxModel(spec('cross-encoder'));
const twoClass = createOnnxModel(spec('two-class'));

/** Σ over tokens of (word + segment embedding) · head: what the graph computes for real tokens. */
function expectedLogit(tokens: readonly string[], types: readonly number[], head: readonly number[]): number {
  let sum = 0;
  tokens.forEach((token, t) => {
    const id = TEXT_VOCAB.get(token);
    if (id === undefined) throw new Error(`'${token}' is not in the tiny vocabulary`);
    for (let i = 0; i < head.length; i++) sum += (TEXT_EMBEDDINGS[id]![i]! + TYPE_EMBEDDINGS[types[t]!]![i]!) * head[i]!;
  });
  return sum;
}

/** `[CLS] query [SEP] passage [SEP]` with segment 0 for the first part and 1 for the passage. */
function pairTokens(query: readonly string[], passage: readonly string[]): { tokens: string[]; types: number[] } {
  const tokens = ['[CLS]', ...query, '[SEP]', ...passage, '[SEP]'];
  const types = tokens.map((_, i) => (i < query.length + 2 ? 0 : 1));
  return { tokens, types };
}

const score = (model: OnnxRerankerPlugin, pairs: RerankInput[]) => model.infer(pairs);
const longPassage = Array.from({ length: 30 }, (_, i) => ['rain', 'the', 'bank', 'cat'][i % 4]).join(' ');

runModelContract(crossEncoder, {
  sampleInputs: [
    { query: 'cat', document: 'the dog' },
    { query: 'bank loan', document: 'the market price' },
    { query: '', document: 'rain' },
    { query: 'kitten', document: '' },
    { query: 'cat dog', document: longPassage },
  ],
  create: () => createOnnxModel(spec('cross-encoder')),
});

describe('onnx cross-encoder', () => {
  it('reads the folder as a rerank model: task from the graph, no dims, the tokenizer limit', () => {
    const read = spec('cross-encoder');
    expect(read).toMatchObject({ task: 'rerank', name: 'onnx-cross-encoder', output: 'logits', maxLength: TEXT_MAX_LENGTH, sigmoid: false });
    expect(read.inputs).toEqual({ inputIds: 'input_ids', attentionMask: 'attention_mask', tokenTypeIds: 'token_type_ids', positionIds: null });
    expect(crossEncoder.task).toBe('rerank');
    expect(crossEncoder.dims).toBeUndefined();
    expect(createOnnxModels(modelDir).map((m) => [m.name, m.task])).toEqual([
      ['onnx-cross-encoder', 'rerank'],
      ['two-class-reranker', 'rerank'],
    ]);
  });

  it('scores each pair through the pair template with segment ids, padding masked out', async () => {
    const pairs = [
      { query: 'cat', document: 'the dog' },
      { query: 'cat', document: 'bank money loan market' },
      { query: 'Kitten', document: 'my pet bird' },
      { query: 'cat', document: 'the bank' },
    ];
    const scores = await score(crossEncoder, pairs);
    const expected = [
      pairTokens(['cat'], ['the', 'dog']),
      pairTokens(['cat'], ['bank', 'money', 'loan', 'market']),
      pairTokens(['kitten'], ['my', 'pet', 'bird']),
      pairTokens(['cat'], ['the', 'bank']),
    ].map(({ tokens, types }) => expectedLogit(tokens, types, CROSS_ENCODER_HEAD));
    scores.forEach((s, i) => expect(s, `pair ${i}`).toBeCloseTo(expected[i]!, 4));
    // Segment ids matter: the same tokens all in segment 0 would score differently.
    const flat = expectedLogit(pairTokens(['cat'], ['the', 'dog']).tokens, new Array(6).fill(0), CROSS_ENCODER_HEAD);
    expect(Math.abs(scores[0]! - flat)).toBeGreaterThan(1);
    // Of two passages alike but for one word, the animal one outranks the money one for this head.
    expect(scores[0]!).toBeGreaterThan(scores[3]!);
  });

  it('cuts a long passage to max_length, keeping the query and the closing token', async () => {
    const [long] = await score(crossEncoder, [{ query: 'cat dog', document: longPassage }]);
    const words = longPassage.split(' ');
    const room = TEXT_MAX_LENGTH - 2 - 3;
    const { tokens, types } = pairTokens(['cat', 'dog'], words.slice(0, room));
    expect(tokens).toHaveLength(TEXT_MAX_LENGTH);
    expect(long).toBeCloseTo(expectedLogit(tokens, types, CROSS_ENCODER_HEAD), 4);
  });

  it('takes the positive column of a two-class head, through a sigmoid when asked', async () => {
    const [s] = await score(twoClass, [{ query: 'rain', document: 'the storm' }]);
    const { tokens, types } = pairTokens(['rain'], ['the', 'storm']);
    expect(s).toBeCloseTo(1 / (1 + Math.exp(-expectedLogit(tokens, types, POSITIVE_HEAD))), 5);
    expect(s).toBeGreaterThan(0);
    expect(s).toBeLessThan(1);
  });

  it('refuses folders a cross-encoder cannot be served from, naming the problem', async () => {
    const bad = async (name: string, files: Record<string, Uint8Array | object>) => {
      const folder = await writeModelFolder(path.join(scratch, 'bad', name), files);
      return () => readModelFolder(folder);
    };
    expect(await bad('no-tokenizer', { 'model.onnx': tinyCrossEncoderModel() })).toThrow(/a rerank model needs tokenizer.json/);
    const withIndex = await bad('index', { ...tokenizerFiles, 'model.onnx': tinyCrossEncoderModel([NEGATIVE_HEAD, POSITIVE_HEAD]), 'tessera-model.json': { task: 'rerank', positive_index: 2 } });
    expect(withIndex).toThrow(ModelFolderError);
    expect(withIndex).toThrow(/positive_index 2 is outside output 'logits', which has 2 column/);
    expect(await bad('dims', { ...tokenizerFiles, 'model.onnx': tinyCrossEncoderModel(), 'tessera-model.json': { task: 'rerank', dims: 1 } })).toThrow(/"dims" is for embedding models/);
  });

  it('refuses an input that is not a pair', async () => {
    await expect(crossEncoder.infer(['just text' as unknown as RerankInput])).rejects.toThrow(/input 0 is not a \(query, document\) pair/);
  });

  it('is served by a spawned worker that finds it through TESSERA_MODEL_DIR', async () => {
    let runtime: InferenceRuntime | undefined;
    try {
      runtime = await startInferenceWorkers({
        plugins: [ONNX_PLUGIN],
        workers: 1,
        log: silentLogger(),
        pool: { logLevel: 'silent', env: { TESSERA_MODEL_DIR: modelDir }, shutdownGraceMs: 2_000 },
        client: { timeoutMs: 30_000 },
      });
      const listed = await runtime.client.listModels();
      expect(listed.filter((m) => m.task === 'rerank').map((m) => m.name).sort()).toEqual(['onnx-cross-encoder', 'two-class-reranker']);
      const documents = ['the dog', 'bank money', 'rain'];
      const served = await runtime.client.rerank('onnx-cross-encoder', 'cat', documents);
      const local = await score(crossEncoder, documents.map((document) => ({ query: 'cat', document })));
      expect(served).toEqual(local.map((s) => Math.fround(s)));
    } finally {
      await runtime?.stop();
    }
  });
});
