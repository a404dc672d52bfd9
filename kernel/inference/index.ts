/**
 * Inference as the server uses it: remote workers when INFERENCE_ADDRESSES is set, otherwise a pool of
 * spawned worker processes on this machine; either way one InferenceClient that follows their addresses.
 */
import type { Logger } from 'pino';
import { InferenceClient, type InferenceClientOptions } from './client.js';
import { InferenceWorkerPool, type InferenceWorkerPoolOptions } from './pool.js';

export { InferenceClient, chunkInputs, parseInferenceAddresses } from './client.js';
export type {
  AudioClip,
  CallOverrides,
  EmbeddingResult,
  InferenceClientOptions,
  InferenceHealth,
  ModelDescription,
  OcrResultOutput,
  WorkerHealth,
} from './client.js';
export { probeInference, workerReport } from './health.js';
export type { InferenceWorkerReport } from './health.js';
export { InferenceWorkerPool } from './pool.js';
export type { InferenceWorkerPoolOptions, PoolWorkerInfo } from './pool.js';
export { startInferenceWorker } from './worker.js';
export type { InferenceWorker, InferenceWorkerOptions } from './worker.js';
export { runInferenceCommand, serveInference } from './serve.js';
export type { InferenceCommandOptions, ServeInferenceOptions, ServedInference } from './serve.js';
export type * from './model-io.js';

export interface InferenceSetup {
  /** Remote `tessera inference` workers (INFERENCE_ADDRESSES); when non-empty nothing is spawned. */
  addresses?: readonly string[];
  /** Plugin modules whose models spawned workers serve (the built-in list plus TESSERA_PLUGINS). */
  plugins: readonly string[];
  baseDir?: string;
  /** Spawned workers (default: one per four cores, at least one). */
  workers?: number;
  log: Logger;
  /** Client settings beyond the addresses (deadline, retries, batch sizes). */
  client?: Omit<InferenceClientOptions, 'addresses' | 'log'>;
  /** Pool settings beyond plugins, size and logger. */
  pool?: Omit<InferenceWorkerPoolOptions, 'plugins' | 'baseDir' | 'size' | 'log'>;
}

export interface InferenceRuntime {
  client: InferenceClient;
  /** The spawned workers; null when remote addresses were given. */
  pool: InferenceWorkerPool | null;
  /** Closes the client and stops the spawned workers (register it as a lifecycle shutdown hook). */
  stop(): Promise<void>;
}

export async function startInferenceWorkers(setup: InferenceSetup): Promise<InferenceRuntime> {
  const log = setup.log.child({ component: 'inference' });
  if (setup.addresses && setup.addresses.length > 0) {
    const client = new InferenceClient({ ...setup.client, addresses: setup.addresses, log });
    return {
      client,
      pool: null,
      stop: async () => client.close(),
    };
  }
  const pool = new InferenceWorkerPool({
    ...setup.pool,
    plugins: setup.plugins,
    ...(setup.baseDir !== undefined ? { baseDir: setup.baseDir } : {}),
    ...(setup.workers !== undefined ? { size: setup.workers } : {}),
    // The pool names its own component: a child of `log` would write `component` twice in one line.
    log: setup.log,
  });
  await pool.start();
  const client = new InferenceClient({ ...setup.client, addresses: pool.addresses(), log });
  const unsubscribe = pool.onChange((addresses) => client.setAddresses(addresses));
  return {
    client,
    pool,
    stop: async () => {
      unsubscribe();
      client.close();
      await pool.stop();
    },
  };
}
