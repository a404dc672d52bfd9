/**
 * The gRPC Inference server: dispatches each call to the model plugin it names. Runs inside inference
 * worker processes (spawned by the pool, or `tessera inference` on another machine), so heavy model work
 * never runs on the API event loop.
 */
import {
  Server,
  ServerCredentials,
  status,
  type handleUnaryCall,
  type sendUnaryData,
  type ServerUnaryCall,
  type ServiceError,
} from '@grpc/grpc-js';
import type { Logger } from 'pino';
import {
  HealthResponse_ServingStatus,
  InferenceService,
  type EmbedResponse,
  type Embedding,
  type InferenceServer,
  type OcrResult,
} from '../../generated/proto/tessera/inference/v1/inference.js';
import type { ModelTask } from '../plugins.js';
import type {
  AnyModelPlugin,
  AudioClipInput,
  EmbedOutput,
  ModelInputs,
  ModelOutputs,
  OcrOutput,
  ServedTask,
} from './model-io.js';
import { modelThreads } from './model-io.js';

export interface InferenceWorkerOptions {
  models: readonly AnyModelPlugin[];
  /** `host:port` to listen on; port 0 picks a free one (read it back from `address`). */
  address: string;
  log: Logger;
  /** Largest batch handed to one `infer` call; larger requests run in slices, checking for cancellation between them. */
  maxBatch?: number;
  /** Largest request or response message (images travel in batches, far above gRPC's 4 MiB default). */
  maxMessageBytes?: number;
}

export interface InferenceWorker {
  /** `host:port` actually bound. */
  readonly address: string;
  readonly port: number;
  /** Stops taking calls, lets in-flight ones finish for up to `graceMs`, then cuts the rest. */
  stop(graceMs?: number): Promise<void>;
}

export const DEFAULT_MAX_MESSAGE_BYTES = 64 * 1024 * 1024;
const DEFAULT_WORKER_BATCH = 64;
const DEFAULT_GRACE_MS = 10_000;

/** A failure with the gRPC status it should travel as. */
class CallError extends Error {
  constructor(
    readonly code: status,
    message: string,
  ) {
    super(message);
  }
}

/** The call was cancelled or its deadline passed: stop working, send nothing (grpc-js has answered). */
class Abandoned extends Error {}

/** Errors thrown by models travel by their kernel error type (matched by name: models may bundle their own copy). */
function statusOf(error: unknown): { code: status; message: string } {
  if (error instanceof CallError) return { code: error.code, message: error.message };
  const message = error instanceof Error ? error.message : String(error);
  const type = error && typeof error === 'object' ? ((error as { type?: unknown }).type ?? (error as { name?: unknown }).name) : undefined;
  switch (type) {
    case 'InputError':
    case 'RequestValidationError':
      return { code: status.INVALID_ARGUMENT, message };
    case 'NotFoundError':
      return { code: status.NOT_FOUND, message };
    case 'ServiceUnavailableError':
      return { code: status.UNAVAILABLE, message };
    default:
      return { code: status.INTERNAL, message: `model failed: ${message}` };
  }
}

function serviceError(code: status, details: string): Partial<ServiceError> {
  return { code, details, message: details };
}

function finiteVector(value: unknown, what: string): number[] {
  const isVector = Array.isArray(value) || value instanceof Float32Array || value instanceof Float64Array;
  if (!isVector) throw new CallError(status.INTERNAL, `${what} is not a vector`);
  const vector = Array.from(value as ArrayLike<unknown>, (x) => x as number);
  if (!vector.every((x) => typeof x === 'number' && Number.isFinite(x))) {
    throw new CallError(status.INTERNAL, `${what} has a non-finite or non-number component`);
  }
  return vector;
}

function toEmbedding(output: EmbedOutput, model: AnyModelPlugin, index: number): Embedding {
  const what = `model ${model.name} output ${index}`;
  const hasVectorField = output && typeof output === 'object' && !Array.isArray(output) && !ArrayBuffer.isView(output) && 'vector' in output;
  const vector = finiteVector(hasVectorField ? output.vector : output, what);
  if (model.dims !== undefined && vector.length !== model.dims) {
    throw new CallError(status.INTERNAL, `${what} has ${vector.length} dimensions, the model declares ${model.dims}`);
  }
  let extras: Record<string, unknown> | undefined;
  if (hasVectorField) {
    const { vector: _vector, extras: explicit, ...rest } = output;
    extras = explicit ?? (Object.keys(rest).length > 0 ? rest : undefined);
  }
  return { vector, extrasJson: extras === undefined ? '' : JSON.stringify(extras) };
}

function toOcrResult(output: OcrOutput, model: AnyModelPlugin, index: number): OcrResult {
  if (typeof output === 'string') return { text: output, boxes: [] };
  if (!output || typeof output !== 'object' || typeof output.text !== 'string') {
    throw new CallError(status.INTERNAL, `model ${model.name} output ${index} is not OCR text`);
  }
  return {
    text: output.text,
    boxes: (output.boxes ?? []).map((b) => ({
      text: String(b.text),
      confidence: Number(b.confidence),
      x: Number(b.x),
      y: Number(b.y),
      width: Number(b.width),
      height: Number(b.height),
    })),
  };
}

/** This process's memory as the Health RPC reports it (rss: what the OS holds, including native model weights). */
function processMemory(): { rssBytes: number; heapUsedBytes: number } {
  const usage = process.memoryUsage();
  return { rssBytes: usage.rss, heapUsedBytes: usage.heapUsed };
}

/** Tracks one call: whether it was cancelled (client gone, deadline passed, shutdown) so work stops early. */
class CallState {
  cancelled = false;

  constructor(call: ServerUnaryCall<unknown, unknown>) {
    this.cancelled = call.cancelled;
    call.on('cancelled', () => {
      this.cancelled = true;
    });
  }

  checkpoint(): void {
    if (this.cancelled) throw new Abandoned('call cancelled');
  }
}

export async function startInferenceWorker(options: InferenceWorkerOptions): Promise<InferenceWorker> {
  const log = options.log;
  const maxBatch = Math.max(1, options.maxBatch ?? DEFAULT_WORKER_BATCH);
  const maxMessageBytes = options.maxMessageBytes ?? DEFAULT_MAX_MESSAGE_BYTES;
  const models = new Map<string, AnyModelPlugin>();
  for (const model of options.models) {
    if (models.has(model.name)) throw new Error(`model '${model.name}' is given twice`);
    models.set(model.name, model);
  }
  // Each model loads once, on first use, so a worker with many models starts fast and only pays for
  // what it serves. A failed load is forgotten so the next call tries again.
  const loading = new Map<string, Promise<void>>();
  const loaded = new Set<string>();
  let inFlight = 0;
  let serving = true;

  function ensureLoaded(model: AnyModelPlugin): Promise<void> {
    let pending = loading.get(model.name);
    if (!pending) {
      const started = Date.now();
      pending = model.load().then(
        () => {
          loaded.add(model.name);
          log.info({ model: model.name, ms: Date.now() - started }, 'model loaded');
        },
        (error: unknown) => {
          loading.delete(model.name);
          log.error({ err: error, model: model.name }, 'model failed to load');
          throw new CallError(status.INTERNAL, `model ${model.name} failed to load: ${(error as Error).message ?? String(error)}`);
        },
      );
      loading.set(model.name, pending);
    }
    return pending;
  }

  function resolveModel(name: string, task: ServedTask): AnyModelPlugin {
    if (!name) throw new CallError(status.INVALID_ARGUMENT, 'model is required');
    const model = models.get(name);
    if (!model) throw new CallError(status.NOT_FOUND, `no model named '${name}' on this inference worker`);
    if (model.task !== task) {
      throw new CallError(status.INVALID_ARGUMENT, `model '${name}' does ${model.task}, not ${task}`);
    }
    return model;
  }

  /** Runs the model over `inputs` in slices of `maxBatch`, checking between slices that the caller still waits. */
  async function run<T extends ServedTask>(
    modelName: string,
    task: T,
    inputs: Array<ModelInputs[T]>,
    state: CallState,
  ): Promise<{ model: AnyModelPlugin; outputs: Array<ModelOutputs[T]> }> {
    const model = resolveModel(modelName, task);
    if (inputs.length === 0) return { model, outputs: [] };
    await ensureLoaded(model);
    // The registry's type erases the model's input type; model-io.ts is the contract it is held to.
    const infer = model.infer.bind(model) as unknown as (batch: Array<ModelInputs[T]>) => Promise<unknown[]>;
    const outputs: Array<ModelOutputs[T]> = [];
    for (let start = 0; start < inputs.length; start += maxBatch) {
      state.checkpoint();
      const slice = inputs.slice(start, start + maxBatch);
      const result = await infer(slice);
      if (!Array.isArray(result) || result.length !== slice.length) {
        throw new CallError(
          status.INTERNAL,
          `model ${model.name} returned ${Array.isArray(result) ? result.length : 'no'} outputs for ${slice.length} inputs`,
        );
      }
      outputs.push(...(result as Array<ModelOutputs[T]>));
    }
    state.checkpoint();
    return { model, outputs };
  }

  function unary<Req, Res>(method: string, handle: (request: Req, state: CallState) => Promise<Res>): handleUnaryCall<Req, Res> {
    return (call: ServerUnaryCall<Req, Res>, callback: sendUnaryData<Res>) => {
      const state = new CallState(call as ServerUnaryCall<unknown, unknown>);
      // Counted until the call is answered or abandoned, even if a model never settles.
      let counted = true;
      inFlight += 1;
      const release = () => {
        if (counted) inFlight -= 1;
        counted = false;
      };
      call.on('cancelled', release);
      // Health still answers while draining, so callers can see NOT_SERVING and go elsewhere.
      if (!serving && method !== 'Health') {
        release();
        callback(serviceError(status.UNAVAILABLE, 'inference worker is shutting down'), null);
        return;
      }
      handle(call.request, state).then(
        (response) => {
          release();
          if (!state.cancelled) callback(null, response);
        },
        (error: unknown) => {
          release();
          if (error instanceof Abandoned || state.cancelled) {
            log.debug({ method }, 'call abandoned (cancelled or past its deadline)');
            return;
          }
          const { code, message } = statusOf(error);
          if (code === status.INTERNAL) log.error({ err: error, method }, 'inference call failed');
          else log.info({ method, code, message }, 'inference call refused');
          callback(serviceError(code, message), null);
        },
      );
    };
  }

  function embedResponse(model: AnyModelPlugin, outputs: EmbedOutput[]): EmbedResponse {
    const embeddings = outputs.map((o, i) => toEmbedding(o, model, i));
    const dims = model.dims ?? embeddings[0]?.vector.length ?? 0;
    if (embeddings.some((e) => e.vector.length !== dims)) {
      throw new CallError(status.INTERNAL, `model ${model.name} returned vectors of different lengths`);
    }
    return { embeddings, dims };
  }

  const implementation: InferenceServer = {
    embedText: unary('EmbedText', async (request, state) => {
      const { model, outputs } = await run(request.model, 'embed_text', request.texts, state);
      return embedResponse(model, outputs);
    }),
    embedImage: unary('EmbedImage', async (request, state) => {
      if (request.images.some((image) => image.length === 0)) throw new CallError(status.INVALID_ARGUMENT, 'an image is empty');
      const { model, outputs } = await run(request.model, 'embed_image', request.images, state);
      return embedResponse(model, outputs);
    }),
    embedAudio: unary('EmbedAudio', async (request, state) => {
      const clips: AudioClipInput[] = request.clips.map((clip, i) => {
        if (!(clip.sampleRate > 0)) throw new CallError(status.INVALID_ARGUMENT, `clip ${i} has no sample_rate`);
        if (clip.samples.length === 0) throw new CallError(status.INVALID_ARGUMENT, `clip ${i} has no samples`);
        return { samples: Float32Array.from(clip.samples), sampleRate: clip.sampleRate };
      });
      const { model, outputs } = await run(request.model, 'embed_audio', clips, state);
      return embedResponse(model, outputs);
    }),
    ocr: unary('Ocr', async (request, state) => {
      if (request.images.some((image) => image.length === 0)) throw new CallError(status.INVALID_ARGUMENT, 'an image is empty');
      const { model, outputs } = await run(request.model, 'ocr', request.images, state);
      return { results: outputs.map((o, i) => toOcrResult(o, model, i)) };
    }),
    rerank: unary('Rerank', async (request, state) => {
      const pairs = request.documents.map((document) => ({ query: request.query, document }));
      const { model, outputs } = await run(request.model, 'rerank', pairs, state);
      const scores = outputs.map((score, i) => {
        if (typeof score !== 'number' || !Number.isFinite(score)) {
          throw new CallError(status.INTERNAL, `model ${model.name} output ${i} is not a finite score`);
        }
        return score;
      });
      return { scores };
    }),
    listModels: unary('ListModels', async () => ({
      models: [...models.values()].map((m) => ({
        name: m.name,
        task: m.task satisfies ModelTask,
        dims: m.dims ?? 0,
        loaded: loaded.has(m.name),
      })),
    })),
    health: unary('Health', async () => ({
      status: serving ? HealthResponse_ServingStatus.SERVING_STATUS_SERVING : HealthResponse_ServingStatus.SERVING_STATUS_NOT_SERVING,
      // This Health call itself is not work in flight.
      inFlight: Math.max(0, inFlight - 1),
      pid: process.pid,
      ...processMemory(),
      loadedModels: [...loaded],
      modelThreads: modelThreads(),
    })),
  };

  const server = new Server({
    'grpc.max_receive_message_length': maxMessageBytes,
    'grpc.max_send_message_length': maxMessageBytes,
  });
  server.addService(InferenceService, implementation);
  const port = await new Promise<number>((resolve, reject) => {
    server.bindAsync(options.address, ServerCredentials.createInsecure(), (error, bound) => (error ? reject(error) : resolve(bound)));
  });
  const host = options.address.slice(0, options.address.lastIndexOf(':'));
  const address = `${host}:${port}`;
  log.info({ address, models: [...models.keys()] }, 'inference worker listening');

  let stopping: Promise<void> | undefined;
  const stop = (graceMs = DEFAULT_GRACE_MS): Promise<void> => {
    stopping ??= new Promise<void>((resolve) => {
      serving = false;
      // Cut what is still running after the grace period; tryShutdown's callback then fires too.
      const timer = setTimeout(() => server.forceShutdown(), graceMs);
      timer.unref();
      server.tryShutdown(() => {
        clearTimeout(timer);
        log.info({ address }, 'inference worker stopped');
        resolve();
      });
    });
    return stopping;
  };

  return { address, port, stop };
}
