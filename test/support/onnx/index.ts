/**
 * Tiny real ONNX models for tests, written into a model folder the way a user lays out
 * TESSERA_MODEL_DIR: one sub-folder per model with model.onnx, tessera-model.json and, for text, the
 * tokenizer files. `writeTinyOnnxModels(dir)` writes the three the onnx plugin tests use; the graph
 * builders are exported for tests that need a variant (another manifest, a broken folder).
 */
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { ElemType, floatTensor, int64Tensor, modelBytes, node, valueInfo, type Dim } from './onnx-builder.js';
import { TEXT_DIMS, TEXT_EMBEDDINGS, TYPE_EMBEDDINGS, tinyTokenizerConfig, tinyTokenizerJson } from './tiny-text.js';

export { TEXT_DIMS, TEXT_EMBEDDINGS, TEXT_VOCAB, TYPE_EMBEDDINGS, expectedTextVector } from './tiny-text.js';

/** The tokenizer's own limit (tokenizer_config.json `model_max_length`), small so truncation is easy to test. */
export const TEXT_MAX_LENGTH = 16;
/** The image model's fixed input size (read by the plugin from the graph's static input shape). */
export const IMAGE_SIZE = 16;
/** The image model projects the mean colour [r, g, b] to [r, g, b, (r + g + b) / 2]. */
export const IMAGE_PROJECTION: readonly (readonly number[])[] = [
  [1, 0, 0, 0.5],
  [0, 1, 0, 0.5],
  [0, 0, 1, 0.5],
];
export const IMAGE_DIMS = 4;
/** The audio model: [mean |x|, mean x², max x] + 0.01 each. */
export const AUDIO_DIMS = 3;
export const AUDIO_BIAS = 0.01;

/**
 * input_ids, token_type_ids, attention_mask → last_hidden_state [batch, seq, 8] (see ./tiny-text.ts).
 * `sequence` fixes the sequence length in the graph (as some exports do) instead of leaving it free.
 */
export function tinyTextModel(options: { sequence?: number } = {}): Uint8Array {
  const vocabSize = TEXT_EMBEDDINGS.length;
  const ids: Dim[] = ['batch', options.sequence ?? 'sequence'];
  return modelBytes({
    name: 'tiny-text',
    inputs: [
      valueInfo('input_ids', ElemType.int64, ids),
      valueInfo('token_type_ids', ElemType.int64, ids),
      valueInfo('attention_mask', ElemType.int64, ids),
    ],
    outputs: [valueInfo('last_hidden_state', ElemType.float, [...ids, TEXT_DIMS])],
    initializers: [
      floatTensor('word_embeddings', [vocabSize, TEXT_DIMS], TEXT_EMBEDDINGS.flat()),
      floatTensor('type_embeddings', [2, TEXT_DIMS], TYPE_EMBEDDINGS.flat()),
      floatTensor('one', [], [1]),
      floatTensor('masked_offset', [], [7]),
      int64Tensor('last_axis', [1], [-1]),
    ],
    nodes: [
      node('Gather', ['word_embeddings', 'input_ids'], ['words'], { axis: 0 }),
      node('Gather', ['type_embeddings', 'token_type_ids'], ['types'], { axis: 0 }),
      node('Add', ['words', 'types'], ['embedded']),
      node('Cast', ['attention_mask'], ['mask'], { to: ElemType.float }),
      node('Sub', ['one', 'mask'], ['masked']),
      node('Mul', ['masked', 'masked_offset'], ['offset']),
      node('Unsqueeze', ['offset', 'last_axis'], ['offset3']),
      node('Add', ['embedded', 'offset3'], ['last_hidden_state']),
    ],
  });
}

/** The single-logit cross-encoder's head: animal words push the score up, money words down, segment B shows. */
export const CROSS_ENCODER_HEAD: readonly number[] = [1, -1, 0.5, 0.2, 0.1, 0, 0.3, 0.4];

/**
 * A tiny cross-encoder: input_ids, token_type_ids, attention_mask [batch, seq] → logits [batch, classes] =
 * Σ over real tokens of (word_embeddings[id] + type_embeddings[type]) · head, with the tiny text model's
 * tables (./tiny-text.ts). `heads` gives one column per class (default: the single CROSS_ENCODER_HEAD).
 */
export function tinyCrossEncoderModel(heads: readonly (readonly number[])[] = [CROSS_ENCODER_HEAD]): Uint8Array {
  const vocabSize = TEXT_EMBEDDINGS.length;
  const ids: Dim[] = ['batch', 'sequence'];
  const classes = heads.length;
  // Row-major [TEXT_DIMS, classes]: column c is heads[c].
  const head = Array.from({ length: TEXT_DIMS }, (_, i) => heads.map((h) => h[i]!)).flat();
  return modelBytes({
    name: 'tiny-cross-encoder',
    inputs: [
      valueInfo('input_ids', ElemType.int64, ids),
      valueInfo('token_type_ids', ElemType.int64, ids),
      valueInfo('attention_mask', ElemType.int64, ids),
    ],
    outputs: [valueInfo('logits', ElemType.float, ['batch', classes])],
    initializers: [
      floatTensor('word_embeddings', [vocabSize, TEXT_DIMS], TEXT_EMBEDDINGS.flat()),
      floatTensor('type_embeddings', [2, TEXT_DIMS], TYPE_EMBEDDINGS.flat()),
      floatTensor('head', [TEXT_DIMS, classes], head),
      int64Tensor('last_axis', [1], [-1]),
      int64Tensor('token_axis', [1], [1]),
    ],
    nodes: [
      node('Gather', ['word_embeddings', 'input_ids'], ['words'], { axis: 0 }),
      node('Gather', ['type_embeddings', 'token_type_ids'], ['types'], { axis: 0 }),
      node('Add', ['words', 'types'], ['embedded']),
      node('Cast', ['attention_mask'], ['mask'], { to: ElemType.float }),
      node('Unsqueeze', ['mask', 'last_axis'], ['mask3']),
      node('Mul', ['embedded', 'mask3'], ['masked']),
      node('ReduceSum', ['masked', 'token_axis'], ['summed'], { keepdims: 0 }),
      node('MatMul', ['summed', 'head'], ['logits']),
    ],
  });
}

/** pixel_values [batch, 3, 16, 16] → image_embeds [batch, 4]: the mean colour, projected. */
export function tinyImageModel(): Uint8Array {
  return modelBytes({
    name: 'tiny-image',
    inputs: [valueInfo('pixel_values', ElemType.float, ['batch', 3, IMAGE_SIZE, IMAGE_SIZE])],
    outputs: [valueInfo('image_embeds', ElemType.float, ['batch', IMAGE_DIMS])],
    initializers: [floatTensor('projection', [3, IMAGE_DIMS], IMAGE_PROJECTION.flat())],
    nodes: [
      node('ReduceMean', ['pixel_values'], ['mean_colour'], { axes: [2, 3], keepdims: 0 }),
      node('MatMul', ['mean_colour', 'projection'], ['image_embeds']),
    ],
  });
}

/** input_values [batch, samples] → audio_embeds [batch, 3]: loudness, energy and peak of the waveform. */
export function tinyAudioModel(): Uint8Array {
  return modelBytes({
    name: 'tiny-audio',
    inputs: [valueInfo('input_values', ElemType.float, ['batch', 'samples'])],
    outputs: [valueInfo('audio_embeds', ElemType.float, ['batch', AUDIO_DIMS])],
    initializers: [floatTensor('bias', [AUDIO_DIMS], [AUDIO_BIAS, AUDIO_BIAS, AUDIO_BIAS])],
    nodes: [
      node('Abs', ['input_values'], ['magnitude']),
      node('ReduceMean', ['magnitude'], ['loudness'], { axes: [1], keepdims: 1 }),
      node('Mul', ['input_values', 'input_values'], ['squares']),
      node('ReduceMean', ['squares'], ['energy'], { axes: [1], keepdims: 1 }),
      node('ReduceMax', ['input_values'], ['peak'], { axes: [1], keepdims: 1 }),
      node('Concat', ['loudness', 'energy', 'peak'], ['features'], { axis: 1 }),
      node('Add', ['features', 'bias'], ['audio_embeds']),
    ],
  });
}

/** Writes one model folder: `files` maps a file name to bytes, or to a value written as JSON. */
export async function writeModelFolder(folder: string, files: Record<string, Uint8Array | string | object>): Promise<string> {
  await mkdir(folder, { recursive: true });
  for (const [name, content] of Object.entries(files)) {
    const data = content instanceof Uint8Array || typeof content === 'string' ? content : `${JSON.stringify(content, null, 2)}\n`;
    await writeFile(path.join(folder, name), data);
  }
  return folder;
}

/** The files of the tiny text model's folder (change the manifest for variants). */
export function tinyTextFolderFiles(manifest: object = { task: 'embed_text' }): Record<string, Uint8Array | object> {
  return {
    'model.onnx': tinyTextModel(),
    'tokenizer.json': tinyTokenizerJson(),
    'tokenizer_config.json': tinyTokenizerConfig(TEXT_MAX_LENGTH),
    'tessera-model.json': manifest,
  };
}

export interface TinyOnnxModels {
  textModelName: string;
  imageModelName: string;
  audioModelName: string;
  textDims: number;
  imageDims: number;
  audioDims: number;
}

/**
 * Writes the tiny text, image and audio models into `dir` (use it as TESSERA_MODEL_DIR):
 * `tiny-text/` (name derived from the folder: onnx-tiny-text, dims read from the graph),
 * `tiny-image/` (named in its manifest, pixels normalised with mean = std = 0.5) and `tiny-audio/`.
 */
export async function writeTinyOnnxModels(dir: string): Promise<TinyOnnxModels> {
  await writeModelFolder(path.join(dir, 'tiny-text'), tinyTextFolderFiles());
  await writeModelFolder(path.join(dir, 'tiny-image'), {
    'model.onnx': tinyImageModel(),
    'tessera-model.json': { name: 'onnx-tiny-image', task: 'embed_image', image_mean: [0.5, 0.5, 0.5], image_std: [0.5, 0.5, 0.5] },
  });
  await writeModelFolder(path.join(dir, 'tiny-audio'), {
    'model.onnx': tinyAudioModel(),
    'tessera-model.json': { task: 'embed_audio', sample_rate: 16000 },
  });
  return {
    textModelName: 'onnx-tiny-text',
    imageModelName: 'onnx-tiny-image',
    audioModelName: 'onnx-tiny-audio',
    textDims: TEXT_DIMS,
    imageDims: IMAGE_DIMS,
    audioDims: AUDIO_DIMS,
  };
}
