/**
 * Inference worker processes the server spawns (by default one per four cores, each running its models on
 * its share of the cores, see defaultInferenceWorkers): each runs worker-main.ts,
 * reports the address it listens on over IPC, and is restarted with backoff when it dies. Clients follow
 * the current addresses through `onChange`.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import type { Logger } from 'pino';
import type { LogFormat } from '../logger.js';
import { defaultInferenceWorkers, MODEL_THREADS_ENV } from './model-io.js';
import type { ParentMessage, WorkerMessage, WorkerSpec } from './worker-main.js';

export interface InferenceWorkerPoolOptions {
  /** Plugin modules whose models the workers serve (paths or package names, as TESSERA_PLUGINS). */
  plugins: readonly string[];
  /** Where relative specifiers resolve from (default: the working directory). */
  baseDir?: string;
  /** Worker processes (default: one per four cores, at least one; see defaultInferenceWorkers). */
  size?: number;
  /** Interface the workers listen on (default loopback: they serve this machine's API process). */
  host?: string;
  log: Logger;
  /** The workers' own log level (they log to this process's stdout/stderr). */
  logLevel?: string;
  /** The workers' log format (default JSON lines): the server's, since they write to its stdout. */
  logFormat?: LogFormat;
  /** Largest batch a worker hands one `infer` call. */
  maxBatch?: number;
  /** Delay before restarting a dead worker; doubles per consecutive crash up to `maxRestartDelayMs`. */
  restartDelayMs?: number;
  maxRestartDelayMs?: number;
  /** How long a worker may take to load its plugins and listen before start() fails (ms). */
  startTimeoutMs?: number;
  /** How long stop() lets in-flight calls finish before killing workers (ms). */
  shutdownGraceMs?: number;
  /** Extra environment for the workers. */
  env?: Record<string, string>;
}

export interface PoolWorkerInfo {
  slot: number;
  pid: number | null;
  address: string | null;
  restarts: number;
}

interface Slot {
  index: number;
  child: ChildProcess | null;
  address: string | null;
  /** Port to ask for on restart, so the worker's address stays stable for clients. */
  port: number;
  restarts: number;
  delayMs: number;
  timer: NodeJS.Timeout | null;
  startedAt: number;
}

// A worker that served this long before dying is not crash-looping: its next restart waits the base delay.
const STABLE_AFTER_MS = 30_000;

/** worker-main beside this file: .ts under tsx or vitest (needs the tsx loader), .js when built. */
function workerEntry(): { file: string; execArgv: string[] } {
  const self = fileURLToPath(import.meta.url);
  const ext = path.extname(self);
  const file = path.join(path.dirname(self), `worker-main${ext}`);
  if (ext !== '.ts') return { file, execArgv: [] };
  // Resolved to a file URL so the child finds tsx wherever its working directory is.
  const tsx = pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href;
  return { file, execArgv: ['--import', tsx] };
}

export class InferenceWorkerPool {
  private readonly slots: Slot[];
  private readonly listeners = new Set<(addresses: readonly string[]) => void>();
  private readonly log: Logger;
  private stopping: Promise<void> | null = null;
  private started = false;

  constructor(private readonly options: InferenceWorkerPoolOptions) {
    this.log = options.log.child({ component: 'inference-pool' });
    const size = Math.max(1, options.size ?? defaultInferenceWorkers(os.availableParallelism()));
    this.slots = Array.from({ length: size }, (_, index) => ({
      index,
      child: null,
      address: null,
      port: 0,
      restarts: 0,
      delayMs: options.restartDelayMs ?? 200,
      timer: null,
      startedAt: 0,
    }));
  }

  /** Spawns every worker and resolves once all listen; fails (and stops them) if one cannot start. */
  async start(): Promise<void> {
    if (this.started) throw new Error('the inference worker pool is already started');
    this.started = true;
    try {
      await Promise.all(this.slots.map((slot) => this.spawn(slot)));
    } catch (error) {
      await this.stop();
      throw error;
    }
    this.emit();
  }

  /** Cores each worker's models may use as onnxruntime threads: the machine's cores shared out between the workers. */
  threadsPerWorker(): number {
    return Math.max(1, Math.floor(os.availableParallelism() / this.slots.length));
  }

  /** Addresses of the workers that listen now. */
  addresses(): string[] {
    return this.slots.flatMap((s) => (s.address ? [s.address] : []));
  }

  workers(): PoolWorkerInfo[] {
    return this.slots.map((s) => ({ slot: s.index, pid: s.child?.pid ?? null, address: s.address, restarts: s.restarts }));
  }

  /** Called with the new address list whenever a worker goes away or comes (back) up. */
  onChange(listener: (addresses: readonly string[]) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Asks every worker to drain and exit; kills those still running after the grace period. */
  stop(): Promise<void> {
    this.stopping ??= this.stopAll();
    return this.stopping;
  }

  private async stopAll(): Promise<void> {
    const graceMs = this.options.shutdownGraceMs ?? 10_000;
    await Promise.all(
      this.slots.map(async (slot) => {
        if (slot.timer) clearTimeout(slot.timer);
        slot.timer = null;
        const child = slot.child;
        slot.address = null;
        if (!child || child.exitCode !== null || child.signalCode !== null) return;
        const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
        if (child.connected) child.send({ type: 'shutdown', graceMs } satisfies ParentMessage, (error) => error && child.kill('SIGTERM'));
        else child.kill('SIGTERM');
        const killer = setTimeout(() => child.kill('SIGKILL'), graceMs + 2_000);
        await exited;
        clearTimeout(killer);
      }),
    );
    this.listeners.clear();
    this.log.info('inference workers stopped');
  }

  private emit(): void {
    const addresses = this.addresses();
    for (const listener of this.listeners) {
      try {
        listener(addresses);
      } catch (error) {
        this.log.error({ err: error }, 'inference address listener failed');
      }
    }
  }

  /** Starts the slot's process; resolves when it listens, rejects when it fails first. */
  private spawn(slot: Slot): Promise<void> {
    const { file, execArgv } = workerEntry();
    const spec: WorkerSpec = {
      plugins: [...this.options.plugins],
      baseDir: this.options.baseDir ?? process.cwd(),
      host: this.options.host ?? '127.0.0.1',
      port: slot.port,
      logLevel: this.options.logLevel ?? 'info',
      logFormat: this.options.logFormat ?? 'json',
      ...(this.options.maxBatch !== undefined ? { maxBatch: this.options.maxBatch } : {}),
    };
    const child = fork(file, [], {
      execArgv,
      env: {
        // The cores are shared out between the workers: each worker's models use its share as threads.
        [MODEL_THREADS_ENV]: String(this.threadsPerWorker()),
        // glibc keeps a malloc arena per thread that ever allocated (onnxruntime and sharp run on several)
        // and rarely gives their freed memory back: two arenas hold the same work in less resident memory.
        MALLOC_ARENA_MAX: '2',
        ...process.env,
        ...this.options.env,
        TESSERA_INFERENCE_WORKER: JSON.stringify(spec),
      },
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
      serialization: 'json',
    });
    slot.child = child;
    slot.startedAt = Date.now();
    return new Promise<void>((resolve, reject) => {
      let settled = false;
      const startTimer = setTimeout(() => {
        if (settled) return;
        settled = true;
        child.kill('SIGKILL');
        reject(new Error(`inference worker ${slot.index} did not listen within ${this.options.startTimeoutMs ?? 60_000} ms`));
      }, this.options.startTimeoutMs ?? 60_000);
      startTimer.unref();
      let failure: string | undefined;
      let stoppedBy: NodeJS.Signals | undefined;
      child.on('message', (message: WorkerMessage) => {
        if (message.type === 'listening') {
          slot.address = message.address;
          slot.port = Number(message.address.slice(message.address.lastIndexOf(':') + 1));
          this.log.info({ slot: slot.index, pid: child.pid, address: message.address }, 'inference worker listening');
          clearTimeout(startTimer);
          if (!settled) {
            settled = true;
            resolve();
          }
        } else if (message.type === 'failed') {
          failure = message.error;
        } else if (message.type === 'exiting') {
          stoppedBy = message.signal;
        }
      });
      child.on('error', (error) => this.log.error({ err: error, slot: slot.index }, 'inference worker process error'));
      child.once('exit', (code, signal) => {
        clearTimeout(startTimer);
        if (slot.child === child) {
          slot.child = null;
          slot.address = null;
        }
        if (!settled) {
          settled = true;
          reject(new Error(`inference worker ${slot.index} exited before listening (${signal ?? `code ${code}`})${failure ? `: ${failure}` : ''}`));
        }
        if (this.stopping) return;
        if (stoppedBy) {
          // Usually a signal sent to the whole process group, the server's own stop close behind it (which
          // cancels the restart); sent to the worker alone, the restart keeps the pool at its size.
          this.log.warn({ slot: slot.index, pid: child.pid, code, signal: stoppedBy }, `inference worker stopped on ${stoppedBy}; restarting it unless the server is stopping too`);
        } else {
          this.log.error({ slot: slot.index, pid: child.pid, code, signal }, 'inference worker died; restarting');
        }
        this.emit();
        this.scheduleRestart(slot);
      });
    });
  }

  private scheduleRestart(slot: Slot): void {
    const base = this.options.restartDelayMs ?? 200;
    if (Date.now() - slot.startedAt > STABLE_AFTER_MS) slot.delayMs = base;
    const delay = slot.delayMs;
    slot.delayMs = Math.min(this.options.maxRestartDelayMs ?? 10_000, slot.delayMs * 2);
    slot.timer = setTimeout(() => {
      slot.timer = null;
      if (this.stopping) return;
      slot.restarts += 1;
      this.spawn(slot).then(
        () => this.emit(),
        // The exit handler has already scheduled the next attempt.
        (error: unknown) => this.log.error({ err: error, slot: slot.index }, 'inference worker restart failed'),
      );
    }, delay);
  }
}
