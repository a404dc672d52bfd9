/**
 * `npx tsx scripts/bench/scale-out.ts [texts] [worker counts]` (defaults 5000 and 1,2,4): several
 * `tessera worker` processes sharing one batch on PostgreSQL + NATS JetStream.
 *
 * Per worker count, on a fresh PostgreSQL database and a fresh NATS prefix: one `tessera serve` with
 * TESSERA_RUN_TASKS=false (the API only: it takes the batch and publishes its tasks, it runs none),
 * N `tessera worker` processes, and one `tessera inference` process all of them call
 * (INFERENCE_ADDRESSES), as in compose.yaml. The same short texts are created through
 * `POST /objects/bulk`, then one batch (text_extractor) is submitted and followed to COMPLETED.
 *
 * Printed per worker count: documents/s of the batch (submit → COMPLETED) and CPU-seconds per 1,000
 * documents over the same interval, read from /proc/<pid>/stat (utime + stime, plus cutime + cstime of
 * reaped children) of every process involved: the API, each worker and the inference process, and,
 * listed apart, the PostgreSQL backends serving this run's database. NATS is one server shared with
 * anything else on the machine, so its CPU is not attributed.
 *
 * Settings: BENCH_DATABASE_URL or TEST_DATABASE_URL (default postgres://postgres@127.0.0.1:5432/postgres;
 * each run creates and drops its own database on that server) and NATS_URL (default
 * nats://127.0.0.1:4222). Linux only (/proc).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { NatsEventBus } from '../../kernel/events/nats.js';
import { deleteTaskStream } from '../../kernel/tasks/jetstream.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const BIN = path.join(ROOT, 'bin/tessera.js');
const texts = Number(process.argv[2] ?? 5_000);
const workerCounts = (process.argv[3] ?? '1,2,4').split(',').map(Number);
if (!Number.isInteger(texts) || texts < 1 || workerCounts.some((n) => !Number.isInteger(n) || n < 1)) {
  console.error('usage: npx tsx scripts/bench/scale-out.ts [texts (default 5000)] [worker counts (default 1,2,4)]');
  process.exit(2);
}
const databaseUrl = process.env.BENCH_DATABASE_URL ?? process.env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const natsUrl = process.env.NATS_URL ?? 'nats://127.0.0.1:4222';
const ADMIN_KEY = `svc_sk_bench_${'s'.repeat(47)}`;
/** Clock ticks per second of /proc/<pid>/stat times (USER_HZ; 100 on Linux). */
const TICKS = 100;

const WORDS = 'river stone lamp harbor bread glacier orbit violin ember cedar meadow canyon signal quartz tide lantern'.split(' ');
function shortText(i: number): string {
  const pick = (k: number) => WORDS[(i * 7 + k * 13) % WORDS.length];
  return `Note ${i}: the ${pick(1)} near the ${pick(2)} glows like ${pick(3)} at dusk.`;
}

interface Started {
  name: string;
  child: ChildProcess;
  match: RegExpMatchArray;
  output: () => string;
}
const running = new Set<ChildProcess>();

/** `tessera <args>` in its own process group; resolves once its output matches `ready`. */
function startTessera(name: string, args: string[], env: NodeJS.ProcessEnv, ready: RegExp): Promise<Started> {
  const child = spawn(process.execPath, [BIN, ...args], { cwd: ROOT, env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  running.add(child);
  child.on('exit', () => running.delete(child));
  let output = '';
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${name} did not start in 120 s:\n${output}`)), 120_000);
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      const match = output.match(ready);
      if (match) {
        clearTimeout(timer);
        resolve({ name, child, match, output: () => output });
      }
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`${name} exited with ${code}:\n${output}`));
    });
  });
}

async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  try {
    process.kill(-child.pid!, 'SIGTERM');
  } catch {
    return;
  }
  const timer = setTimeout(() => {
    try {
      process.kill(-child.pid!, 'SIGKILL');
    } catch {
      // gone
    }
  }, 15_000);
  await exited;
  clearTimeout(timer);
}

function env(extra: Record<string, string>): NodeJS.ProcessEnv {
  const base: NodeJS.ProcessEnv = { ...process.env };
  for (const name of ['DATABASE_URL', 'TEST_DATABASE_URL', 'BENCH_DATABASE_URL', 'INFERENCE_ADDRESSES', 'TESSERA_HOME', 'TESSERA_RUN_TASKS']) delete base[name];
  return { ...base, HOST: '127.0.0.1', PORT: '0', LOG_LEVEL: 'info', LOG_FORMAT: 'json', TESSERA_ADMIN_KEY: ADMIN_KEY, TESSERA_BATCH_HEALTH_INTERVAL_MS: '0', ...extra };
}

/** CPU seconds a process has used, with its reaped children; 0 once it is gone. */
function cpuSeconds(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // After the command: state(0) ... utime(11) stime(12) cutime(13) cstime(14).
    return (Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14])) / TICKS;
  } catch {
    return 0;
  }
}

/** The pid and every descendant's (a process may start helpers of its own). */
function tree(root: number): number[] {
  const children = new Map<number, number[]>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      children.set(ppid, [...(children.get(ppid) ?? []), Number(entry)]);
    } catch {
      // gone meanwhile
    }
  }
  const out: number[] = [];
  const queue = [root];
  while (queue.length > 0) {
    const pid = queue.shift()!;
    out.push(pid);
    queue.push(...(children.get(pid) ?? []));
  }
  return out;
}

type CpuSample = Map<number, number>;
function sample(pids: number[]): CpuSample {
  return new Map(pids.map((pid) => [pid, cpuSeconds(pid)]));
}
/** CPU used between two samples; a pid first seen in `after` started inside the interval. */
function used(before: CpuSample, after: CpuSample): number {
  let sum = 0;
  for (const [pid, seconds] of after) sum += seconds - (before.get(pid) ?? 0);
  return sum;
}

async function postgresBackends(admin: pg.Client, database: string): Promise<number[]> {
  const { rows } = await admin.query<{ pid: number }>('select pid from pg_stat_activity where datname = $1', [database]);
  return rows.map((r) => r.pid);
}

interface RunResult {
  workers: number;
  documents: number;
  createSeconds: number;
  batchSeconds: number;
  cpu: { api: number; workers: number; inference: number; postgres: number };
}

async function run(workerCount: number, inferenceAddress: string, inferencePid: number, admin: pg.Client): Promise<RunResult> {
  const database = `tessera_scale_${randomBytes(5).toString('hex')}`;
  await admin.query(`create database ${database}`);
  const url = new URL(databaseUrl);
  url.pathname = `/${database}`;
  const prefix = `scale${randomBytes(4).toString('hex')}`;
  const home = await mkdtemp(path.join(os.tmpdir(), 'tessera-scale-out-'));
  const shared = { TESSERA_HOME: home, DATABASE_URL: url.toString(), NATS_URL: natsUrl, TESSERA_NATS_PREFIX: prefix, INFERENCE_ADDRESSES: inferenceAddress };
  const started: Started[] = [];
  try {
    const api = await startTessera('api', ['serve'], env({ ...shared, TESSERA_RUN_TASKS: 'false' }), /listening on (http:\/\/[\w.]+:\d+)/);
    started.push(api);
    const base = api.match[1]!.replace('localhost', '127.0.0.1');
    // One at a time: the first worker's start runs nothing the API has not migrated, the rest just join.
    const workers: Started[] = [];
    for (let i = 0; i < workerCount; i++) {
      workers.push(await startTessera(`worker ${i + 1}`, ['worker'], env(shared), /worker running tasks/));
      started.push(workers[i]!);
    }
    const call = async (method: string, route: string, body?: unknown): Promise<Record<string, any>> => {
      const res = await fetch(`${base}${route}`, {
        method,
        headers: { Authorization: `Bearer ${ADMIN_KEY}`, 'X-Namespace': 'scale', 'Content-Type': 'application/json' },
        ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
      });
      const json = (await res.json()) as Record<string, any>;
      if (!res.ok) throw new Error(`${method} ${route}: ${res.status} ${JSON.stringify(json)}`);
      return json;
    };
    await call('POST', '/v1/namespaces', { namespace_name: 'scale' });
    await call('POST', '/v1/buckets', { bucket_name: 'notes' });
    await call('POST', '/v1/collections/create', {
      collection_name: 'notes-text',
      source: { type: 'bucket', bucket_id: 'notes' },
      feature_extractors: [{ feature_extractor_name: 'text_extractor' }],
    });
    const createStart = performance.now();
    const ids: string[] = [];
    for (let first = 0; first < texts; first += 1_000) {
      const objects = [];
      for (let i = first; i < Math.min(texts, first + 1_000); i++) objects.push({ key: `n/${i}`, blobs: [{ property: 'content', text: shortText(i) }] });
      const created = await call('POST', '/v1/buckets/notes/objects/bulk', { objects });
      for (const o of created.results as Array<{ object_id: string }>) ids.push(o.object_id);
    }
    const createSeconds = (performance.now() - createStart) / 1000;

    const processes = { api: tree(api.child.pid!), workers: workers.flatMap((w) => tree(w.child.pid!)), inference: tree(inferencePid) };
    const before = { api: sample(processes.api), workers: sample(processes.workers), inference: sample(processes.inference), postgres: sample(await postgresBackends(admin, database)) };
    const batchStart = performance.now();
    const batch = await call('POST', '/v1/buckets/notes/batches', { object_ids: ids });
    await call('POST', `/v1/buckets/notes/batches/${batch.batch_id}/submit`);
    let done: Record<string, any>;
    for (;;) {
      done = await call('GET', `/v1/buckets/notes/batches/${batch.batch_id}`);
      if (['COMPLETED', 'COMPLETED_WITH_ERRORS', 'FAILED', 'CANCELED'].includes(done.status)) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    const batchSeconds = (performance.now() - batchStart) / 1000;
    const after = {
      api: sample(tree(api.child.pid!)),
      workers: sample(workers.flatMap((w) => tree(w.child.pid!))),
      inference: sample(tree(inferencePid)),
      postgres: sample(await postgresBackends(admin, database)),
    };
    if (done.status !== 'COMPLETED') throw new Error(`batch ended ${done.status}: ${JSON.stringify(done.tier_tasks?.[0]?.errors?.slice(0, 2))}`);
    const documents = Number(done.tier_tasks?.[0]?.documents_written ?? 0);
    if (documents !== texts) throw new Error(`expected ${texts} documents, the batch wrote ${documents}`);
    return {
      workers: workerCount,
      documents,
      createSeconds,
      batchSeconds,
      cpu: {
        api: used(before.api, after.api),
        workers: used(before.workers, after.workers),
        inference: used(before.inference, after.inference),
        postgres: used(before.postgres, after.postgres),
      },
    };
  } finally {
    for (const s of started.reverse()) await stop(s.child);
    await NatsEventBus.deleteStream(natsUrl, prefix).catch(() => undefined);
    await deleteTaskStream(natsUrl, prefix).catch(() => undefined);
    await admin.query(`drop database if exists ${database} with (force)`);
    await rm(home, { recursive: true, force: true });
  }
}

const admin = new pg.Client({ connectionString: databaseUrl });
await admin.connect();
const inferenceHome = await mkdtemp(path.join(os.tmpdir(), 'tessera-scale-out-inference-'));
let inference: Started | undefined;
const results: RunResult[] = [];
try {
  inference = await startTessera('inference', ['inference', '--listen', '127.0.0.1:0'], env({ TESSERA_HOME: inferenceHome }), /inference listening on ([\w.]+:\d+)/);
  const address = inference.match[1]!;
  console.log(`scale-out: ${texts} short texts per run, ${os.availableParallelism()} cores; PostgreSQL ${new URL(databaseUrl).host}, NATS ${natsUrl}, inference at ${address}`);
  for (const n of workerCounts) {
    const r = await run(n, address, inference.child.pid!, admin);
    results.push(r);
    const total = r.cpu.api + r.cpu.workers + r.cpu.inference;
    console.log(
      `  ${n} worker${n === 1 ? ' ' : 's'}: ${(r.documents / r.batchSeconds).toFixed(0).padStart(5)} documents/s  (batch ${r.batchSeconds.toFixed(1)} s; objects created in ${r.createSeconds.toFixed(1)} s)` +
        `  CPU-s per 1,000 documents: ${((total * 1000) / r.documents).toFixed(2)} Tessera` +
        ` [api ${((r.cpu.api * 1000) / r.documents).toFixed(2)}, workers ${((r.cpu.workers * 1000) / r.documents).toFixed(2)}, inference ${((r.cpu.inference * 1000) / r.documents).toFixed(2)}]` +
        ` + ${((r.cpu.postgres * 1000) / r.documents).toFixed(2)} PostgreSQL`,
    );
  }
  console.log(
    `\nOn ${os.availableParallelism()} cores the documents/s curve flattens once the processes together use every core; ` +
      'CPU-seconds per 1,000 documents is the figure that carries to bigger machines ' +
      '(documents/s ≈ cores × 1,000 / CPU-s per 1,000 documents, while the database keeps up).',
  );
} finally {
  for (const child of [...running]) await stop(child);
  await admin.end();
  await rm(inferenceHome, { recursive: true, force: true });
}
