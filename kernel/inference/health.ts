/**
 * The inference part of GET /v1/health: every worker as it reports itself over the Health RPC (address,
 * pid, resident memory, loaded models, threads), so an operator sees which worker holds which model and
 * what it costs, whether the workers were spawned here or run elsewhere (INFERENCE_ADDRESSES).
 */
import type { ProbeResult } from '../health.js';
import type { InferenceClient, WorkerHealth } from './client.js';

export interface InferenceWorkerReport {
  address: string;
  status: WorkerHealth['status'];
  pid: number | null;
  rss_bytes: number | null;
  heap_used_bytes: number | null;
  loaded_models: string[];
  model_threads: number | null;
  in_flight: number | null;
  error?: string;
}

export function workerReport(worker: WorkerHealth): InferenceWorkerReport {
  return {
    address: worker.address,
    status: worker.status,
    pid: worker.pid ?? null,
    rss_bytes: worker.rssBytes ?? null,
    heap_used_bytes: worker.heapUsedBytes ?? null,
    loaded_models: worker.loadedModels ?? [],
    model_threads: worker.modelThreads ?? null,
    in_flight: worker.inFlight ?? null,
    ...(worker.error !== undefined ? { error: worker.error } : {}),
  };
}

/** Throws when no worker serves (the component is down); degraded when some do not answer. */
export async function probeInference(client: InferenceClient): Promise<ProbeResult> {
  const health = await client.health();
  const workers = health.workers.map(workerReport);
  if (!health.ok) {
    const reasons = workers.map((w) => `${w.address}: ${w.error ?? w.status}`).join('; ');
    throw new Error(`no inference worker is serving${reasons ? ` (${reasons})` : ''}`);
  }
  const rssBytes = workers.reduce((sum, w) => sum + (w.rss_bytes ?? 0), 0);
  const silent = workers.filter((w) => w.status !== 'serving');
  return {
    rssBytes,
    details: { workers, rss_bytes: rssBytes },
    ...(silent.length > 0 ? { degraded: `${silent.length} of ${workers.length} inference workers do not serve: ${silent.map((w) => w.address).join(', ')}` } : {}),
  };
}
