/**
 * The client side of the Inference service: what extractors and stages call (`ctx.inference`).
 * Balances round-robin over the worker addresses that look healthy, gives every attempt a deadline,
 * retries (all calls are idempotent) on UNAVAILABLE and DEADLINE_EXCEEDED with backoff on another
 * worker, splits large inputs into batches, and maps gRPC status into the kernel's errors.
 */
import {
  connectivityState,
  credentials,
  makeGenericClientConstructor,
  Metadata,
  status,
  type CallOptions,
  type ClientUnaryCall,
  type ServiceError,
} from '@grpc/grpc-js';
import type { Logger } from 'pino';
import {
  HealthResponse_ServingStatus,
  InferenceClient as GeneratedInferenceClient,
  InferenceService,
  type EmbedAudioRequest,
  type EmbedImageRequest,
  type EmbedResponse,
  type EmbedTextRequest,
  type HealthRequest,
  type HealthResponse,
  type ListModelsRequest,
  type ListModelsResponse,
  type OcrRequest,
  type OcrResponse,
  type RerankRequest,
  type RerankResponse,
} from '../../generated/proto/tessera/inference/v1/inference.js';
import { InputError, NotFoundError, ServiceUnavailableError } from '../errors.js';
import { Coalescer } from './coalesce.js';
import { decodeEmbedResponse } from './embed-response.js';
import type { ModelTask } from '../plugins.js';
import type { OcrBox } from './model-io.js';
import type { InferenceCall } from './call-stats.js';
import { DEFAULT_MAX_MESSAGE_BYTES } from './worker.js';

/** The generated client, with embeddings decoded by decodeEmbedResponse (each vector read at its final length). */
const GrpcInferenceClient = makeGenericClientConstructor(
  {
    ...InferenceService,
    embedText: { ...InferenceService.embedText, responseDeserialize: decodeEmbedResponse },
    embedImage: { ...InferenceService.embedImage, responseDeserialize: decodeEmbedResponse },
    embedAudio: { ...InferenceService.embedAudio, responseDeserialize: decodeEmbedResponse },
  },
  'tessera.inference.v1.Inference',
) as unknown as typeof GeneratedInferenceClient;

export interface InferenceClientOptions {
  /** Worker addresses (`host:port`); replace them later with `setAddresses` (the pool does on restarts). */
  addresses: readonly string[];
  /** Told of every model call as it ends, retries included (call-stats.ts keeps the figures). */
  onCall?: (call: InferenceCall) => void;
  /** Deadline of each attempt (ms). */
  timeoutMs?: number;
  /** Attempts after the first, on UNAVAILABLE or DEADLINE_EXCEEDED. */
  retries?: number;
  /** First retry delay (ms); doubles per attempt, with jitter, up to `maxBackoffMs`. */
  backoffMs?: number;
  maxBackoffMs?: number;
  /** Most inputs per request; larger lists are split and sent as several requests. */
  maxBatch?: number;
  /** Most payload bytes (images, audio samples) per request, so a batch stays under the message limit. */
  maxBatchBytes?: number;
  /** Batches of one call in flight at once (default: two per address, at least 2). */
  concurrency?: number;
  maxMessageBytes?: number;
  log?: Logger;
}

export interface CallOverrides {
  /** This call's per-attempt deadline (ms). */
  timeoutMs?: number;
  /** Cancels the call (and its retries); the promise rejects with the signal's reason. */
  signal?: AbortSignal;
}

export interface EmbeddingResult {
  vector: number[];
  /** Model-specific extras (empty object when the model has none). */
  extras: Record<string, unknown>;
}

export interface OcrResultOutput {
  text: string;
  boxes: OcrBox[];
}

export interface AudioClip {
  /** Mono samples in [-1, 1]. */
  samples: ArrayLike<number>;
  sampleRate: number;
}

export interface ModelDescription {
  name: string;
  task: ModelTask;
  /** Vector length, when the model declares it. */
  dims: number | null;
  loaded: boolean;
}

export interface WorkerHealth {
  address: string;
  status: 'serving' | 'not_serving' | 'unreachable';
  inFlight?: number;
  pid?: number;
  /** Resident memory of the worker process (bytes), as the worker itself reports it. */
  rssBytes?: number;
  heapUsedBytes?: number;
  /** Models loaded in that worker (they load on first use). */
  loadedModels?: string[];
  /** onnxruntime intra-op threads per session in that worker. */
  modelThreads?: number;
  error?: string;
}

export interface InferenceHealth {
  /** At least one worker serves. */
  ok: boolean;
  workers: WorkerHealth[];
}

/** Request and response type of every RPC, so one typed path performs them all. */
interface Rpcs {
  embedText: [EmbedTextRequest, EmbedResponse];
  embedImage: [EmbedImageRequest, EmbedResponse];
  embedAudio: [EmbedAudioRequest, EmbedResponse];
  ocr: [OcrRequest, OcrResponse];
  rerank: [RerankRequest, RerankResponse];
  listModels: [ListModelsRequest, ListModelsResponse];
  health: [HealthRequest, HealthResponse];
}
type Rpc = keyof Rpcs;

type UnaryFn<Req, Res> = (
  request: Req,
  metadata: Metadata,
  options: Partial<CallOptions>,
  callback: (error: ServiceError | null, response: Res) => void,
) => ClientUnaryCall;

interface Channel {
  address: string;
  stub: GeneratedInferenceClient;
  /** Consecutive UNAVAILABLE answers; the cool-down before it is picked again grows with them. */
  failures: number;
  unhealthyUntil: number;
}

const RETRYABLE = new Set<number>([status.UNAVAILABLE, status.DEADLINE_EXCEEDED]);

function isServiceError(error: unknown): error is ServiceError {
  return error instanceof Error && typeof (error as Partial<ServiceError>).code === 'number' && 'details' in error;
}

/** Splits `items` into consecutive chunks of at most `maxItems` items and (when one item allows) `maxBytes` bytes. */
export function chunkInputs<T>(items: readonly T[], maxItems: number, maxBytes = Infinity, sizeOf: (item: T) => number = () => 0): T[][] {
  const chunks: T[][] = [];
  let current: T[] = [];
  let bytes = 0;
  for (const item of items) {
    const size = sizeOf(item);
    if (current.length > 0 && (current.length >= maxItems || bytes + size > maxBytes)) {
      chunks.push(current);
      current = [];
      bytes = 0;
    }
    current.push(item);
    bytes += size;
  }
  if (current.length > 0) chunks.push(current);
  return chunks;
}

/** Parses `INFERENCE_ADDRESSES` (`host:port,host:port`). */
export function parseInferenceAddresses(value: string | undefined): string[] {
  return (value ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s.length > 0);
}

function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

function parseExtras(json: string): Record<string, unknown> {
  if (!json) return {};
  const value: unknown = JSON.parse(json);
  return value && typeof value === 'object' && !Array.isArray(value) ? (value as Record<string, unknown>) : { value };
}

/** The inputs one request carries (texts, images, clips or documents). */
function itemsOf(request: object): number {
  for (const field of ['texts', 'images', 'clips', 'documents'] as const) {
    const value = (request as Record<string, unknown>)[field];
    if (Array.isArray(value)) return value.length;
  }
  return 1;
}

export class InferenceClient {
  private channels: Channel[] = [];
  private next = 0;
  private readonly timeoutMs: number;
  private readonly retries: number;
  private readonly backoffMs: number;
  private readonly maxBackoffMs: number;
  private readonly maxBatch: number;
  private readonly maxBatchBytes: number;
  private readonly concurrency: number | undefined;
  private readonly maxMessageBytes: number;
  private readonly log: Logger | undefined;
  private readonly onCall: ((call: InferenceCall) => void) | undefined;
  private closed = false;
  /** Small concurrent calls per model, sent as one request (see coalesce.ts). */
  private readonly textCalls: Coalescer<string, number[]>;
  private readonly imageCalls: Coalescer<Uint8Array, EmbeddingResult>;
  private readonly ocrCalls: Coalescer<Uint8Array, OcrResultOutput>;

  constructor(options: InferenceClientOptions) {
    this.timeoutMs = options.timeoutMs ?? 60_000;
    this.retries = Math.max(0, options.retries ?? 3);
    this.backoffMs = options.backoffMs ?? 50;
    this.maxBackoffMs = options.maxBackoffMs ?? 2_000;
    this.maxBatch = Math.max(1, options.maxBatch ?? 64);
    this.maxMessageBytes = options.maxMessageBytes ?? DEFAULT_MAX_MESSAGE_BYTES;
    // Leave headroom under the message limit for framing and the other fields.
    this.maxBatchBytes = options.maxBatchBytes ?? Math.floor(this.maxMessageBytes / 2);
    this.concurrency = options.concurrency;
    this.log = options.log;
    this.onCall = options.onCall;
    this.setAddresses(options.addresses);
    const blamesInput = (err: unknown) => err instanceof InputError;
    this.textCalls = new Coalescer((model, texts) => this.sendTexts(model, texts), this.maxBatch, blamesInput);
    this.imageCalls = new Coalescer((model, images) => this.sendImages(model, images), Math.max(1, Math.floor(this.maxBatch / 4)), blamesInput);
    this.ocrCalls = new Coalescer((model, images) => this.sendOcr(model, images), Math.max(1, Math.floor(this.maxBatch / 8)), blamesInput);
  }

  /** The addresses calls go to now. */
  addresses(): string[] {
    return this.channels.map((c) => c.address);
  }

  /** Replaces the worker addresses; channels to kept addresses stay open (and keep their health). */
  setAddresses(addresses: readonly string[]): void {
    if (this.closed) return;
    const wanted = [...new Set(addresses)];
    const kept = new Map(this.channels.map((c) => [c.address, c]));
    const channels = wanted.map((address) => kept.get(address) ?? this.openChannel(address));
    for (const channel of this.channels) if (!wanted.includes(channel.address)) channel.stub.close();
    this.channels = channels;
  }

  close(): void {
    this.closed = true;
    for (const channel of this.channels) channel.stub.close();
    this.channels = [];
  }

  /**
   * Calls with a few inputs and no overrides are coalesced with other callers' (one request per model
   * and turn of the event loop); large calls are split into batches and spread over the workers.
   */
  async embedText(model: string, texts: readonly string[], overrides?: CallOverrides): Promise<number[][]> {
    if (!overrides && texts.length < this.maxBatch && this.coalescible(texts, (t) => Buffer.byteLength(t))) {
      return this.textCalls.submit(model, texts);
    }
    return this.sendTexts(model, texts, overrides);
  }

  async embedImage(model: string, images: readonly Uint8Array[], overrides?: CallOverrides): Promise<EmbeddingResult[]> {
    if (!overrides && images.length === 1 && this.coalescible(images, (i) => i.byteLength)) return this.imageCalls.submit(model, images);
    return this.sendImages(model, images, overrides);
  }

  private async sendTexts(model: string, texts: readonly string[], overrides?: CallOverrides): Promise<number[][]> {
    const results = await this.batched(texts, (t) => Buffer.byteLength(t), async (chunk) => {
      const response = await this.invoke('embedText', { model, texts: chunk }, overrides);
      return this.embeddings(response, chunk.length);
    });
    return results.map((r) => r.vector);
  }

  private async sendImages(model: string, images: readonly Uint8Array[], overrides?: CallOverrides): Promise<EmbeddingResult[]> {
    return this.batched(images, (i) => i.byteLength, async (chunk) => {
      const request = { model, images: chunk.map((i) => (Buffer.isBuffer(i) ? i : Buffer.from(i.buffer, i.byteOffset, i.byteLength))) };
      return this.embeddings(await this.invoke('embedImage', request, overrides), chunk.length);
    });
  }

  /** Small enough to share a request with others (large payloads go alone, split by the byte budget). */
  private coalescible<T>(items: readonly T[], sizeOf: (item: T) => number): boolean {
    let bytes = 0;
    for (const item of items) bytes += sizeOf(item);
    return bytes <= this.maxBatchBytes / 16;
  }

  async embedAudio(model: string, clips: readonly AudioClip[], overrides?: CallOverrides): Promise<EmbeddingResult[]> {
    return this.batched(clips, (c) => c.samples.length * 4, async (chunk) => {
      const request = { model, clips: chunk.map((c) => ({ samples: Array.from(c.samples), sampleRate: c.sampleRate })) };
      return this.embeddings(await this.invoke('embedAudio', request, overrides), chunk.length);
    });
  }

  async ocr(model: string, images: readonly Uint8Array[], overrides?: CallOverrides): Promise<OcrResultOutput[]> {
    if (!overrides && images.length === 1 && this.coalescible(images, (i) => i.byteLength)) return this.ocrCalls.submit(model, images);
    return this.sendOcr(model, images, overrides);
  }

  private async sendOcr(model: string, images: readonly Uint8Array[], overrides?: CallOverrides): Promise<OcrResultOutput[]> {
    return this.batched(images, (i) => i.byteLength, async (chunk) => {
      const request = { model, images: chunk.map((i) => (Buffer.isBuffer(i) ? i : Buffer.from(i.buffer, i.byteOffset, i.byteLength))) };
      const response = await this.invoke('ocr', request, overrides);
      this.expectCount('ocr', response.results.length, chunk.length);
      return response.results.map((r) => ({ text: r.text, boxes: r.boxes }));
    });
  }

  /** One score per document, in the order given (higher is more relevant). */
  async rerank(model: string, query: string, documents: readonly string[], overrides?: CallOverrides): Promise<number[]> {
    return this.batched(documents, (d) => Buffer.byteLength(d), async (chunk) => {
      const response = await this.invoke('rerank', { model, query, documents: chunk }, overrides);
      this.expectCount('rerank', response.scores.length, chunk.length);
      return response.scores;
    });
  }

  /** The models one worker serves (every worker of a deployment runs the same plugin set). */
  async listModels(overrides?: CallOverrides): Promise<ModelDescription[]> {
    const response = await this.invoke('listModels', {}, overrides);
    return response.models.map((m) => ({
      name: m.name,
      task: m.task as ModelTask,
      dims: m.dims > 0 ? m.dims : null,
      loaded: m.loaded,
    }));
  }

  /** Asks every worker once (no retries); `ok` when at least one serves. */
  async health(overrides?: CallOverrides): Promise<InferenceHealth> {
    const timeoutMs = overrides?.timeoutMs ?? Math.min(this.timeoutMs, 5_000);
    const workers = await Promise.all(
      this.channels.map(async (channel): Promise<WorkerHealth> => {
        try {
          const h = await this.callOnce(channel, 'health', {}, timeoutMs, overrides?.signal);
          return {
            address: channel.address,
            status: h.status === HealthResponse_ServingStatus.SERVING_STATUS_SERVING ? 'serving' : 'not_serving',
            inFlight: h.inFlight,
            pid: h.pid,
            rssBytes: h.rssBytes,
            heapUsedBytes: h.heapUsedBytes,
            loadedModels: [...h.loadedModels].sort(),
            modelThreads: h.modelThreads,
          };
        } catch (error) {
          return { address: channel.address, status: 'unreachable', error: (error as Error).message };
        }
      }),
    );
    return { ok: workers.some((w) => w.status === 'serving'), workers };
  }

  // ------------------------------------------------------------------------------------------ internals

  private openChannel(address: string): Channel {
    const stub = new GrpcInferenceClient(address, credentials.createInsecure(), {
      'grpc.max_receive_message_length': this.maxMessageBytes,
      'grpc.max_send_message_length': this.maxMessageBytes,
      // grpc-js waits up to 120 s between reconnects by default; a restarted worker is back in well under a second.
      'grpc.initial_reconnect_backoff_ms': 100,
      'grpc.max_reconnect_backoff_ms': 2_000,
    });
    return { address, stub, failures: 0, unhealthyUntil: 0 };
  }

  private healthy(channel: Channel, now: number): boolean {
    if (now < channel.unhealthyUntil) return false;
    return channel.stub.getChannel().getConnectivityState(false) !== connectivityState.TRANSIENT_FAILURE;
  }

  /** Round-robin over healthy channels not yet tried by this call; else the untried one that failed longest ago. */
  private pick(tried: ReadonlySet<string>): Channel | undefined {
    const count = this.channels.length;
    if (count === 0) return undefined;
    const now = Date.now();
    let fallback: Channel | undefined;
    for (let i = 0; i < count; i++) {
      const channel = this.channels[(this.next + i) % count]!;
      if (tried.has(channel.address)) continue;
      if (this.healthy(channel, now)) {
        this.next = (this.next + i + 1) % count;
        return channel;
      }
      if (!fallback || channel.unhealthyUntil < fallback.unhealthyUntil) fallback = channel;
    }
    return fallback;
  }

  private callOnce<K extends Rpc>(
    channel: Channel,
    method: K,
    request: Rpcs[K][0],
    timeoutMs: number,
    signal: AbortSignal | undefined,
  ): Promise<Rpcs[K][1]> {
    return new Promise((resolve, reject) => {
      if (signal?.aborted) return reject(signal.reason);
      const fn = channel.stub[method] as unknown as UnaryFn<Rpcs[K][0], Rpcs[K][1]>;
      const onAbort = () => call.cancel();
      const call = fn.call(channel.stub, request, new Metadata(), { deadline: Date.now() + timeoutMs }, (error, response) => {
        signal?.removeEventListener('abort', onAbort);
        if (error) reject(signal?.aborted ? signal.reason : error);
        else resolve(response);
      });
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  }

  /** One logical call: attempts on different workers until one answers or the retries run out. */
  private async invoke<K extends Rpc>(method: K, request: Rpcs[K][0], overrides?: CallOverrides): Promise<Rpcs[K][1]> {
    if (!this.onCall || !('model' in request)) return this.invokeWithRetries(method, request, overrides);
    const started = performance.now();
    let ok = false;
    try {
      const response = await this.invokeWithRetries(method, request, overrides);
      ok = true;
      return response;
    } finally {
      this.onCall({ method, model: request.model, items: itemsOf(request), ms: performance.now() - started, ok });
    }
  }

  private async invokeWithRetries<K extends Rpc>(method: K, request: Rpcs[K][0], overrides?: CallOverrides): Promise<Rpcs[K][1]> {
    const timeoutMs = overrides?.timeoutMs ?? this.timeoutMs;
    const signal = overrides?.signal;
    const tried = new Set<string>();
    let last: ServiceError | undefined;
    for (let attempt = 0; attempt <= this.retries; attempt++) {
      if (attempt > 0) {
        const base = Math.min(this.maxBackoffMs, this.backoffMs * 2 ** (attempt - 1));
        await sleep(base / 2 + Math.random() * (base / 2), signal);
      }
      // Once every worker has been tried, start over: one may have come back.
      if (tried.size >= this.channels.length) tried.clear();
      const channel = this.pick(tried);
      if (!channel) throw new ServiceUnavailableError('no inference workers are configured');
      tried.add(channel.address);
      try {
        const response = await this.callOnce(channel, method, request, timeoutMs, signal);
        channel.failures = 0;
        channel.unhealthyUntil = 0;
        return response;
      } catch (error) {
        if (signal?.aborted || !isServiceError(error)) throw error;
        if (!RETRYABLE.has(error.code)) throw this.mapError(method, error);
        if (error.code === status.UNAVAILABLE) {
          // Keep traffic off a worker that refused or dropped the call, for longer each time in a row.
          channel.failures += 1;
          channel.unhealthyUntil = Date.now() + Math.min(this.maxBackoffMs * 5, 100 * 2 ** (channel.failures - 1));
        }
        this.log?.warn({ method, address: channel.address, code: status[error.code], attempt }, 'inference call failed; retrying elsewhere');
        last = error;
      }
    }
    throw new ServiceUnavailableError(`inference ${method} failed after ${this.retries + 1} attempts: ${last?.details ?? 'unavailable'}`, {
      code: last ? status[last.code] : 'UNAVAILABLE',
    });
  }

  private mapError(method: Rpc, error: ServiceError): Error {
    switch (error.code) {
      case status.INVALID_ARGUMENT:
        return new InputError(error.details);
      case status.NOT_FOUND:
        return new NotFoundError(error.details);
      default:
        return new Error(`inference ${method} failed (${status[error.code]}): ${error.details}`, { cause: error });
    }
  }

  private expectCount(method: Rpc, got: number, wanted: number): void {
    if (got !== wanted) throw new Error(`inference ${method} returned ${got} results for ${wanted} inputs`);
  }

  private embeddings(response: EmbedResponse, count: number): EmbeddingResult[] {
    this.expectCount('embedText', response.embeddings.length, count);
    return response.embeddings.map((e) => ({ vector: e.vector, extras: parseExtras(e.extrasJson) }));
  }

  /** Splits inputs into batches, sends them concurrently (spread over workers) and joins results in input order. */
  private async batched<T, R>(items: readonly T[], sizeOf: (item: T) => number, send: (chunk: T[]) => Promise<R[]>): Promise<R[]> {
    if (items.length === 0) return [];
    const chunks = chunkInputs(items, this.maxBatch, this.maxBatchBytes, sizeOf);
    const results: R[][] = new Array<R[]>(chunks.length);
    const width = Math.max(1, this.concurrency ?? Math.max(2, this.channels.length * 2));
    let cursor = 0;
    let failed = false;
    const lanes = Array.from({ length: Math.min(width, chunks.length) }, async () => {
      // Once one batch has failed the call has failed: send no more.
      while (cursor < chunks.length && !failed) {
        const index = cursor++;
        try {
          results[index] = await send(chunks[index]!);
        } catch (error) {
          failed = true;
          throw error;
        }
      }
    });
    await Promise.all(lanes);
    return results.flat();
  }
}
