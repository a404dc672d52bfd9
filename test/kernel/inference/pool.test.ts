/** Spawned inference worker processes: start, serve, restart after a crash (same address), stop. */
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isRunning as alive } from '../../support/processes.js';
import { InferenceClient } from '../../../kernel/inference/client.js';
import { startInferenceWorkers, type InferenceRuntime } from '../../../kernel/inference/index.js';
import { capturingLogger, silentLogger } from '../../support/logs.js';
import { charVector } from './models.js';

const log = silentLogger();
const MODELS = path.join(__dirname, 'models.ts');

/** Polls `probe` until it returns a value (no fixed sleeps: each round waits for the next event-loop turn plus a beat). */
async function eventually<T>(probe: () => Promise<T | undefined> | T | undefined, what: string, rounds = 400): Promise<T> {
  for (let i = 0; i < rounds; i++) {
    const value = await probe();
    if (value !== undefined) return value;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`gave up waiting for ${what}`);
}

describe('inference worker pool', () => {
  let runtime: InferenceRuntime;

  beforeAll(async () => {
    runtime = await startInferenceWorkers({
      plugins: [MODELS],
      workers: 2,
      log,
      pool: { logLevel: 'silent', restartDelayMs: 50, shutdownGraceMs: 2_000 },
      client: { timeoutMs: 10_000, backoffMs: 20 },
    });
  });

  afterAll(async () => {
    await runtime?.stop();
  });

  it('spawns one process per worker, each serving the plugin modules models', async () => {
    const pool = runtime.pool!;
    expect(pool.addresses()).toHaveLength(2);
    const pids = pool.workers().map((w) => w.pid);
    expect(new Set(pids).size).toBe(2);
    expect(pids).not.toContain(process.pid);
    const health = await runtime.client.health();
    expect(health.workers.map((w) => w.status)).toEqual(['serving', 'serving']);
    expect(health.workers.map((w) => w.pid).sort()).toEqual([...pids].sort());
    expect((await runtime.client.listModels()).map((m) => m.name)).toContain('chars');
    expect(await runtime.client.embedText('chars', ['from a child process'])).toEqual([charVector('from a child process')]);
  });

  it('restarts a killed worker on its old address, and calls keep succeeding meanwhile', async () => {
    const pool = runtime.pool!;
    const [victim] = pool.workers();
    process.kill(victim!.pid!, 'SIGKILL');
    // The other worker takes the calls while the victim is down.
    for (let i = 0; i < 10; i++) expect(await runtime.client.embedText('chars', [`during ${i}`])).toEqual([charVector(`during ${i}`)]);
    const back = await eventually(() => {
      const w = pool.workers()[0]!;
      return w.restarts === 1 && w.address && w.pid !== victim!.pid ? w : undefined;
    }, 'the worker to restart');
    expect(back.address).toBe(victim!.address);
    expect(alive(victim!.pid!)).toBe(false);

    // Its address is usable again, on its own.
    const direct = new InferenceClient({ addresses: [back.address!], log, timeoutMs: 5_000 });
    try {
      const health = await eventually(async () => {
        const h = await direct.health();
        return h.ok ? h : undefined;
      }, 'the restarted worker to serve');
      expect(health.workers[0]!.pid).toBe(back.pid);
      expect(await direct.embedText('chars', ['again'])).toEqual([charVector('again')]);
    } finally {
      direct.close();
    }
    expect(runtime.client.addresses()).toEqual(pool.addresses());
  });

  it('stops every worker process on shutdown', async () => {
    const pids = runtime.pool!.workers().map((w) => w.pid!);
    await runtime.stop();
    expect(pids.filter(alive)).toEqual([]);
    expect(runtime.pool!.addresses()).toEqual([]);
  });

  it('tells a worker stopped by SIGTERM (e.g. sent to the whole process group) from a crash, and still restarts it', async () => {
    const { logger, lines } = capturingLogger('info');
    const own = await startInferenceWorkers({ plugins: [MODELS], workers: 1, log: logger, pool: { logLevel: 'silent', restartDelayMs: 50, shutdownGraceMs: 2_000 } });
    try {
      const [victim] = own.pool!.workers();
      process.kill(victim!.pid!, 'SIGTERM');
      await eventually(() => {
        const w = own.pool!.workers()[0]!;
        return w.restarts === 1 && w.address && w.pid !== victim!.pid ? w : undefined;
      }, 'the worker to restart');
      const logged = lines.map((line) => JSON.parse(line) as { level: number; msg: string; signal?: string });
      expect(logged.filter((l) => /inference worker (stopped|died)/.test(l.msg))).toEqual([
        expect.objectContaining({ level: 40 /* warn */, signal: 'SIGTERM', msg: expect.stringMatching(/stopped on SIGTERM; restarting/) }),
      ]);
      expect(await own.client.embedText('chars', ['after SIGTERM'])).toEqual([charVector('after SIGTERM')]);
    } finally {
      await own.stop();
    }
  });

  it('fails to start, and leaves nothing running, when a plugin module cannot load', async () => {
    await expect(
      startInferenceWorkers({ plugins: [path.join(__dirname, 'missing-models.ts')], workers: 1, log, pool: { logLevel: 'silent' } }),
    ).rejects.toThrow(/exited before listening/);
  });
});
