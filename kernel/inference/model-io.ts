/**
 * What a model plugin's `infer(inputs)` receives and may return, per task, when it runs inside an
 * inference worker. `ModelPlugin` in kernel/plugins.ts is generic (`unknown` in, `unknown` out), so this
 * file is the contract the worker holds models to: it converts gRPC requests into these inputs and
 * checks every output before it goes back on the wire (a model that breaks it fails with INTERNAL).
 */
import type { ModelPlugin, ModelTask } from '../plugins.js';

/** Any model plugin, whatever its input and output types (what the registry holds). */
export type AnyModelPlugin = ModelPlugin<never, unknown>;

/** A vector: a plain array or a typed array, finite numbers only. */
export type VectorOutput = readonly number[] | Float32Array | Float64Array;

/**
 * An embedding with optional extras (JSON-serialisable), e.g. an image's size and dominant colours:
 * either under `extras`, or as any other fields beside `vector` (`{ vector, width, height, phash }`).
 */
export interface EmbeddingOutput {
  vector: VectorOutput;
  extras?: Record<string, unknown>;
  [field: string]: unknown;
}

/** What an embedding model may return per input. */
export type EmbedOutput = VectorOutput | EmbeddingOutput;

/** One mono clip for `embed_audio` models: samples in [-1, 1]. */
export interface AudioClipInput {
  samples: Float32Array;
  sampleRate: number;
}

/** One axis-aligned box in pixels of the source image. */
export interface OcrBox {
  text: string;
  confidence: number;
  x: number;
  y: number;
  width: number;
  height: number;
}

/** What an `ocr` model may return per image: the text alone, or the text and its boxes. */
export type OcrOutput = string | { text: string; boxes?: readonly OcrBox[] };

/** One (query, document) pair for `rerank` models, which return one number (higher = more relevant) per pair. */
export interface RerankInput {
  query: string;
  document: string;
}

/** The input each task's `infer` receives, one per element of its batch. */
export interface ModelInputs {
  embed_text: string;
  /** Encoded image bytes (PNG, JPEG, WebP, ...). */
  embed_image: Buffer;
  embed_audio: AudioClipInput;
  /** Encoded image bytes. */
  ocr: Buffer;
  rerank: RerankInput;
}

/** What each task's `infer` may return, one per input, in input order. */
export interface ModelOutputs {
  embed_text: EmbedOutput;
  embed_image: EmbedOutput;
  embed_audio: EmbedOutput;
  ocr: OcrOutput;
  rerank: number;
}

/** The tasks the Inference service serves (`transcribe` models are listed but not yet callable). */
export type ServedTask = keyof ModelInputs;

export function isServedTask(task: ModelTask): task is ServedTask {
  return task === 'embed_text' || task === 'embed_image' || task === 'embed_audio' || task === 'ocr' || task === 'rerank';
}

/** Environment variable through which the pool tells each worker process how many threads its models may use. */
export const MODEL_THREADS_ENV = 'TESSERA_MODEL_THREADS';

/**
 * Threads one model session may use for a single call in this process (onnxruntime's intra-op pool):
 * TESSERA_MODEL_THREADS when set (the pool sets it to the cores each of its workers gets), else 1.
 * Weights are held once per process whatever the thread count, so threads are the cheap way to use
 * more cores for one model; processes are not.
 */
export function modelThreads(): number {
  const value = Number(process.env[MODEL_THREADS_ENV]);
  return Number.isInteger(value) && value >= 1 ? Math.min(value, 64) : 1;
}

/** Cores one spawned inference worker process stands for by default. */
export const CORES_PER_INFERENCE_WORKER = 4;

/**
 * Inference worker processes to spawn by default: one per four cores, at least one (one on a 2-core
 * machine). Each process holds its own copy of every model it has loaded, while extra cores in one
 * process are nearly free: its models run that many calls side by side on one set of weights
 * (TESSERA_MODEL_THREADS). Measured on 2 cores with every built-in model loaded: two workers 300 MB each,
 * one worker 263 MB. Several processes still pay off for JavaScript-bound models (one event loop each)
 * on machines with many cores, hence one per four.
 */
export function defaultInferenceWorkers(cores: number): number {
  return Math.max(1, Math.floor(cores / CORES_PER_INFERENCE_WORKER));
}
