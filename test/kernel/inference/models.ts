/**
 * Tiny deterministic model plugins for the inference tests. `createTestModels()` gives fresh instances
 * (with their own call logs) to in-process tests; the default export is what pool workers load.
 */
import { InputError } from '../../../kernel/errors.js';
import type { AudioClipInput, EmbedOutput, OcrOutput, RerankInput } from '../../../kernel/inference/model-io.js';
import { defineModel, type ModelPlugin } from '../../../kernel/plugins.js';

export interface TestModelLog {
  /** Batch sizes each `infer` call received, per model. */
  batches: Map<string, number[]>;
  /** How many times each model's load() ran. */
  loads: Map<string, number>;
}

/** [length, vowels, spaces]: enough to tell texts apart and check order. */
export function charVector(text: string): number[] {
  return [text.length, (text.match(/[aeiou]/g) ?? []).length, (text.match(/ /g) ?? []).length];
}

export function createTestModels(): { models: Array<ModelPlugin<never, unknown>>; log: TestModelLog } {
  const log: TestModelLog = { batches: new Map(), loads: new Map() };
  const record = (name: string, size: number) => log.batches.set(name, [...(log.batches.get(name) ?? []), size]);
  const loaded = (name: string) => async () => void log.loads.set(name, (log.loads.get(name) ?? 0) + 1);

  const chars = defineModel<string, EmbedOutput>({
    name: 'chars',
    task: 'embed_text',
    dims: 3,
    load: loaded('chars'),
    infer: async (texts) => {
      record('chars', texts.length);
      return texts.map(charVector);
    },
  });
  const pixels = defineModel<Buffer, EmbedOutput>({
    name: 'pixels',
    task: 'embed_image',
    dims: 2,
    load: loaded('pixels'),
    infer: async (images) => images.map((img) => ({ vector: [img.length, img[0] ?? 0], extras: { bytes: img.length } })),
  });
  const tones = defineModel<AudioClipInput, EmbedOutput>({
    name: 'tones',
    task: 'embed_audio',
    dims: 3,
    load: loaded('tones'),
    // Extras as fields beside the vector (the other form of EmbeddingOutput).
    infer: async (clips) =>
      clips.map((c) => ({
        vector: Float32Array.of(c.sampleRate, c.samples.length, c.samples.reduce((a, b) => a + b, 0) / c.samples.length),
        clipped: c.samples.some((s) => Math.abs(s) >= 1),
      })),
  });
  const reader = defineModel<Buffer, OcrOutput>({
    name: 'reader',
    task: 'ocr',
    load: loaded('reader'),
    // "Reads" the bytes as UTF-8 text, with one box around all of it.
    infer: async (images) =>
      images.map((img) => {
        const text = img.toString('utf8');
        return { text, boxes: [{ text, confidence: 0.5, x: 1, y: 2, width: text.length, height: 10 }] };
      }),
  });
  const overlap = defineModel<RerankInput, number>({
    name: 'overlap',
    task: 'rerank',
    load: loaded('overlap'),
    // Score = words the document shares with the query.
    infer: async (pairs) =>
      pairs.map(({ query, document }) => {
        const words = new Set(query.toLowerCase().split(/\s+/));
        return document.toLowerCase().split(/\s+/).filter((w) => words.has(w)).length;
      }),
  });
  const stuck = defineModel<string, EmbedOutput>({
    name: 'stuck',
    task: 'embed_text',
    load: async () => {},
    // Never answers: only the deadline ends a call to it.
    infer: () => new Promise<EmbedOutput[]>(() => {}),
  });
  const picky = defineModel<string, EmbedOutput>({
    name: 'picky',
    task: 'embed_text',
    load: async () => {},
    infer: async (texts) => {
      if (texts.some((t) => t.length === 0)) throw new InputError('picky cannot embed an empty text');
      return texts.map(charVector);
    },
  });
  const broken = defineModel<string, EmbedOutput>({
    name: 'broken',
    task: 'embed_text',
    load: async () => {},
    infer: async () => {
      throw new Error('out of cheese');
    },
  });
  return { models: [chars, pixels, tones, reader, overlap, stuck, picky, broken], log };
}

export default createTestModels().models;
