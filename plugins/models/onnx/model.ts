/** One model plugin per resolved folder spec: a memoised load() and an infer() per task. */
import type { AudioClipInput } from '../../../kernel/inference/model-io.js';
import { defineModel, type ModelPlugin } from '../../../kernel/plugins.js';
import { createAudioRunner } from './audio.js';
import { createImageRunner } from './image.js';
import type { OnnxModelSpec } from './manifest.js';
import { createTextRunner } from './text.js';

/** What the model's task receives per item (kernel/inference/model-io.ts): a text, image bytes or a clip. */
export type OnnxModelInput = string | Uint8Array | AudioClipInput;

export type OnnxModelPlugin = ModelPlugin<OnnxModelInput, number[]>;

interface Runner {
  load(): Promise<void>;
  embed(inputs: readonly unknown[]): Promise<number[][]>;
}

function runnerFor(spec: OnnxModelSpec): Runner {
  switch (spec.task) {
    case 'embed_text':
      return createTextRunner(spec);
    case 'embed_image':
      return createImageRunner(spec);
    case 'embed_audio':
      return createAudioRunner(spec);
  }
}

/** A fresh, independent instance (its own session) for the model a folder describes. */
export function createOnnxModel(spec: OnnxModelSpec): OnnxModelPlugin {
  const runner = runnerFor(spec);
  let loading: Promise<void> | undefined;
  const load = (): Promise<void> => {
    // Concurrent callers share one load; a failed one is forgotten so the next call tries again.
    loading ??= runner.load().catch((error: unknown) => {
      loading = undefined;
      throw new Error(`onnx model ${spec.name} (${spec.folder}) failed to load: ${(error as Error).message}`, { cause: error });
    });
    return loading;
  };
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
