/**
 * Inside the task thread (task-thread.ts): a task worker over the parent's embedded database, inference
 * workers and plugin modules. Tells the parent when it takes tasks, and stops on its word.
 */
import { readlinkSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { setPriority } from 'node:os';
import { type MessagePort, parentPort, workerData } from 'node:worker_threads';
import { startWorker, type Worker } from '../app.js';
import { createLogger, resolveLogFormat } from '../logger.js';
import { startThreadProfile } from '../thread-profile.js';
import { importPluginModules } from '../plugins.js';
import type { TaskThreadMessage, TaskThreadSpec } from './task-thread.js';

const { spec, port } = workerData as { spec: TaskThreadSpec; port: MessagePort };
const parent = parentPort!;
const tell = (message: TaskThreadMessage) => parent.postMessage(message);

const log = createLogger(spec.config.logLevel, undefined, resolveLogFormat(spec.config.logFormat)).child({ thread: 'tasks' });
lowerPriority();
const stopProfile = process.env.TESSERA_TASK_THREAD_PROFILE ? await startProfile(process.env.TESSERA_TASK_THREAD_PROFILE) : undefined;
let worker: Worker | undefined;
try {
  const plugins = await importPluginModules(spec.plugins, spec.baseDir);
  worker = await startWorker({
    config: { ...spec.config, inferenceAddresses: [...spec.inferenceAddresses], publicUrl: spec.publicUrl, runTasks: true },
    plugins,
    overrides: { logger: log, databasePort: port },
  });
  tell({ type: 'ready' });
} catch (err) {
  log.error({ err }, 'task thread failed to start');
  tell({ type: 'failed', message: err instanceof Error ? err.message : String(err) });
  port.close();
}

parent.on('message', (message: { type: string }) => {
  if (message.type !== 'stop') return;
  void (async () => {
    try {
      await worker?.stop();
      await stopProfile?.();
    } catch (err) {
      log.error({ err }, 'task thread did not stop cleanly');
    }
    tell({ type: 'stopped' });
    parent.close();
  })();
});

/**
 * Batch work yields the CPU to the API: this thread runs at a lower scheduling priority (nice 10) than the
 * HTTP and database threads, so on a busy machine a request waits less behind a batch. Linux only (a
 * thread's id is its /proc/thread-self entry); elsewhere the thread keeps the process's priority.
 */
function lowerPriority(): void {
  try {
    const threadId = Number(readlinkSync('/proc/thread-self').split('/').pop());
    if (Number.isInteger(threadId) && threadId > 0) setPriority(threadId, 10);
  } catch {
    // Not Linux, or not allowed: the batch shares the CPU evenly, as before.
  }
}

/** TESSERA_TASK_THREAD_PROFILE=<path prefix>: this thread's CPU profile and sampled allocations, written when it stops. */
async function startProfile(prefix: string): Promise<() => Promise<void>> {
  const profile = await startThreadProfile({ allocations: true });
  return async () => {
    const { cpu, allocations } = await profile.stop();
    await writeFile(`${prefix}.cpuprofile`, JSON.stringify(cpu));
    await writeFile(`${prefix}.heapprofile`, JSON.stringify(allocations));
  };
}
