/**
 * Starting an inference worker from plugin module specifiers: what both a pool child (worker-main.ts)
 * and `tessera inference` on a remote machine do.
 */
import os from 'node:os';
import type { Logger } from 'pino';
import { loadPluginModules, PluginRegistry } from '../plugins.js';
import { MODEL_THREADS_ENV } from './model-io.js';
import { startInferenceWorker, type InferenceWorker } from './worker.js';

export interface ServeInferenceOptions {
  /** Plugin modules (paths or package names), as for TESSERA_PLUGINS; only their models are served. */
  plugins: readonly string[];
  /** Where relative specifiers are resolved from (default: the working directory). */
  baseDir?: string;
  /** `host:port` to listen on. */
  address: string;
  /** When the port is taken, listen on a free one instead (pool restarts prefer their old port). */
  fallbackToFreePort?: boolean;
  log: Logger;
  maxBatch?: number;
  maxMessageBytes?: number;
}

export interface ServedInference extends InferenceWorker {
  models: string[];
}

export async function serveInference(options: ServeInferenceOptions): Promise<ServedInference> {
  const registry = new PluginRegistry();
  await loadPluginModules(registry, options.plugins, options.baseDir ?? process.cwd());
  const models = [...registry.models.values()];
  const start = (address: string) =>
    startInferenceWorker({
      models,
      address,
      log: options.log,
      ...(options.maxBatch !== undefined ? { maxBatch: options.maxBatch } : {}),
      ...(options.maxMessageBytes !== undefined ? { maxMessageBytes: options.maxMessageBytes } : {}),
    });
  let worker: InferenceWorker;
  try {
    worker = await start(options.address);
  } catch (error) {
    const host = options.address.slice(0, options.address.lastIndexOf(':'));
    if (!options.fallbackToFreePort || options.address.endsWith(':0')) throw error;
    options.log.warn({ err: error, address: options.address }, 'preferred port unavailable; listening on a free one');
    worker = await start(`${host}:0`);
  }
  return { address: worker.address, port: worker.port, stop: worker.stop, models: models.map((m) => m.name) };
}

export interface InferenceCommandOptions extends Omit<ServeInferenceOptions, 'fallbackToFreePort'> {
  /** How long SIGTERM/SIGINT let in-flight calls finish (ms). */
  shutdownGraceMs?: number;
  /** Where the listening line goes (default stdout). */
  out?: NodeJS.WritableStream;
}

/**
 * `tessera inference`: serves the models of the given plugins on `address` until SIGTERM or SIGINT, then
 * drains in-flight calls and resolves. API processes reach it through `INFERENCE_ADDRESSES`.
 */
export async function runInferenceCommand(options: InferenceCommandOptions): Promise<void> {
  // A machine given to inference: its models may use every core (one call side by side per core).
  process.env[MODEL_THREADS_ENV] ??= String(os.availableParallelism());
  const served = await serveInference(options);
  (options.out ?? process.stdout).write(`Tessera inference listening on ${served.address} (models: ${served.models.join(', ') || 'none'})\n`);
  await new Promise<void>((resolve) => {
    const stop = (signal: string) => {
      process.off('SIGTERM', onTerm);
      process.off('SIGINT', onInt);
      options.log.info({ signal }, 'inference worker draining');
      void served.stop(options.shutdownGraceMs).then(resolve);
    };
    const onTerm = () => stop('SIGTERM');
    const onInt = () => stop('SIGINT');
    process.on('SIGTERM', onTerm);
    process.on('SIGINT', onInt);
  });
}
