/**
 * One model folder → one resolved model spec, checked when the plugin module is imported so a broken
 * folder stops the boot with a message naming it (not the first request, minutes later). The graph's
 * signature is read from the .onnx header (./graph-signature.ts), so tensor names, element types, the
 * output's size and static input shapes are all checked here.
 */
import { existsSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { Ajv, type ErrorObject } from 'ajv';
import { ELEM_TYPE, readGraphSignature, type GraphDim, type GraphSignature, type TensorSignature } from './graph-signature.js';
import {
  DEFAULT_IMAGE_SIZE,
  DEFAULT_MAX_LENGTH,
  DEFAULT_MAX_SECONDS,
  DEFAULT_MODEL_FILE,
  DEFAULT_SAMPLE_RATE,
  INPUT_ROLES,
  MANIFEST_FILE,
  MANIFEST_SCHEMA,
  MODEL_NAME,
  ModelFolderError,
  PREPROCESSOR_CONFIG_FILE,
  PRIMARY_INPUT,
  TOKENIZER_CONFIG_FILE,
  TOKENIZER_FILE,
  UNBOUNDED_MAX_LENGTH,
  type AudioModelSpec,
  type CommonSpec,
  type EmbedTask,
  type OnnxTask,
  type RerankModelSpec,
  type ImageModelSpec,
  type InputRole,
  type ModelManifest,
  type OnnxModelSpec,
  type Pooling,
  type TextModelSpec,
} from './manifest.js';

const ajv = new Ajv({ allErrors: true, strict: false });
const validateManifest = ajv.compile<ModelManifest>(MANIFEST_SCHEMA);

function describeSchemaError(e: ErrorObject): string {
  const where = e.instancePath ? e.instancePath.slice(1).replaceAll('/', '.') : 'manifest';
  if (e.keyword === 'additionalProperties') return `${where}: unknown field '${String(e.params.additionalProperty)}'`;
  return `${where} ${e.message ?? 'is invalid'}`;
}

function readJson(folder: string, file: string): unknown {
  const full = path.join(folder, file);
  try {
    return JSON.parse(readFileSync(full, 'utf8')) as unknown;
  } catch (error) {
    throw new ModelFolderError(folder, `${file} is not readable JSON: ${(error as Error).message}`, { cause: error });
  }
}

function readOptionalJsonObject(folder: string, file: string): Record<string, unknown> {
  if (!existsSync(path.join(folder, file))) return {};
  const value = readJson(folder, file);
  if (!value || typeof value !== 'object' || Array.isArray(value)) throw new ModelFolderError(folder, `${file} is not a JSON object`);
  return value as Record<string, unknown>;
}

/** Does `dir` look like a model folder (so a models directory may also hold unrelated folders)? */
export function isModelFolder(dir: string): boolean {
  return existsSync(path.join(dir, MANIFEST_FILE)) || existsSync(path.join(dir, DEFAULT_MODEL_FILE));
}

/** `onnx-<folder>`, lower-cased, anything outside [a-z0-9_-] turned into '-'. */
export function defaultModelName(folder: string): string {
  const slug = path
    .basename(folder)
    .toLowerCase()
    .replace(/[^a-z0-9_-]+/g, '-')
    .replace(/^-+|-+$/g, '');
  return `onnx-${slug}`.slice(0, 64).replace(/-+$/, '');
}

function numberOr<T>(value: unknown, fallback: T): number | T {
  return typeof value === 'number' && Number.isFinite(value) ? value : fallback;
}

function isTriple(value: unknown): value is [number, number, number] {
  return Array.isArray(value) && value.length === 3 && value.every((v) => typeof v === 'number' && Number.isFinite(v));
}

/** An HF size field (`224`, `{height, width}`, `{shortest_edge}`) as [height, width]. */
function hfSize(value: unknown): [number, number] | undefined {
  if (typeof value === 'number' && value > 0) return [value, value];
  if (!value || typeof value !== 'object') return undefined;
  const v = value as Record<string, unknown>;
  if (typeof v.height === 'number' && typeof v.width === 'number') return [v.height, v.width];
  if (typeof v.shortest_edge === 'number') return [v.shortest_edge, v.shortest_edge];
  return undefined;
}

class FolderReader {
  readonly manifest: ModelManifest;
  readonly signature: GraphSignature;
  readonly modelFile: string;
  readonly preprocessor: Record<string, unknown>;

  constructor(readonly folder: string) {
    const raw = existsSync(path.join(folder, MANIFEST_FILE)) ? readJson(folder, MANIFEST_FILE) : {};
    if (!validateManifest(raw)) {
      throw new ModelFolderError(folder, `${MANIFEST_FILE} is invalid: ${(validateManifest.errors ?? []).map(describeSchemaError).join('; ')}`);
    }
    this.manifest = raw;
    this.modelFile = path.resolve(folder, raw.model_file ?? DEFAULT_MODEL_FILE);
    if (!existsSync(this.modelFile) || !statSync(this.modelFile).isFile()) {
      throw new ModelFolderError(folder, `no model file ${path.relative(folder, this.modelFile) || this.modelFile}`);
    }
    try {
      this.signature = readGraphSignature(this.modelFile);
    } catch (error) {
      throw new ModelFolderError(folder, `${path.basename(this.modelFile)}: ${(error as Error).message}`, { cause: error });
    }
    this.preprocessor = readOptionalJsonObject(folder, PREPROCESSOR_CONFIG_FILE);
  }

  fail(problem: string): never {
    throw new ModelFolderError(this.folder, problem);
  }

  graphInput(name: string): TensorSignature | undefined {
    return this.signature.inputs.find((i) => i.name === name);
  }

  task(): OnnxTask {
    if (this.manifest.task) return this.manifest.task;
    const embedTasks: EmbedTask[] = ['embed_text', 'embed_image', 'embed_audio'];
    const tasks = embedTasks.filter((t) => this.graphInput(PRIMARY_INPUT[t]));
    if (tasks.length !== 1) {
      this.fail(`cannot tell the task from the graph inputs (${this.inputList()}): set "task" in ${MANIFEST_FILE}`);
    }
    // Token inputs and one or two numbers per row out: a cross-encoder's logits, not an embedding.
    if (tasks[0] === 'embed_text' && this.looksLikeLogits()) return 'rerank';
    return tasks[0]!;
  }

  private looksLikeLogits(): boolean {
    const output = this.signature.outputs.find((o) => o.name === (this.manifest.output ?? this.signature.outputs[0]!.name));
    const shape = output?.shape;
    if (!shape) return false;
    return shape.length === 1 || (shape.length === 2 && (shape[1] === 1 || shape[1] === 2));
  }

  inputList(): string {
    return this.signature.inputs.map((i) => i.name).join(', ') || 'none';
  }

  /**
   * The graph tensor for each role of `task`: the manifest's name or the role's own name. The primary
   * role must exist; others are fed only when the graph has them; every graph input must have a role.
   */
  resolveInputs(task: OnnxTask): Map<InputRole, string | null> {
    const named = this.manifest.inputs ?? {};
    const roles: readonly InputRole[] = INPUT_ROLES[task];
    for (const role of Object.keys(named)) {
      if (!roles.includes(role as InputRole)) this.fail(`inputs.${role} is not an input of ${task} models (${roles.join(', ')})`);
    }
    const resolved = new Map<InputRole, string | null>();
    for (const role of roles) {
      const tensor = named[role] ?? role;
      const present = this.graphInput(tensor) !== undefined;
      if (!present && (named[role] !== undefined || role === PRIMARY_INPUT[task])) {
        this.fail(`the graph has no input '${tensor}' (for ${role}); its inputs are: ${this.inputList()}`);
      }
      resolved.set(role, present ? tensor : null);
    }
    const fed = new Set([...resolved.values()].filter((v): v is string => v !== null));
    const unfed = this.signature.inputs.filter((i) => !fed.has(i.name)).map((i) => i.name);
    if (unfed.length > 0) {
      this.fail(`the graph input(s) ${unfed.join(', ')} cannot be fed: ${task} models get ${roles.join(', ')} (rename with "inputs" in ${MANIFEST_FILE})`);
    }
    return resolved;
  }

  requireElemType(tensor: string, allowed: readonly number[], what: string): void {
    const elemType = this.graphInput(tensor)?.elemType ?? 0;
    if (elemType !== 0 && !allowed.includes(elemType)) this.fail(`input '${tensor}' has ONNX element type ${elemType}; ${what}`);
  }

  output(): TensorSignature {
    const name = this.manifest.output ?? this.signature.outputs[0]!.name;
    const output = this.signature.outputs.find((o) => o.name === name);
    if (!output) this.fail(`the graph has no output '${name}'; its outputs are: ${this.signature.outputs.map((o) => o.name).join(', ')}`);
    if (output.elemType !== 0 && output.elemType !== ELEM_TYPE.float && output.elemType !== ELEM_TYPE.double) {
      this.fail(`output '${name}' has ONNX element type ${output.elemType}; float or double outputs are supported`);
    }
    return output;
  }

  pooling(output: TensorSignature): Pooling | null {
    const rank = output.shape?.length;
    const pooling = this.manifest.pooling ?? null;
    if (rank === undefined) return pooling;
    if (rank !== 2 && rank !== 3) this.fail(`output '${output.name}' has rank ${rank}; [batch, dims] or [batch, tokens, dims] is supported`);
    if (rank === 2 && pooling !== null && pooling !== 'none') this.fail(`output '${output.name}' is already [batch, dims]: pooling must be "none"`);
    if (rank === 3 && pooling === 'none') this.fail(`output '${output.name}' is [batch, tokens, dims]: pooling must be "mean" or "cls"`);
    return pooling;
  }

  dims(output: TensorSignature): number {
    const last: GraphDim | undefined = output.shape?.[output.shape.length - 1];
    const fromGraph = typeof last === 'number' ? last : undefined;
    const declared = this.manifest.dims;
    if (declared !== undefined && fromGraph !== undefined && declared !== fromGraph) {
      this.fail(`dims is ${declared} in ${MANIFEST_FILE} but output '${output.name}' has ${fromGraph}`);
    }
    const dims = declared ?? fromGraph;
    if (dims === undefined) this.fail(`the size of output '${output.name}' is not fixed in the graph: set "dims" in ${MANIFEST_FILE}`);
    return dims;
  }

  name(): string {
    const name = this.manifest.name ?? defaultModelName(this.folder);
    if (!MODEL_NAME.test(name)) this.fail(`the model name '${name}' derived from the folder is not valid: set "name" in ${MANIFEST_FILE}`);
    return name;
  }

  common(): Omit<CommonSpec, 'pooling' | 'dims' | 'output'> & { outputSignature: TensorSignature } {
    return {
      name: this.name(),
      description: this.manifest.description,
      folder: this.folder,
      modelFile: this.modelFile,
      normalize: this.manifest.normalize ?? true,
      outputSignature: this.output(),
    };
  }
}

/**
 * What every tokenizer-fed model reads the same way (text embedders and cross-encoders): int token inputs,
 * `tokenizer.json` beside the model, and the sequence length (manifest, then tokenizer config, then the
 * graph's fixed length, never above it).
 */
function tokenInputs(reader: FolderReader, task: 'embed_text' | 'rerank', kind: string) {
  const { manifest, folder } = reader;
  const inputs = reader.resolveInputs(task);
  const ints = [ELEM_TYPE.int64, ELEM_TYPE.int32];
  for (const tensor of inputs.values()) if (tensor) reader.requireElemType(tensor, ints, 'token inputs must be int64 or int32');
  const tokenizerFile = path.join(folder, TOKENIZER_FILE);
  if (!existsSync(tokenizerFile)) reader.fail(`a ${kind} model needs ${TOKENIZER_FILE} beside the model`);
  const tokenizerConfig = readOptionalJsonObject(folder, TOKENIZER_CONFIG_FILE);
  const inputIds = inputs.get('input_ids')!;
  const sequenceDim = reader.graphInput(inputIds)?.shape?.[1];
  const configured = numberOr(tokenizerConfig.model_max_length, undefined);
  const fixedLength = typeof sequenceDim === 'number' ? sequenceDim : null;
  const wanted =
    manifest.max_length ??
    (configured !== undefined && configured >= 2 && configured < UNBOUNDED_MAX_LENGTH ? Math.floor(configured) : undefined) ??
    fixedLength ??
    DEFAULT_MAX_LENGTH;
  const maxLength = fixedLength === null ? wanted : Math.min(wanted, fixedLength);
  return { inputs, inputIds, tokenizerFile, tokenizerConfig, fixedLength, maxLength };
}

function textSpec(reader: FolderReader): TextModelSpec {
  const { manifest } = reader;
  const { inputs, inputIds, tokenizerFile, tokenizerConfig, fixedLength, maxLength } = tokenInputs(reader, 'embed_text', 'text');
  const { outputSignature, ...common } = reader.common();
  return {
    ...common,
    task: 'embed_text',
    output: outputSignature.name,
    dims: reader.dims(outputSignature),
    pooling: reader.pooling(outputSignature),
    inputs: {
      inputIds,
      attentionMask: inputs.get('attention_mask') ?? null,
      tokenTypeIds: inputs.get('token_type_ids') ?? null,
      positionIds: inputs.get('position_ids') ?? null,
    },
    tokenizerFile,
    tokenizerConfig,
    maxLength,
    fixedLength,
    padTokenId: manifest.pad_token_id ?? null,
  };
}

function imageSpec(reader: FolderReader): ImageModelSpec {
  const { manifest, preprocessor } = reader;
  const input = reader.resolveInputs('embed_image').get('pixel_values')!;
  reader.requireElemType(input, [ELEM_TYPE.float], 'pixel inputs must be float32');
  const shape = reader.graphInput(input)?.shape ?? null;
  const layout = manifest.layout ?? (shape?.[1] !== 3 && shape?.[3] === 3 ? 'nhwc' : 'nchw');
  if (shape && shape.length !== 4) reader.fail(`input '${input}' has rank ${shape.length}; images are fed as [batch, 3, height, width] or [batch, height, width, 3]`);
  const graphSize: [GraphDim, GraphDim] | undefined = shape ? (layout === 'nchw' ? [shape[2]!, shape[3]!] : [shape[1]!, shape[2]!]) : undefined;
  const manifestSize = manifest.image_size === undefined ? undefined : typeof manifest.image_size === 'number' ? [manifest.image_size, manifest.image_size] : manifest.image_size;
  const preprocessorSize = hfSize(preprocessor.do_center_crop === false ? undefined : preprocessor.crop_size) ?? hfSize(preprocessor.size);
  const staticSize = graphSize && typeof graphSize[0] === 'number' && typeof graphSize[1] === 'number' ? [graphSize[0], graphSize[1]] : undefined;
  const [height, width] = manifestSize ?? preprocessorSize ?? staticSize ?? [DEFAULT_IMAGE_SIZE, DEFAULT_IMAGE_SIZE];
  if (staticSize && (staticSize[0] !== height || staticSize[1] !== width)) {
    reader.fail(`image size ${height}×${width} does not fit input '${input}', which is fixed at ${staticSize[0]}×${staticSize[1]}`);
  }
  // HF processors skip mean/std when do_normalize is false; then pixels go in as 0..1.
  const hfNormalizes = preprocessor.do_normalize !== false;
  const { outputSignature, ...common } = reader.common();
  return {
    ...common,
    task: 'embed_image',
    output: outputSignature.name,
    dims: reader.dims(outputSignature),
    pooling: reader.pooling(outputSignature),
    input,
    height: height!,
    width: width!,
    mean: manifest.image_mean ?? (hfNormalizes && isTriple(preprocessor.image_mean) ? preprocessor.image_mean : [0, 0, 0]),
    std: manifest.image_std ?? (hfNormalizes && isTriple(preprocessor.image_std) ? preprocessor.image_std : [1, 1, 1]),
    channelOrder: manifest.channel_order ?? 'rgb',
    layout,
    resize: manifest.resize ?? 'cover',
  };
}

function audioSpec(reader: FolderReader): AudioModelSpec {
  const { manifest, preprocessor } = reader;
  const inputs = reader.resolveInputs('embed_audio');
  const input = inputs.get('input_values')!;
  reader.requireElemType(input, [ELEM_TYPE.float], 'waveform inputs must be float32');
  const attentionMask = inputs.get('attention_mask') ?? null;
  if (attentionMask) reader.requireElemType(attentionMask, [ELEM_TYPE.int64, ELEM_TYPE.int32], 'an attention mask must be int64 or int32');
  const shape = reader.graphInput(input)?.shape;
  if (shape && shape.length !== 2) reader.fail(`input '${input}' has rank ${shape.length}; waveforms are fed as [batch, samples]`);
  const sampleRate = manifest.sample_rate ?? numberOr(preprocessor.sampling_rate, DEFAULT_SAMPLE_RATE);
  const { outputSignature, ...common } = reader.common();
  return {
    ...common,
    task: 'embed_audio',
    output: outputSignature.name,
    dims: reader.dims(outputSignature),
    pooling: reader.pooling(outputSignature),
    input,
    attentionMask,
    sampleRate,
    normalizeAudio: manifest.normalize_audio ?? preprocessor.do_normalize === true,
    maxSamples: Math.max(1, Math.round((manifest.max_seconds ?? DEFAULT_MAX_SECONDS) * sampleRate)),
  };
}

function rerankSpec(reader: FolderReader): RerankModelSpec {
  const { manifest } = reader;
  // Token inputs, tokenizer and lengths exactly as a text model reads them.
  const { inputs, inputIds, tokenizerFile, tokenizerConfig, fixedLength, maxLength } = tokenInputs(reader, 'rerank', 'rerank');
  const output = reader.output();
  const shape = output.shape;
  if (shape && shape.length !== 1 && shape.length !== 2) {
    reader.fail(`output '${output.name}' has rank ${shape.length}; a rerank model gives [batch] or [batch, classes] logits`);
  }
  const classes = shape?.length === 2 && typeof shape[1] === 'number' ? shape[1] : null;
  // The positive class of a two-class head is column 1 (a single-logit head has only column 0).
  const positiveIndex = manifest.positive_index ?? 1;
  if (classes !== null && classes > 1 && positiveIndex >= classes) {
    reader.fail(`positive_index ${positiveIndex} is outside output '${output.name}', which has ${classes} column(s)`);
  }
  for (const field of ['dims', 'pooling', 'normalize'] as const) {
    if (manifest[field] !== undefined) reader.fail(`"${field}" is for embedding models; a rerank model gives one score per pair`);
  }
  return {
    task: 'rerank',
    name: reader.name(),
    description: manifest.description,
    folder: reader.folder,
    modelFile: reader.modelFile,
    output: output.name,
    inputs: {
      inputIds,
      attentionMask: inputs.get('attention_mask') ?? null,
      tokenTypeIds: inputs.get('token_type_ids') ?? null,
      positionIds: inputs.get('position_ids') ?? null,
    },
    tokenizerFile,
    tokenizerConfig,
    maxLength,
    fixedLength,
    padTokenId: manifest.pad_token_id ?? null,
    positiveIndex,
    sigmoid: manifest.sigmoid ?? false,
  };
}

/** Reads and checks one model folder; throws ModelFolderError naming it when it cannot be served. */
export function readModelFolder(folder: string): OnnxModelSpec {
  const reader = new FolderReader(path.resolve(folder));
  switch (reader.task()) {
    case 'embed_text':
      return textSpec(reader);
    case 'embed_image':
      return imageSpec(reader);
    case 'embed_audio':
      return audioSpec(reader);
    case 'rerank':
      return rerankSpec(reader);
  }
}
