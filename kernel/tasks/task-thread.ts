/**
 * Background tasks in a thread of their own, for `tessera serve` on the embedded database. The HTTP thread
 * then only answers requests: a batch's extraction, writes and bookkeeping run beside it on the other core
 * instead of between its requests.
 *
 * The thread is a whole task worker (`startWorker`, as `tessera worker` runs) over the same plugin modules,
 * sharing what this process holds:
 * - the embedded database, through a port of the database thread (kernel/db/pglite-thread.ts);
 * - the inference workers this process spawned (their addresses stay the same across restarts);
 * - events and cache invalidations, as notices through the database thread.
 * If the thread dies it is started again; `stop` lets its running tasks finish first.
 */
import { type MessagePort, Worker } from 'node:worker_threads';
import { DATA_THREAD_LIMITS, threadEntrySource } from '../thread-entry.js';
import type { Logger } from 'pino';
import type { Config } from '../config.js';

export interface TaskThreadSpec {
  config: Config;
  /** Plugin modules (specifiers) the thread loads, the builtins first. */
  plugins: readonly string[];
  /** Where relative plugin specifiers are resolved from. */
  baseDir: string;
  inferenceAddresses: readonly string[];
  /** The API's own address, for links the tasks write (presigned URLs of the local blob store). */
  publicUrl: string;
}

export type TaskThreadMessage = { type: 'ready' } | { type: 'failed'; message: string } | { type: 'stopped' };

const RESTART_DELAY_MS = 1_000;
const STOP_TIMEOUT_MS = 60_000;

export class TaskThread {
  private worker: Worker | undefined;
  private stopping = false;
  private restartTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly spec: TaskThreadSpec,
    /** A fresh database port for each start of the thread. */
    private readonly connectDatabase: () => Promise<MessagePort>,
    private readonly log: Logger,
  ) {}

  /** Resolves once the thread takes tasks; rejects when its first start fails. */
  async start(): Promise<void> {
    const worker = await this.spawn();
    await new Promise<void>((resolve, reject) => {
      const onMessage = (message: TaskThreadMessage) => {
        if (message.type === 'ready') {
          worker.off('message', onMessage);
          resolve();
        } else if (message.type === 'failed') reject(new Error(`the task thread failed to start: ${message.message}`));
      };
      worker.on('message', onMessage);
      worker.once('exit', (code) => reject(new Error(`the task thread stopped while starting (exit code ${code})`)));
    });
  }

  /** Lets running tasks finish (up to a minute), then ends the thread. */
  async stop(): Promise<void> {
    this.stopping = true;
    clearTimeout(this.restartTimer);
    const worker = this.worker;
    if (!worker) return;
    const stopped = new Promise<void>((resolve) => {
      worker.on('message', (message: TaskThreadMessage) => message.type === 'stopped' && resolve());
      worker.once('exit', () => resolve());
    });
    worker.postMessage({ type: 'stop' });
    const timeout = new Promise<void>((resolve) => setTimeout(resolve, STOP_TIMEOUT_MS).unref());
    await Promise.race([stopped, timeout]);
    await worker.terminate();
  }

  private async spawn(): Promise<Worker> {
    const port = await this.connectDatabase();
    const worker = new Worker(threadEntrySource(import.meta.url, 'task-thread-main'), {
      eval: true,
      workerData: { spec: this.spec, port },
      transferList: [port],
      // The thread logs through its own pino; its stdout/stderr are this process's.
      stdout: false,
      stderr: false,
      resourceLimits: DATA_THREAD_LIMITS,
    });
    this.worker = worker;
    worker.on('error', (err) => this.log.error({ err }, 'task thread failed'));
    worker.on('exit', (code) => {
      if (this.stopping || this.worker !== worker) return;
      this.worker = undefined;
      this.log.error({ code }, `task thread stopped unexpectedly; starting it again in ${RESTART_DELAY_MS} ms`);
      this.restartTimer = setTimeout(() => {
        this.spawn().catch((err: unknown) => this.log.error({ err }, 'task thread did not start again'));
      }, RESTART_DELAY_MS);
      this.restartTimer.unref();
    });
    return worker;
  }
}
