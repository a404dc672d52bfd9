/**
 * `onnx`: ONNX embedding models from a local model folder, so a user can drop in MiniLM, CLIP or a
 * wav2vec2-style audio encoder and get semantic (and, with CLIP, cross-modal) search. Nothing is ever
 * downloaded: every file comes from TESSERA_MODEL_DIR.
 *
 * TESSERA_MODEL_DIR holds one sub-folder per model; each becomes one model plugin (so the default export
 * is a list, empty when the variable is unset or the directory does not exist). A folder counts when it
 * has `model.onnx` or `tessera-model.json`; hidden and other folders are skipped. Layout:
 *
 *   all-minilm-l6-v2/                          clip-vision/
 *     model.onnx                                 model.onnx            (CLIP's vision_model.onnx)
 *     tokenizer.json, tokenizer_config.json      preprocessor_config.json
 *     tessera-model.json  (optional)             tessera-model.json    {"name": "clip-image", "task": "embed_image"}
 *
 * tessera-model.json (every field optional; see ./manifest.ts for precedence and defaults):
 *   name         plugin name, default `onnx-<folder>` (must match /^[a-z][a-z0-9_-]{1,63}$/)
 *   task         embed_text | embed_image | embed_audio | rerank (default: from the graph's input_ids / pixel_values /
 *                input_values; token inputs with [batch], [batch, 1] or [batch, 2] logits out are a rerank model)
 *   model_file   the .onnx file inside the folder (default model.onnx)
 *   dims         vector size (default: the last dimension of the output in the graph)
 *   output       the graph output to embed from (default: the graph's first output)
 *   pooling      mean | cls | none (default: mean over real tokens for [batch, tokens, dims], none for [batch, dims])
 *   normalize    L2-normalise vectors (default true)
 *   inputs       graph tensor names by role: input_ids, attention_mask, token_type_ids, position_ids (text),
 *                pixel_values (image), input_values, attention_mask (audio); each defaults to the role's name,
 *                and optional roles are fed only when the graph has them
 *   max_length, pad_token_id                  text (defaults: tokenizer_config.json, else 512; its pad token)
 *   image_size, image_mean, image_std,        image (defaults: preprocessor_config.json, the input's static
 *   channel_order (rgb|bgr), layout            shape, 224, mean 0 / std 1 on 0..1 pixels, rgb, nchw, cover)
 *   (nchw|nhwc), resize (cover|fill)
 *   sample_rate, normalize_audio, max_seconds  audio (defaults: preprocessor_config.json, 16000, false, 30)
 *   positive_index, sigmoid                   rerank: the logit column of a multi-class head (default 1; a single
 *                                              logit is used as is) and whether to squash it to 0..1 (default false)
 *
 * A folder that cannot be served (bad manifest, missing tokenizer, tensor names the graph lacks, an
 * unknown output size) fails the import with a ModelFolderError naming the folder. The graph is read
 * from the file's header without loading weights; onnxruntime, the tokenizer and sharp load in load(),
 * inside inference workers only (CPU, one intra-op thread per worker process).
 *
 * Output per input: an L2-normalised `number[]` of `dims` values; for a rerank model (a cross-encoder
 * reading each (query, passage) pair through the tokenizer's pair template, see ./rerank.ts) one score.
 */
import { readdirSync, statSync } from 'node:fs';
import path from 'node:path';
import { isModelFolder, readModelFolder } from './folder.js';
import { ModelFolderError, type OnnxModelSpec } from './manifest.js';
import { createOnnxModel, type AnyOnnxModelPlugin } from './model.js';

export { ModelFolderError, MANIFEST_FILE, MANIFEST_SCHEMA } from './manifest.js';
export { defaultModelName, readModelFolder } from './folder.js';
export type { AudioModelSpec, EmbedModelSpec, ImageModelSpec, ModelManifest, OnnxModelSpec, Pooling, RerankModelSpec, TextModelSpec } from './manifest.js';
export { createOnnxModel } from './model.js';
export type { AnyOnnxModelPlugin, OnnxModelInput, OnnxModelPlugin, OnnxRerankerPlugin } from './model.js';
export { createPairEncoder } from './rerank.js';
export { readGraphSignature } from './graph-signature.js';
export type { GraphSignature, TensorSignature } from './graph-signature.js';
export { normaliseWaveform, resampleLinear } from './audio.js';

/** The env variable naming the model directory. */
export const MODEL_DIR_ENV = 'TESSERA_MODEL_DIR';

/** Follows symlinks (a linked model folder counts); a dangling link is just not a folder. */
function isDirectory(file: string): boolean {
  return statSync(file, { throwIfNoEntry: false })?.isDirectory() ?? false;
}

/** Every model folder under `dir`, read and checked, in folder-name order; [] when `dir` does not exist. */
export function readModelDirectory(dir: string): OnnxModelSpec[] {
  const root = path.resolve(dir);
  let names: string[];
  try {
    if (!statSync(root).isDirectory()) throw new ModelFolderError(root, `${MODEL_DIR_ENV} is not a directory`);
    names = readdirSync(root).sort();
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw error;
  }
  const specs: OnnxModelSpec[] = [];
  const byName = new Map<string, string>();
  for (const name of names) {
    const folder = path.join(root, name);
    if (name.startsWith('.') || !isDirectory(folder) || !isModelFolder(folder)) continue;
    const spec = readModelFolder(folder);
    const other = byName.get(spec.name);
    if (other) throw new ModelFolderError(folder, `model name '${spec.name}' is already used by ${other}: set another "name"`);
    byName.set(spec.name, folder);
    specs.push(spec);
  }
  return specs;
}

/** One model plugin per folder under `dir` (none when `dir` is unset or missing). */
export function createOnnxModels(dir: string | undefined): AnyOnnxModelPlugin[] {
  if (!dir) return [];
  return readModelDirectory(dir).map((spec) => createOnnxModel(spec));
}

// The one place this plugin reads the environment: the module is imported by both the API process (to
// list models and their dims) and every inference worker (which inherits the variable), before any
// container exists to inject config through.
export default createOnnxModels(process.env[MODEL_DIR_ENV]);
