/**
 * `tsx scripts/bench/retrieval.ts [--docs N] [--queries Q] [--clients C] [--seconds S] [--backend embedded|postgres|both]`
 *
 * Retrieval through the whole HTTP path, one run, same data: N documents (default 100,000) with 384-d
 * embeddings (clustered, embedding-like; test/support/embeddings.ts), a text field (Zipf words) and a
 * `slot` field (i % 100) for filters, loaded with `POST /v1/collections/{c}/documents/bulk` (bring your
 * own vectors), then executed through saved retrievers (`POST /v1/retrievers/{id}/execute`):
 * - feature_search: p50/p95 at 1 client, QPS at C clients (default 8), recall@10 against exact;
 * - filtered (`slot < 50 | 10 | 1`, i.e. 50%, 10%, 1% selectivity): recall@10 and p50;
 * - text_search and hybrid (vector + BM25, rrf): p50 at 1 client;
 * - load rate (documents/s), and the in-process index's memory per vector;
 * and beside them, on the same queries in this process: LanceDB (`@lancedb/lancedb`, IVF_HNSW_SQ as the
 * engine builds it) and an exact brute-force scan.
 *
 * The HTTP client runs in a worker thread (scripts/bench/http-load.ts): timings are what a separate client
 * sees, and the client's own work is not charged to the service's event loop.
 *
 * Backends: the embedded default (PGlite + pgvector behind the in-process HNSW index), and PostgreSQL when
 * BENCH_DATABASE_URL or TEST_DATABASE_URL is set (LanceDB behind it here: this PostgreSQL has no pgvector).
 * Set VECTOR_MEMORY_INDEX=off to measure the engines without the in-process index.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { pino } from 'pino';
import { startKernel } from '../../kernel/app.js';
import { loadConfig } from '../../kernel/config.js';
import { seededRandom } from '../../kernel/random.js';
import { VectorIndex } from '../../kernel/tokens.js';
import { HnswMemoryIndex } from '../../kernel/vectors/hnsw-memory.js';
import { LanceDbIndex } from '../../kernel/vectors/lancedb.js';
import { HttpLoad } from './http-load.js';
import { featureIndexName } from '../../kernel/vectors/naming.js';
import { parseFilter } from '../../kernel/filters/filter.js';
import { clusteredVectors } from '../../test/support/embeddings.js';
import builtins from '../../plugins/index.js';

const { values: args } = parseArgs({
  options: {
    docs: { type: 'string', default: '100000' },
    queries: { type: 'string', default: '200' },
    clients: { type: 'string', default: '8' },
    seconds: { type: 'string', default: '5' },
    backend: { type: 'string' },
  },
});
const DOCS = Number(args.docs);
const QUERIES = Number(args.queries);
const CLIENTS = Number(args.clients);
const SECONDS = Number(args.seconds);
const DIMS = 384;
const BATCH = 1_000;
const K = 10;
const SHARES = [50, 10, 1];
const FEATURE = 'tessera://text_extractor@1.0/text_embedding';
const postgresUrl = process.env.BENCH_DATABASE_URL ?? process.env.TEST_DATABASE_URL;
const backends = (args.backend ?? (postgresUrl ? 'both' : 'embedded')) === 'both' ? ['embedded', 'postgres'] : [args.backend ?? 'embedded'];

type Row = [string, string];
const table: Array<{ section: string; rows: Row[] }> = [];
const report = (section: string, rows: Row[]) => {
  table.push({ section, rows });
  console.log(`\n${section}`);
  for (const [k, v] of rows) console.log(`  ${k.padEnd(44)} ${v}`);
};

// ---------- data ----------
console.log(`generating ${DOCS} × ${DIMS}-d vectors and ${QUERIES} queries ...`);
const queries = clusteredVectors(QUERIES, DIMS, 8, { clusters: 50 }).map((q) => q.map((x) => Math.fround(x)));
// The documents' vectors held in one Float32Array, not 100,000 arrays: the service under test shares this
// process's heap, and the bench's own data should not make its garbage collections longer.
const flat = new Float32Array(DOCS * DIMS);
clusteredVectors(DOCS, DIMS, 7, { clusters: 50 }).forEach((v, i) => flat.set(v, i * DIMS));
/** Vectors i..i+n-1 as arrays (for JSON bodies and LanceDB), made when needed. */
const vectorsFrom = (i: number, n: number): number[][] =>
  Array.from({ length: Math.max(0, Math.min(n, DOCS - i)) }, (_, j) => Array.from(flat.subarray((i + j) * DIMS, (i + j + 1) * DIMS)));
const slot = (i: number) => i % 100;

const rand = seededRandom(42);
const syllables = ['ka', 'lo', 'mi', 'ne', 'ru', 'sa', 'ti', 'vo', 'ze', 'pa', 'qui', 'dor', 'fen', 'gal', 'hum', 'jor'];
const words = Array.from({ length: 5_000 }, (_, i) => {
  let w = '';
  for (let n = i + 1; n > 0; n = Math.floor(n / syllables.length)) w += syllables[n % syllables.length];
  return w;
});
const cumulative: number[] = [];
let total = 0;
for (let i = 0; i < words.length; i++) cumulative.push((total += 1 / (i + 1)));
const word = () => {
  const x = rand() * total;
  let lo = 0;
  let hi = words.length - 1;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (cumulative[mid]! < x) lo = mid + 1;
    else hi = mid;
  }
  return words[lo]!;
};
const texts = Array.from({ length: DOCS }, () => Array.from({ length: 8 + Math.floor(rand() * 17) }, word).join(' '));
const textQueries = Array.from({ length: QUERIES }, () => `${words[20 + Math.floor(rand() * 500)]} ${words[Math.floor(rand() * 2_000)]}`);

/** Exact top-k ids (cosine; vectors are unit length) among the documents passing `keep`. */
function exact(q: number[], keep: (i: number) => boolean): number[] {
  const top: Array<[number, number]> = [];
  for (let i = 0; i < DOCS; i++) {
    if (!keep(i)) continue;
    let dot = 0;
    const base = i * DIMS;
    for (let d = 0; d < DIMS; d++) dot += q[d]! * flat[base + d]!;
    if (top.length < K || dot > top[top.length - 1]![1]) {
      top.push([i, dot]);
      top.sort((a, b) => b[1] - a[1]);
      if (top.length > K) top.pop();
    }
  }
  return top.map(([i]) => i);
}
const truth = new Map<number, number[][]>();
for (const share of [100, ...SHARES]) truth.set(share, queries.map((q) => exact(q, (i) => slot(i) < share)));

function recall(found: number[][], share: number): number {
  const want = truth.get(share)!;
  let sum = 0;
  for (let i = 0; i < want.length; i++) {
    const w = new Set(want[i]);
    sum += found[i]!.filter((id) => w.has(id)).length / w.size;
  }
  return sum / want.length;
}

const pct = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
const ms = (x: number) => `${x.toFixed(2)} ms`;

async function latencies(n: number, run: (i: number) => Promise<number[]>): Promise<{ p50: number; p95: number; found: number[][] }> {
  const times: number[] = [];
  const found: number[][] = [];
  for (let i = 0; i < n; i++) {
    const t0 = performance.now();
    found.push(await run(i));
    times.push(performance.now() - t0);
  }
  times.sort((a, b) => a - b);
  return { p50: pct(times, 50), p95: pct(times, 95), found };
}

async function throughput(clients: number, seconds: number, run: (i: number) => Promise<unknown>): Promise<number> {
  let done = 0;
  const until = performance.now() + seconds * 1000;
  await Promise.all(
    Array.from({ length: clients }, async (_, c) => {
      for (let i = c; performance.now() < until; i += clients) {
        await run(i % QUERIES);
        done++;
      }
    }),
  );
  return done / seconds;
}

// ---------- in-process baselines ----------
async function inProcessBaselines(): Promise<void> {
  const exactRun = await latencies(QUERIES, async (i) => exact(queries[i]!, () => true));
  report('exact brute-force scan, in process (Float32Array, one thread)', [
    ['recall@10', '1.000'],
    ['p50 / p95', `${ms(exactRun.p50)} / ${ms(exactRun.p95)}`],
    ['QPS (single thread: 1 / mean)', `${Math.round(1000 / exactRun.p50)}`],
  ]);

  const dir = await mkdtemp(path.join(os.tmpdir(), 'tessera-bench-lance-'));
  const lance = new LanceDbIndex({ uri: dir, annThreshold: Math.min(DOCS, 100_000) });
  try {
    const name = 'bench';
    await lance.ensureIndex({ name, dims: DIMS, distance: 'cosine' });
    const t0 = performance.now();
    for (let i = 0; i < DOCS; i += 10_000) {
      await lance.upsert(name, vectorsFrom(i, 10_000).map((vector, j) => ({ id: String(i + j), vector, payload: { slot: slot(i + j) } })));
    }
    const loadS = (performance.now() - t0) / 1000;
    const search = (i: number, share = 100) =>
      lance
        .search(name, { vector: queries[i]!, limit: K, ...(share < 100 ? { filter: parseFilter({ AND: [{ field: 'slot', operator: 'lt', value: share }] }) } : {}) })
        .then((hits) => hits.map((h) => Number(h.id)));
    await search(0);
    const one = await latencies(QUERIES, (i) => search(i));
    const qps = await throughput(CLIENTS, SECONDS, (i) => search(i));
    const rows: Row[] = [
      ['load + index build', `${loadS.toFixed(1)} s (${Math.round(DOCS / loadS)} docs/s)`],
      ['recall@10', recall(one.found, 100).toFixed(3)],
      ['p50 / p95 at 1 client', `${ms(one.p50)} / ${ms(one.p95)}`],
      [`QPS at ${CLIENTS} clients`, `${Math.round(qps)}`],
    ];
    for (const share of SHARES) {
      const f = await latencies(QUERIES, (i) => search(i, share));
      rows.push([`filter ${share}%: recall@10 / p50`, `${recall(f.found, share).toFixed(3)} / ${ms(f.p50)}`]);
    }
    report('LanceDB in process (IVF_HNSW_SQ, refine ×4)', rows);
  } finally {
    await lance.close();
    await rm(dir, { recursive: true, force: true });
  }
}

// ---------- through HTTP ----------
const WARM_DOCS = 2_000;
const WARM_EXECUTES = 300;

/**
 * A 1-client latency right after the load would time the first executes' compilation (JavaScript and the
 * database's WASM tiering up), not a running service's searches: executes over a separate small collection
 * first, with their own vectors and documents.
 */
async function warmUp(
  call: (method: string, route: string, body?: unknown) => Promise<Record<string, any>>,
  load: HttpLoad,
  stage: (parameters: Record<string, unknown>) => unknown[],
  vectorSearch: Record<string, unknown>,
): Promise<void> {
  const warmVectors = clusteredVectors(WARM_DOCS, DIMS, 11, { clusters: 10 });
  await call('POST', '/v1/collections/create', {
    collection_name: 'warm', source: { type: 'bucket', bucket_id: 'unused' }, feature_extractors: [{ feature_extractor_name: 'text_extractor' }],
  });
  for (let i = 0; i < WARM_DOCS; i += BATCH) {
    const documents = warmVectors.slice(i, i + BATCH).map((v, j) => ({ key: `warm-${i + j}`, fields: { text: `warm ${i + j}`, n: i + j }, vectors: { text_embedding: v } }));
    await call('POST', '/v1/collections/warm/documents/bulk', JSON.stringify({ documents }));
  }
  const { retriever } = await call('POST', '/v1/retrievers', {
    retriever_name: 'warm', collection_identifiers: ['warm'], input_schema: { vector: { type: 'array', required: true } }, stages: stage({ searches: [vectorSearch], final_top_k: K }),
  });
  const bodies = Array.from({ length: WARM_EXECUTES }, (_, i) => ({ inputs: { vector: warmVectors[(i * 7) % WARM_DOCS] } }));
  await load.latencies(`/v1/retrievers/${retriever.retriever_id as string}/execute`, bodies, ['document_id']);
}
async function overHttp(backend: string): Promise<void> {
  const home = await mkdtemp(path.join(os.tmpdir(), 'tessera-bench-retrieval-'));
  const adminKey = `svc_sk_bench_${'r'.repeat(47)}`;
  const base = loadConfig();
  const kernel = await startKernel({
    config: {
      ...base, home, port: 0, host: '127.0.0.1', adminKey, logLevel: 'silent', batchHealthIntervalMs: 0,
      databaseUrl: backend === 'postgres' ? postgresUrl : undefined,
    },
    plugins: builtins.map((plugin) => ({ plugin, origin: 'builtin' })),
    overrides: { logger: pino({ level: 'silent' }) },
  });
  const namespace = `bench_${Date.now().toString(36)}`;
  const call = async (method: string, route: string, body?: unknown): Promise<Record<string, any>> => {
    const res = await fetch(`${kernel.url}${route}`, {
      method,
      headers: { Authorization: `Bearer ${adminKey}`, 'X-Namespace': namespace, 'Content-Type': 'application/json' },
      ...(body !== undefined ? { body: typeof body === 'string' ? body : JSON.stringify(body) } : {}),
    });
    const json = (await res.json()) as Record<string, any>;
    if (!res.ok) throw new Error(`${method} ${route}: ${res.status} ${JSON.stringify(json).slice(0, 500)}`);
    return json;
  };
  try {
    const vectorsEngine = kernel.services.get(VectorIndex);
    await call('POST', '/v1/namespaces', { namespace_name: namespace });
    await call('POST', '/v1/buckets', { bucket_name: 'unused' });
    const collection = await call('POST', '/v1/collections/create', {
      collection_name: 'bench', source: { type: 'bucket', bucket_id: 'unused' }, feature_extractors: [{ feature_extractor_name: 'text_extractor' }],
    });
    const rssBefore = process.memoryUsage().rss;
    const t0 = performance.now();
    for (let i = 0; i < DOCS; i += BATCH) {
      const documents = vectorsFrom(i, BATCH).map((v, j) => ({
        key: `doc-${i + j}`, fields: { text: texts[i + j], slot: slot(i + j), n: i + j }, vectors: { text_embedding: v },
      }));
      await call('POST', '/v1/collections/bench/documents/bulk', JSON.stringify({ documents }));
    }
    const loadS = (performance.now() - t0) / 1000;

    const stage = (parameters: Record<string, unknown>) => [{ stage_name: 'search', stage_type: 'filter', config: { stage_id: 'feature_search', parameters } }];
    const vectorSearch = { feature_uri: FEATURE, query: { vector: '{{inputs.vector}}' }, top_k: K };
    const retriever = async (name: string, inputSchema: Record<string, unknown>, parameters: Record<string, unknown>) =>
      (await call('POST', '/v1/retrievers', { retriever_name: name, collection_identifiers: ['bench'], input_schema: inputSchema, stages: stage(parameters) })).retriever.retriever_id as string;
    const vec = await retriever('vec', { vector: { type: 'array', required: true } }, { searches: [vectorSearch], final_top_k: K });
    const filtered = await retriever('vec_filtered', { vector: { type: 'array', required: true }, share: { type: 'number', required: true } }, {
      searches: [vectorSearch], final_top_k: K, pre_filters: { AND: [{ field: 'slot', operator: 'lt', value: '{{inputs.share}}' }] },
    });
    const lexical = await retriever('lexical', { q: { type: 'text', required: true } }, { searches: [{ text_search: { query: '{{inputs.q}}' }, top_k: K }], final_top_k: K });
    const hybrid = await retriever('hybrid', { vector: { type: 'array', required: true }, q: { type: 'text', required: true } }, {
      searches: [vectorSearch, { text_search: { query: '{{inputs.q}}' }, top_k: K }], fusion: 'rrf', final_top_k: K,
    });
    const load = new HttpLoad(kernel.url, { Authorization: `Bearer ${adminKey}`, 'X-Namespace': namespace });
    const route = (id: string) => `/v1/retrievers/${id}/execute`;
    const bodies = (inputs: (i: number) => Record<string, unknown>) => queries.map((_, i) => ({ inputs: inputs(i) }));
    const timed = (id: string, inputs: (i: number) => Record<string, unknown>) => load.latencies(route(id), bodies(inputs), ['payload', 'fields', 'n']);
    const byVector = (i: number) => ({ vector: queries[i] });

    // The first search builds the graph when the load did not (another process, or the index existed before).
    const tFirst = performance.now();
    const first = await load.latencies(route(vec), [{ inputs: byVector(0) }], ['payload', 'fields', 'n']);
    const firstMs = performance.now() - tFirst;
    if (first.found[0]!.some((n) => !Number.isInteger(n))) throw new Error('documents came back without fields.n: check the response shape');
    const indexName = featureIndexName(collection.collection_id as string, 'text_embedding');
    const memory = vectorsEngine instanceof HnswMemoryIndex ? vectorsEngine.memory(indexName) : undefined;
    const rssAfter = process.memoryUsage().rss;

    // Warm-up (compiled code, the database thread's prepared reads) on a collection of its own, so the
    // measured queries still read their hit documents cold from the database.
    await warmUp(call, load, stage, vectorSearch);
    const one = await timed(vec, byVector);
    const qps = await load.throughput(route(vec), bodies(byVector), CLIENTS, SECONDS);
    const rows: Row[] = [
      ['vector engine', vectorsEngine.engine],
      ['load through HTTP (bulk, 1,000 per request)', `${loadS.toFixed(1)} s = ${Math.round(DOCS / loadS)} docs/s`],
      ['first search after load', ms(firstMs)],
      ['feature_search recall@10', recall(one.found, 100).toFixed(3)],
      ['feature_search p50 / p95 at 1 client', `${ms(one.p50)} / ${ms(one.p95)}`],
      [`feature_search QPS at ${CLIENTS} clients`, `${Math.round(qps)}`],
    ];
    for (const share of SHARES) {
      const f = await timed(filtered, (i) => ({ vector: queries[i], share }));
      const plan = vectorsEngine instanceof HnswMemoryIndex ? ` (${vectorsEngine.lastPlan(indexName)})` : '';
      rows.push([`filter ${share}%: recall@10 / p50${plan}`, `${recall(f.found, share).toFixed(3)} / ${ms(f.p50)}`]);
    }
    const text = await timed(lexical, (i) => ({ q: textQueries[i] }));
    rows.push(['text_search p50 / p95 at 1 client', `${ms(text.p50)} / ${ms(text.p95)}`]);
    const fused = await timed(hybrid, (i) => ({ vector: queries[i], q: textQueries[i] }));
    rows.push(['hybrid (vector + BM25, rrf) p50 / p95', `${ms(fused.p50)} / ${ms(fused.p95)}`]);
    await load.close();
    if (memory) {
      rows.push(['in-process index: vectors / bytes per vector', `${memory.vectors} / ${memory.bytesPerVector} (graph + 2 vector copies; payloads aside)`]);
    }
    rows.push(['process RSS growth over load (MB)', `${Math.round((rssAfter - rssBefore) / 1e6)}`]);
    report(`${backend === 'postgres' ? 'PostgreSQL' : 'embedded (PGlite)'}: through HTTP, saved retriever execute`, rows);
  } finally {
    await kernel.stop();
    await rm(home, { recursive: true, force: true });
  }
}

console.log(`retrieval bench: ${DOCS} documents, ${QUERIES} queries, ${CLIENTS} clients, ${os.cpus().length} cores (load average ${os.loadavg().map((x) => x.toFixed(1)).join(' ')}: a shared machine, figures are noisy)`);
for (const backend of backends) await overHttp(backend);
await inProcessBaselines();
console.log('\n=== summary ===');
for (const { section, rows } of table) {
  console.log(section);
  for (const [k, v] of rows) console.log(`  ${k.padEnd(44)} ${v}`);
}
