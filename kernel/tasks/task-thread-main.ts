/**
 * Inside the task thread (task-thread.ts): a task worker over the parent's embedded database, inference
 * workers and plugin modules. Tells the parent when it takes tasks, and stops on its word.
 */
import { type MessagePort, parentPort, workerData } from 'node:worker_threads';
import { startWorker, type Worker } from '../app.js';
import { createLogger, resolveLogFormat } from '../logger.js';
import { importPluginModules } from '../plugins.js';
import type { TaskThreadMessage, TaskThreadSpec } from './task-thread.js';

const { spec, port } = workerData as { spec: TaskThreadSpec; port: MessagePort };
const parent = parentPort!;
const tell = (message: TaskThreadMessage) => parent.postMessage(message);

const log = createLogger(spec.config.logLevel, undefined, resolveLogFormat(spec.config.logFormat)).child({ thread: 'tasks' });
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
    } catch (err) {
      log.error({ err }, 'task thread did not stop cleanly');
    }
    tell({ type: 'stopped' });
    parent.close();
  })();
});
