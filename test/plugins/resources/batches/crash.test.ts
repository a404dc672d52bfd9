/**
 * Killing the process that runs a batch, mid-batch, loses nothing and duplicates nothing. Real processes
 * (`tessera serve`, `tessera worker`) are started and SIGKILLed here:
 * - embedded defaults: the server runs the tasks; it is killed and started again on the same data;
 * - PostgreSQL + NATS (when TEST_DATABASE_URL and NATS_URL are set): an API-only server and a worker; the
 *   worker is killed, JetStream redelivers its unacknowledged task to a second worker.
 * A test extractor (test/support/plugins/slow-extractor.ts, loaded through TESSERA_PLUGINS) takes a fixed
 * time per record so the kill lands while work is in flight.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { NatsEventBus } from '../../../../kernel/events/nats.js';
import { deleteTaskStream } from '../../../../kernel/tasks/jetstream.js';

const ROOT = path.resolve(__dirname, '../../../..');
const BIN = path.join(ROOT, 'bin/tessera.js');
const SLOW_EXTRACTOR = path.join(ROOT, 'test/support/plugins/slow-extractor.ts');
const ADMIN_KEY = `svc_sk_crash_${'c'.repeat(47)}`;
const OBJECTS = 24;

const running = new Set<ChildProcess>();

function baseEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const name of ['DATABASE_URL', 'NATS_URL', 'TEST_DATABASE_URL', 'INFERENCE_ADDRESSES', 'TESSERA_HOME']) delete env[name];
  return {
    ...env,
    PORT: '0',
    HOST: '127.0.0.1',
    TESSERA_ADMIN_KEY: ADMIN_KEY,
    TESSERA_INFERENCE_WORKERS: '0',
    TESSERA_PLUGINS: SLOW_EXTRACTOR,
    TESSERA_BATCH_CHUNK_SIZE: '1',
    TESSERA_TASK_CONCURRENCY: '2',
    TESSERA_TASK_LEASE_MS: '1500',
    TESSERA_BATCH_HEALTH_INTERVAL_MS: '0',
    LOG_LEVEL: 'info', // readiness is the 'listening on' log line
    ...extra,
  };
}

/** Starts `tessera <command>` in its own process group; resolves once it printed `ready`. */
interface Started {
  child: ChildProcess;
  match: RegExpMatchArray;
  /** Everything it printed so far (stdout and stderr). */
  output: () => string;
}

function startProcess(command: 'serve' | 'worker', env: NodeJS.ProcessEnv, ready: RegExp): Promise<Started> {
  const child = spawn(process.execPath, [BIN, command], { cwd: ROOT, env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  running.add(child);
  child.on('exit', () => running.delete(child));
  let output = '';
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`tessera ${command} did not start:\n${output}`)), 60_000);
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      const match = output.match(ready);
      if (match) {
        clearTimeout(timer);
        resolve({ child, match, output: () => output });
      }
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', (chunk: Buffer) => void (output += chunk.toString()));
    child.on('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`tessera ${command} exited with ${code}:\n${output}`));
    });
  });
}

async function startServer(env: NodeJS.ProcessEnv): Promise<Started & { url: string }> {
  const started = await startProcess('serve', env, /listening on (http:\/\/[\d.]+:\d+)/);
  return { ...started, url: started.match[1]! };
}

/** SIGKILL to the whole process group: no shutdown hook runs, nothing is acknowledged or released. */
async function kill(child: ChildProcess): Promise<void> {
  const exited = new Promise<void>((resolve) => (child.exitCode !== null ? resolve() : child.once('exit', () => resolve())));
  try {
    process.kill(-child.pid!, 'SIGKILL');
  } catch {
    // already gone
  }
  await exited;
}

function client(url: string) {
  return async (method: string, route: string, body?: unknown): Promise<Record<string, any>> => {
    const res = await fetch(`${url}${route}`, {
      method,
      headers: { Authorization: `Bearer ${ADMIN_KEY}`, 'X-Namespace': 'crash', 'Content-Type': 'application/json' },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
    const json = (await res.json()) as Record<string, any>;
    if (!res.ok) throw new Error(`${method} ${route}: ${res.status} ${JSON.stringify(json)}`);
    return json;
  };
}

/** Sets up a bucket of OBJECTS texts and a collection through the slow extractor; submits one batch. */
async function submitBatch(url: string): Promise<{ batchId: string; objectIds: string[] }> {
  const api = client(url);
  await api('POST', '/v1/namespaces', { namespace_name: 'crash' });
  await api('POST', '/v1/buckets', { bucket_name: 'notes' });
  await api('POST', '/v1/collections/create', {
    collection_name: 'copies',
    source: { type: 'bucket', bucket_id: 'notes' },
    feature_extractors: [{ feature_extractor_name: 'slow_extractor', parameters: { delay_ms: 250 } }],
  });
  const objectIds: string[] = [];
  for (let i = 0; i < OBJECTS; i++) {
    objectIds.push((await api('POST', '/v1/buckets/notes/objects', { key: `n/${i}`, blobs: [{ property: 'content', text: `note number ${i}` }] })).object_id);
  }
  const batch = await api('POST', '/v1/buckets/notes/batches', { object_ids: objectIds });
  await api('POST', `/v1/buckets/notes/batches/${batch.batch_id}/submit`);
  return { batchId: batch.batch_id, objectIds };
}

async function waitFor(url: string, batchId: string, done: (batch: Record<string, any>) => boolean, seconds: number): Promise<Record<string, any>> {
  const api = client(url);
  const deadline = Date.now() + seconds * 1000;
  for (;;) {
    const batch = await api('GET', `/v1/buckets/notes/batches/${batchId}`);
    if (done(batch)) return batch;
    if (Date.now() > deadline) throw new Error(`batch never got there: ${JSON.stringify({ status: batch.status, progress: batch.progress })}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Every object gave exactly one document, and the counters agree. */
async function expectExactlyOnce(url: string, batchId: string, objectIds: string[]): Promise<void> {
  const api = client(url);
  const batch = await waitFor(url, batchId, (b) => !['PENDING', 'IN_PROGRESS'].includes(b.status), 120);
  expect(batch.status).toBe('COMPLETED');
  expect(batch.tier_tasks[0]).toMatchObject({ source_documents_fetched: OBJECTS, documents_written: OBJECTS });
  expect(batch.progress).toMatchObject({ records_done: OBJECTS, records_total: OBJECTS });
  const docs = await api('POST', '/v1/collections/copies/documents/list', { limit: 1000 });
  const roots = docs.results.map((d: { root_object_id: string }) => d.root_object_id).sort();
  expect(roots).toEqual([...objectIds].sort());
  expect((await api('GET', '/v1/collections/copies')).document_count).toBe(OBJECTS);
}

afterAll(async () => {
  await Promise.all([...running].map((child) => kill(child)));
});

describe('a process killed mid-batch', () => {
  it('on the embedded defaults: the restarted server takes the work back and finishes it exactly once', async () => {
    const home = await mkdtemp(path.join(tmpdir(), 'tessera-crash-'));
    try {
      const env = baseEnv({ TESSERA_HOME: home });
      const first = await startServer(env);
      const { batchId, objectIds } = await submitBatch(first.url);
      const midway = await waitFor(first.url, batchId, (b) => b.progress.records_done >= 4, 60);
      expect(midway.progress.records_done).toBeLessThan(OBJECTS);
      // Progress moves when a chunk ends, i.e. just when its slot is between tasks: give the runner half a
      // record's time (the slow extractor takes 250 ms) to claim the next ones, so the kill lands mid-task.
      await new Promise((r) => setTimeout(r, 125));
      await kill(first.child);

      const second = await startServer(env);
      await expectExactlyOnce(second.url, batchId, objectIds);
      // The kill landed while tasks ran: the new process found them RUNNING and took them back.
      expect(second.output()).toMatch(/took back tasks a stopped process left running/);
      await kill(second.child);
    } finally {
      await rm(home, { recursive: true, force: true });
    }
  }, 240_000);

  const external = process.env.TEST_DATABASE_URL && process.env.NATS_URL;
  it.runIf(external)('on PostgreSQL and NATS: JetStream redelivers the killed worker’s task to another worker, exactly once', async () => {
    const base = process.env.TEST_DATABASE_URL!;
    const name = `tessera_crash_${randomBytes(5).toString('hex')}`;
    const admin = new pg.Client({ connectionString: base });
    await admin.connect();
    await admin.query(`create database ${name}`);
    const url = new URL(base);
    url.pathname = `/${name}`;
    const prefix = `crash${randomBytes(4).toString('hex')}`;
    const home = await mkdtemp(path.join(tmpdir(), 'tessera-crash-nats-'));
    try {
      const shared = { TESSERA_HOME: home, DATABASE_URL: url.toString(), NATS_URL: process.env.NATS_URL!, TESSERA_NATS_PREFIX: prefix };
      const server = await startServer(baseEnv({ ...shared, TESSERA_RUN_TASKS: 'false' }));
      const ready = /worker running tasks/;
      const workerA = await startProcess('worker', baseEnv(shared), ready);
      const { batchId, objectIds } = await submitBatch(server.url);
      const midway = await waitFor(server.url, batchId, (b) => b.progress.records_done >= 4, 60);
      expect(midway.progress.records_done).toBeLessThan(OBJECTS);
      await kill(workerA.child);

      const workerB = await startProcess('worker', baseEnv(shared), ready);
      await expectExactlyOnce(server.url, batchId, objectIds);
      // The kill landed while tasks ran: some chunk task needed a second attempt.
      const db = new pg.Client({ connectionString: url.toString() });
      await db.connect();
      const { rows } = await db.query("select max(attempts) as attempts from tasks where type = 'batches.chunk'");
      await db.end();
      expect(Number(rows[0].attempts)).toBeGreaterThanOrEqual(2);
      await kill(workerB.child);
      await kill(server.child);
    } finally {
      await NatsEventBus.deleteStream(process.env.NATS_URL!, prefix).catch(() => undefined);
      await deleteTaskStream(process.env.NATS_URL!, prefix).catch(() => undefined);
      await admin.query(`drop database if exists ${name} with (force)`);
      await admin.end();
      await rm(home, { recursive: true, force: true });
    }
  }, 240_000);
});
