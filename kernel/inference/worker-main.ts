/**
 * Entry of an inference worker process spawned by InferenceWorkerPool. Reads its settings from
 * TESSERA_INFERENCE_WORKER (JSON, see WorkerSpec), listens, reports its address to the parent over IPC,
 * and drains and exits when the parent says so or goes away (so a crashed server leaves no orphans).
 */
import { createLogger, type LogFormat } from '../logger.js';
import { serveInference } from './serve.js';

/** Settings the pool hands each child. */
export interface WorkerSpec {
  plugins: string[];
  baseDir: string;
  host: string;
  /** Preferred port (a restarted worker asks for its old one, so its address stays the same); 0 = any. */
  port: number;
  logLevel: string;
  logFormat?: LogFormat;
  maxBatch?: number;
}

/** Messages between the pool and a child. */
export type WorkerMessage =
  | { type: 'listening'; address: string; pid: number }
  | { type: 'failed'; error: string }
  /** Sent before a worker exits on a signal of its own (e.g. SIGTERM to the whole process group): not a crash. */
  | { type: 'exiting'; signal: NodeJS.Signals };
export type ParentMessage = { type: 'shutdown'; graceMs: number };

function send(message: WorkerMessage): Promise<void> {
  return new Promise((resolve) => {
    if (!process.send || !process.connected) return resolve();
    process.send(message, undefined, {}, () => resolve());
  });
}

async function main(): Promise<void> {
  const spec = JSON.parse(process.env.TESSERA_INFERENCE_WORKER ?? 'null') as WorkerSpec | null;
  if (!spec) throw new Error('TESSERA_INFERENCE_WORKER is not set: this file is started by InferenceWorkerPool');
  const log = createLogger(spec.logLevel, undefined, spec.logFormat).child({ component: 'inference-worker', pid: process.pid });
  let served: Awaited<ReturnType<typeof serveInference>>;
  try {
    served = await serveInference({
      plugins: spec.plugins,
      baseDir: spec.baseDir,
      address: `${spec.host}:${spec.port}`,
      fallbackToFreePort: true,
      log,
      ...(spec.maxBatch !== undefined ? { maxBatch: spec.maxBatch } : {}),
    });
  } catch (error) {
    log.error({ err: error }, 'inference worker failed to start');
    await send({ type: 'failed', error: error instanceof Error ? (error.stack ?? error.message) : String(error) });
    process.exit(1);
  }

  let exiting = false;
  const shutdown = (graceMs: number) => {
    if (exiting) return;
    exiting = true;
    void served.stop(graceMs).finally(() => {
      log.flush();
      process.exit(0);
    });
  };
  process.on('message', (message: ParentMessage) => {
    if (message?.type === 'shutdown') shutdown(message.graceMs);
  });
  // The parent is gone (crashed or killed): nobody will send calls or a shutdown.
  process.on('disconnect', () => shutdown(0));
  process.on('SIGTERM', () => {
    void send({ type: 'exiting', signal: 'SIGTERM' }).finally(() => shutdown(10_000));
  });
  // Ctrl-C reaches the whole process group; the parent decides when its workers stop.
  process.on('SIGINT', () => {});
  await send({ type: 'listening', address: served.address, pid: process.pid });
}

await main();
