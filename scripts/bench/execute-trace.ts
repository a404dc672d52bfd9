/**
 * `tsx scripts/bench/execute-trace.ts [--runs N] [--docs D] [--distinct Q] [--cpu-profile FILE] [--heap-profile FILE] [--clients C --seconds S]`
 *
 * Where one saved `feature_search` execute through HTTP spends its time: N executes at one client over
 * D documents (default 1,000), then the database statements each execute issued (count and milliseconds per execute,
 * grouped by statement) and, with --cpu-profile, a V8 CPU profile of the timed executes only (open it in
 * Chrome DevTools), with --heap-profile a sampled profile of what the timed executes allocated on the service's thread,
 * garbage included (what young-generation collections, and so the latency tail, come from); with --clients, then executes/s with C requests in flight for S seconds. Queries are the documents' own vectors, each different unless --distinct Q repeats the first Q
 * (as retrieval.ts does with its 200 queries: warm documents). On Linux it also prints the CPU per execute of each thread. Embedded database unless BENCH_DATABASE_URL is set.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { Session } from 'node:inspector/promises';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { PerformanceObserver } from 'node:perf_hooks';
import { pino } from 'pino';
import { startKernel } from '../../kernel/app.js';
import { loadConfig } from '../../kernel/config.js';
import { DatabaseHandle } from '../../kernel/tokens.js';
import { HttpLoad } from './http-load.js';
import { threadCpuLines, threadTicks } from './thread-cpu.js';
import { clusteredVectors } from '../../test/support/embeddings.js';
import builtins from '../../plugins/index.js';

const { values: args } = parseArgs({
  options: {
    runs: { type: 'string', default: '100' }, docs: { type: 'string', default: '1000' }, distinct: { type: 'string' }, 'cpu-profile': { type: 'string' },
    'heap-profile': { type: 'string' },
    clients: { type: 'string' }, seconds: { type: 'string', default: '5' },
  },
});
const RUNS = Number(args.runs);
const WARM_EXECUTES = 300;
const DOCS = Number(args.docs);
const DISTINCT = args.distinct ? Math.max(1, Number(args.distinct)) : Infinity;
const FEATURE = 'tessera://text_extractor@1.0/text_embedding';

const home = await mkdtemp(path.join(os.tmpdir(), 'tessera-execute-trace-'));
const adminKey = `svc_sk_bench_${'t'.repeat(47)}`;
const kernel = await startKernel({
  config: { ...loadConfig(), home, port: 0, host: '127.0.0.1', adminKey, logLevel: 'silent', batchHealthIntervalMs: 0, databaseUrl: process.env.BENCH_DATABASE_URL },
  plugins: builtins.map((plugin) => ({ plugin, origin: 'builtin' })),
  overrides: { logger: pino({ level: 'silent' }) },
});
const namespace = `trace_${Date.now().toString(36)}`;
const call = async (method: string, route: string, body?: unknown): Promise<Record<string, unknown>> => {
  const res = await fetch(`${kernel.url}${route}`, {
    method,
    headers: { Authorization: `Bearer ${adminKey}`, 'X-Namespace': namespace, 'Content-Type': 'application/json' },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
  const json = (await res.json()) as Record<string, unknown>;
  if (!res.ok) throw new Error(`${method} ${route}: ${res.status} ${JSON.stringify(json).slice(0, 500)}`);
  return json;
};

interface QueryEvent { __knexQueryUid: string; sql: string }

try {
  await call('POST', '/v1/namespaces', { namespace_name: namespace });
  await call('POST', '/v1/buckets', { bucket_name: 'unused' });
  await call('POST', '/v1/collections/create', {
    collection_name: 'trace', source: { type: 'bucket', bucket_id: 'unused' }, feature_extractors: [{ feature_extractor_name: 'text_extractor' }],
  });
  const vectors = clusteredVectors(DOCS, 384, 7, { clusters: 20 });
  for (let from = 0; from < DOCS; from += 1_000) {
    await call('POST', '/v1/collections/trace/documents/bulk', {
      documents: vectors.slice(from, from + 1_000).map((v, j) => ({ key: `d${from + j}`, fields: { text: `document ${from + j}`, n: from + j }, vectors: { text_embedding: v } })),
    });
  }
  const created = (await call('POST', '/v1/retrievers', {
    retriever_name: 'vec', collection_identifiers: ['trace'], input_schema: { vector: { type: 'array', required: true } },
    stages: [{ stage_name: 'search', stage_type: 'filter', config: { stage_id: 'feature_search', parameters: { searches: [{ feature_uri: FEATURE, query: { vector: '{{inputs.vector}}' }, top_k: 10 }], final_top_k: 10 } } }],
  })) as { retriever: { retriever_id: string } };
  const execute = (i: number) => call('POST', `/v1/retrievers/${created.retriever.retriever_id}/execute`, { inputs: { vector: vectors[i % vectors.length] } });
  // Warm up: with 20 executes the timed ones still ran partly unoptimized code (p50 2.3–8 ms between runs at
  // 20,000 documents). Queried by the last documents' vectors, so the timed queries' documents stay cold.
  for (let i = 0; i < WARM_EXECUTES; i++) await execute(DOCS - 1 - i);

  const db = kernel.services.get(DatabaseHandle).db;
  const started = new Map<string, number>();
  const statements = new Map<string, { count: number; ms: number }>();
  db.on('query', (q: QueryEvent) => started.set(q.__knexQueryUid, performance.now()));
  db.on('query-response', (_rows: unknown, q: QueryEvent) => {
    const key = q.sql.replace(/\s+/g, ' ').slice(0, 80);
    const entry = statements.get(key) ?? { count: 0, ms: 0 };
    entry.count += 1;
    entry.ms += performance.now() - (started.get(q.__knexQueryUid) ?? performance.now());
    statements.set(key, entry);
  });
  const session = new Session();
  session.connect();
  if (args['cpu-profile']) {
    await session.post('Profiler.enable');
    await session.post('Profiler.start');
  }
  if (args['heap-profile']) {
    await session.post('HeapProfiler.enable');
    await session.post('HeapProfiler.startSampling', { samplingInterval: 4096, includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: true });
  }
  // The client runs in a worker thread: the profile and the CPU time below are the service's alone.
  const load = new HttpLoad(kernel.url, { Authorization: `Bearer ${adminKey}`, 'X-Namespace': namespace });
  const cpuBefore = process.cpuUsage();
  const threadsBefore = threadTicks();
  // The HTTP thread's garbage collections while the timed executes run: a pause lands on whichever request is in flight.
  const collections: number[] = [];
  const gcObserver = new PerformanceObserver((list) => void collections.push(...list.getEntries().map((e) => e.duration)));
  gcObserver.observe({ entryTypes: ['gc'] });
  const run = await load.latencies(`/v1/retrievers/${created.retriever.retriever_id}/execute`, Array.from({ length: RUNS }, (_, i) => ({ inputs: { vector: vectors[(i % DISTINCT) % vectors.length] } })), ['document_id']);
  const cpu = process.cpuUsage(cpuBefore);
  if (args['heap-profile']) {
    const { profile } = await session.post('HeapProfiler.stopSampling');
    await writeFile(args['heap-profile'], JSON.stringify(profile));
  }
  const printStatements = (executes: number) => {
    console.log('statements per execute (count, ms):');
    for (const [sql, { count, ms }] of [...statements].sort((a, b) => b[1].ms - a[1].ms)) {
      console.log(`  ${(count / executes).toFixed(2).padStart(6)} ${(ms / executes).toFixed(2).padStart(7)}  ${sql}`);
    }
    statements.clear();
  };
  gcObserver.disconnect();
  console.log(`${RUNS} executes at 1 client: p50 ${run.p50.toFixed(2)} ms, p95 ${run.p95.toFixed(2)} ms`);
  const slow = run.times.filter((t) => t > run.p50 * 2.5).length;
  const gcMs = collections.reduce((a, b) => a + b, 0);
  console.log(
    `the tail: ${slow} executes over 2.5 × p50; HTTP thread garbage collections ${collections.length}, ${gcMs.toFixed(1)} ms in all, longest ${Math.max(0, ...collections).toFixed(1)} ms`,
  );
  console.log(`process CPU per execute (service and client threads): ${((cpu.user + cpu.system) / 1000 / RUNS).toFixed(2)} ms`);
  const byThread = threadCpuLines(threadsBefore, RUNS);
  if (byThread.length > 0) console.log(`CPU per execute by thread (Linux /proc; main is the HTTP thread):\n${byThread.join('\n')}`);
  printStatements(RUNS);
  if (args.clients) {
    const bodies = Array.from({ length: Math.min(DISTINCT, vectors.length) }, (_, i) => ({ inputs: { vector: vectors[i] } }));
    const throughputCpu = process.cpuUsage();
    const throughputThreads = threadTicks();
    const qps = await load.throughput(`/v1/retrievers/${created.retriever.retriever_id}/execute`, bodies, Number(args.clients), Number(args.seconds));
    const used = process.cpuUsage(throughputCpu);
    const executes = qps * Number(args.seconds);
    console.log(`${args.clients} clients for ${args.seconds} s: ${qps.toFixed(0)} executes/s, process CPU per execute ${((used.user + used.system) / 1000 / executes).toFixed(2)} ms`);
    // At full load the busiest thread is the bound: its CPU per execute caps executes/s at 1,000 / that.
    const loadedThreads = threadCpuLines(throughputThreads, executes);
    if (loadedThreads.length > 0) console.log(`CPU per execute by thread at ${args.clients} clients:\n${loadedThreads.join('\n')}`);
    printStatements(executes);
  }
  await load.close();
  if (args['cpu-profile']) {
    const { profile } = await session.post('Profiler.stop');
    await writeFile(args['cpu-profile'], JSON.stringify(profile));
  }
  session.disconnect();
} finally {
  await kernel.stop();
  await rm(home, { recursive: true, force: true });
}
