/**
 * The model folder's manifest (`tessera-model.json`): its schema, defaults, and the resolved spec a
 * folder becomes (see ./folder.ts, which reads and checks a folder).
 *
 * A folder holds `model.onnx` (or `model_file`), an optional `tessera-model.json` manifest, and for text
 * models `tokenizer.json` (+ optional `tokenizer_config.json`). A Hugging Face `preprocessor_config.json`
 * is read too, so an exported CLIP or wav2vec2 folder keeps its own image mean/std, size and sample rate.
 * Precedence: the manifest, then preprocessor_config.json / tokenizer_config.json, then the graph's
 * static shapes, then the defaults below.
 */

export const MANIFEST_FILE = 'tessera-model.json';
export const DEFAULT_MODEL_FILE = 'model.onnx';
export const TOKENIZER_FILE = 'tokenizer.json';
export const TOKENIZER_CONFIG_FILE = 'tokenizer_config.json';
export const PREPROCESSOR_CONFIG_FILE = 'preprocessor_config.json';

/** The same rule the plugin registry applies to every plugin name. */
export const MODEL_NAME = /^[a-z][a-z0-9_-]{1,63}$/;
export const DEFAULT_MAX_LENGTH = 512;
/** tokenizer_config.json says 1e30 when the tokenizer has no limit of its own. */
export const UNBOUNDED_MAX_LENGTH = 1_000_000;
export const DEFAULT_IMAGE_SIZE = 224;
export const DEFAULT_SAMPLE_RATE = 16_000;
export const DEFAULT_MAX_SECONDS = 30;

export type EmbedTask = 'embed_text' | 'embed_image' | 'embed_audio';
/** Embedding models, and cross-encoders that score (query, passage) pairs (`rerank`). */
export type OnnxTask = EmbedTask | 'rerank';
export type Pooling = 'mean' | 'cls' | 'none';

/** The tensors the plugin knows how to feed, by role; `inputs` in the manifest renames them. */
export const INPUT_ROLES = {
  embed_text: ['input_ids', 'attention_mask', 'token_type_ids', 'position_ids'],
  embed_image: ['pixel_values'],
  embed_audio: ['input_values', 'attention_mask'],
  rerank: ['input_ids', 'attention_mask', 'token_type_ids', 'position_ids'],
} as const satisfies Record<OnnxTask, readonly string[]>;
export type InputRole = (typeof INPUT_ROLES)[OnnxTask][number];

/** The role that identifies a task's graph (and must be present). */
export const PRIMARY_INPUT: Record<OnnxTask, InputRole> = {
  embed_text: 'input_ids',
  embed_image: 'pixel_values',
  embed_audio: 'input_values',
  rerank: 'input_ids',
};

/** `tessera-model.json`, as a user writes it (every field optional). */
export interface ModelManifest {
  name?: string;
  description?: string;
  task?: OnnxTask;
  model_file?: string;
  dims?: number;
  output?: string;
  pooling?: Pooling;
  normalize?: boolean;
  inputs?: Partial<Record<InputRole, string>>;
  max_length?: number;
  pad_token_id?: number;
  image_size?: number | [number, number];
  image_mean?: [number, number, number];
  image_std?: [number, number, number];
  channel_order?: 'rgb' | 'bgr';
  layout?: 'nchw' | 'nhwc';
  resize?: 'cover' | 'fill';
  sample_rate?: number;
  normalize_audio?: boolean;
  max_seconds?: number;
  positive_index?: number;
  sigmoid?: boolean;
}

const positive = { type: 'number', exclusiveMinimum: 0 } as const;
const triple = { type: 'array', items: { type: 'number' }, minItems: 3, maxItems: 3 } as const;
const tensorName = { type: 'string', minLength: 1 } as const;

export const MANIFEST_SCHEMA = {
  type: 'object',
  additionalProperties: false,
  properties: {
    name: { type: 'string', pattern: MODEL_NAME.source },
    description: { type: 'string' },
    task: { enum: ['embed_text', 'embed_image', 'embed_audio', 'rerank'] },
    model_file: { type: 'string', minLength: 1 },
    dims: { type: 'integer', minimum: 1 },
    output: tensorName,
    pooling: { enum: ['mean', 'cls', 'none'] },
    normalize: { type: 'boolean' },
    inputs: {
      type: 'object',
      additionalProperties: false,
      properties: Object.fromEntries([...new Set(Object.values(INPUT_ROLES).flat())].map((role) => [role, tensorName])),
    },
    max_length: { type: 'integer', minimum: 2 },
    pad_token_id: { type: 'integer', minimum: 0 },
    image_size: {
      oneOf: [
        { type: 'integer', minimum: 1 },
        { type: 'array', items: { type: 'integer', minimum: 1 }, minItems: 2, maxItems: 2 },
      ],
    },
    image_mean: triple,
    image_std: { ...triple, items: positive },
    channel_order: { enum: ['rgb', 'bgr'] },
    layout: { enum: ['nchw', 'nhwc'] },
    resize: { enum: ['cover', 'fill'] },
    sample_rate: { type: 'integer', minimum: 1000 },
    normalize_audio: { type: 'boolean' },
    max_seconds: positive,
    positive_index: { type: 'integer', minimum: 0 },
    sigmoid: { type: 'boolean' },
  },
} as const;

/** A model folder that cannot be served; the message names the folder. */
export class ModelFolderError extends Error {
  constructor(
    readonly folder: string,
    problem: string,
    options?: ErrorOptions,
  ) {
    super(`onnx model folder '${folder}': ${problem}`, options);
    this.name = 'ModelFolderError';
  }
}

export interface CommonSpec {
  name: string;
  description: string | undefined;
  folder: string;
  modelFile: string;
  dims: number;
  output: string;
  /** null: decided by the output's rank when it runs (rank 3 → mean, rank 2 → as is). */
  pooling: Pooling | null;
  normalize: boolean;
}

export interface TextModelSpec extends CommonSpec {
  task: 'embed_text';
  inputs: { inputIds: string; attentionMask: string | null; tokenTypeIds: string | null; positionIds: string | null };
  tokenizerFile: string;
  /** tokenizer_config.json, parsed ({} when the folder has none). */
  tokenizerConfig: Record<string, unknown>;
  maxLength: number;
  /** The graph's fixed sequence length (e.g. 77 in some CLIP exports): every batch is padded to it. */
  fixedLength: number | null;
  padTokenId: number | null;
}

export interface ImageModelSpec extends CommonSpec {
  task: 'embed_image';
  input: string;
  height: number;
  width: number;
  mean: [number, number, number];
  std: [number, number, number];
  channelOrder: 'rgb' | 'bgr';
  layout: 'nchw' | 'nhwc';
  resize: 'cover' | 'fill';
}

export interface AudioModelSpec extends CommonSpec {
  task: 'embed_audio';
  input: string;
  attentionMask: string | null;
  sampleRate: number;
  normalizeAudio: boolean;
  maxSamples: number;
}

/**
 * A cross-encoder: (query, passage) pairs tokenized together (segment ids where the graph takes them) →
 * one logit per pair: the single logit of a [batch, 1] (or [batch]) output, or the `positiveIndex` column
 * of a [batch, classes] one; `sigmoid` maps it to 0..1.
 */
export interface RerankModelSpec {
  task: 'rerank';
  name: string;
  description: string | undefined;
  folder: string;
  modelFile: string;
  output: string;
  inputs: TextModelSpec['inputs'];
  tokenizerFile: string;
  tokenizerConfig: Record<string, unknown>;
  maxLength: number;
  fixedLength: number | null;
  padTokenId: number | null;
  positiveIndex: number;
  sigmoid: boolean;
}

export type EmbedModelSpec = TextModelSpec | ImageModelSpec | AudioModelSpec;
export type OnnxModelSpec = EmbedModelSpec | RerankModelSpec;
