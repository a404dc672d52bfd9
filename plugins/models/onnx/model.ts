/** One model plugin per resolved folder spec: a memoised load() and an infer() per task. */
import type { AudioClipInput, RerankInput } from '../../../kernel/inference/model-io.js';
import { defineModel, type ModelPlugin } from '../../../kernel/plugins.js';
import { createAudioRunner } from './audio.js';
import { createImageRunner } from './image.js';
import type { EmbedModelSpec, OnnxModelSpec, RerankModelSpec } from './manifest.js';
import { createRerankRunner } from './rerank.js';
import { createTextRunner } from './text.js';

/** What an embedding task receives per item (kernel/inference/model-io.ts): a text, image bytes or a clip. */
export type OnnxModelInput = string | Uint8Array | AudioClipInput;

/** An embedding model: one vector per input. */
export type OnnxModelPlugin = ModelPlugin<OnnxModelInput, number[]>;
/** A cross-encoder: one score per (query, document) pair. */
export type OnnxRerankerPlugin = ModelPlugin<RerankInput, number>;
export type AnyOnnxModelPlugin = OnnxModelPlugin | OnnxRerankerPlugin;

interface Runner {
  load(): Promise<void>;
  embed(inputs: readonly unknown[]): Promise<number[][]>;
}

function runnerFor(spec: EmbedModelSpec): Runner {
  switch (spec.task) {
    case 'embed_text':
      return createTextRunner(spec);
    case 'embed_image':
      return createImageRunner(spec);
    case 'embed_audio':
      return createAudioRunner(spec);
  }
}

/** A load() that concurrent callers share; a failed one is forgotten so the next call tries again. */
function memoisedLoad(spec: OnnxModelSpec, load: () => Promise<void>): () => Promise<void> {
  let loading: Promise<void> | undefined;
  return () => {
    loading ??= load().catch((error: unknown) => {
      loading = undefined;
      throw new Error(`onnx model ${spec.name} (${spec.folder}) failed to load: ${(error as Error).message}`, { cause: error });
    });
    return loading;
  };
}

function createOnnxReranker(spec: RerankModelSpec): OnnxRerankerPlugin {
  const runner = createRerankRunner(spec);
  const load = memoisedLoad(spec, () => runner.load());
  return defineModel<RerankInput, number>({
    name: spec.name,
    task: 'rerank',
    load,
    infer: async (pairs) => {
      if (pairs.length === 0) return [];
      await load();
      return runner.score(pairs);
    },
  });
}

/** A fresh, independent instance (its own session) for the model a folder describes. */
export function createOnnxModel(spec: EmbedModelSpec): OnnxModelPlugin;
export function createOnnxModel(spec: RerankModelSpec): OnnxRerankerPlugin;
export function createOnnxModel(spec: OnnxModelSpec): AnyOnnxModelPlugin;
export function createOnnxModel(spec: OnnxModelSpec): AnyOnnxModelPlugin {
  if (spec.task === 'rerank') return createOnnxReranker(spec);
  const runner = runnerFor(spec);
  const load = memoisedLoad(spec, () => runner.load());
  return defineModel<OnnxModelInput, number[]>({
    name: spec.name,
    task: spec.task,
    dims: spec.dims,
    load,
    infer: async (inputs) => {
      if (inputs.length === 0) return [];
      await load();
      return runner.embed(inputs);
    },
  });
}
