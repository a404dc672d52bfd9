/**
 * `tsx scripts/bench/public.ts [--docs N] [--queries Q] [--clients C] [--seconds S] [--backend embedded|postgres]`
 *
 * The cost of the public path: one saved retriever (feature_search over N documents, default 10,000, with
 * 384-d clustered vectors and a text field), executed in the same run through
 * - the private execute `POST /v1/retrievers/{id}/execute` (API key), and
 * - the public execute `POST /v1/public/retrievers/{public_name}/execute` (no key; publication read from the
 *   database, caller check, three rate-limit counters, exposed-field filtering, presigned URLs off in both),
 * alternating, so both see the same data, caches and machine. Prints p50/p95 at 1 client and QPS at C clients
 * (default 8) for each, and the public path's overhead. When the search page `/p/{public_name}` exists, also
 * its first-load size (HTML plus every same-origin script and stylesheet it names).
 */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { pino } from 'pino';
import { startKernel } from '../../kernel/app.js';
import { loadConfig } from '../../kernel/config.js';
import { clusteredVectors } from '../../test/support/embeddings.js';
import builtins from '../../plugins/index.js';

const { values: args } = parseArgs({
  options: {
    docs: { type: 'string', default: '10000' },
    queries: { type: 'string', default: '200' },
    clients: { type: 'string', default: '8' },
    seconds: { type: 'string', default: '5' },
    backend: { type: 'string', default: 'embedded' },
  },
});
const DOCS = Number(args.docs);
const QUERIES = Number(args.queries);
const CLIENTS = Number(args.clients);
const SECONDS = Number(args.seconds);
const DIMS = 384;
const BATCH = 1_000;
const FEATURE = 'tessera://text_extractor@1.0/text_embedding';
const postgresUrl = process.env.BENCH_DATABASE_URL ?? process.env.TEST_DATABASE_URL;

const pct = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
const ms = (v: number) => `${v.toFixed(2)} ms`;

async function main(): Promise<void> {
  if (args.backend === 'postgres' && !postgresUrl) throw new Error('--backend postgres needs BENCH_DATABASE_URL or TEST_DATABASE_URL');
  console.log(`generating ${DOCS} × ${DIMS}-d vectors and ${QUERIES} queries ...`);
  const vectors = clusteredVectors(DOCS, DIMS, 7, { clusters: 50 });
  const queries = clusteredVectors(QUERIES, DIMS, 8, { clusters: 50 }).map((q) => q.map((x) => Math.fround(x)));
  const home = await mkdtemp(path.join(os.tmpdir(), 'tessera-bench-public-'));
  const adminKey = `svc_sk_bench_${'p'.repeat(47)}`;
  const kernel = await startKernel({
    config: {
      ...loadConfig(), home, port: 0, host: '127.0.0.1', adminKey, logLevel: 'silent', batchHealthIntervalMs: 0,
      databaseUrl: args.backend === 'postgres' ? postgresUrl : undefined,
    },
    plugins: builtins.map((plugin) => ({ plugin, origin: 'builtin' })),
    overrides: { logger: pino({ level: 'silent' }) },
  });
  const namespace = `bench_${Date.now().toString(36)}`;
  const call = async (method: string, route: string, body?: unknown, key: string | null = adminKey): Promise<Record<string, any>> => {
    const res = await fetch(`${kernel.url}${route}`, {
      method,
      headers: { ...(key ? { Authorization: `Bearer ${key}`, 'X-Namespace': namespace } : {}), 'Content-Type': 'application/json' },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
    const json = (await res.json()) as Record<string, any>;
    if (!res.ok) throw new Error(`${method} ${route}: ${res.status} ${JSON.stringify(json).slice(0, 500)}`);
    return json;
  };
  try {
    await call('POST', '/v1/namespaces', { namespace_name: namespace });
    await call('POST', '/v1/buckets', { bucket_name: 'unused' });
    await call('POST', '/v1/collections/create', {
      collection_name: 'bench', source: { type: 'bucket', bucket_id: 'unused' }, feature_extractors: [{ feature_extractor_name: 'text_extractor' }],
    });
    for (let i = 0; i < DOCS; i += BATCH) {
      const documents = vectors.slice(i, i + BATCH).map((v, j) => ({ key: `doc-${i + j}`, fields: { text: `item ${i + j}`, n: i + j }, vectors: { text_embedding: v } }));
      await call('POST', '/v1/collections/bench/documents/bulk', { documents });
    }
    await call('POST', '/v1/retrievers', {
      retriever_name: 'bench',
      collection_identifiers: ['bench'],
      input_schema: { vector: { type: 'array', required: true } },
      stages: [{ stage_name: 'search', stage_type: 'filter', config: { stage_id: 'feature_search', parameters: { searches: [{ feature_uri: FEATURE, query: { vector: '{{inputs.vector}}' }, top_k: 10 }], final_top_k: 10 } } }],
    });
    await call('POST', '/v1/retrievers/bench/publish', {
      public_name: 'bench-public', display_config: { exposed_fields: ['text', 'n'] }, rate_limits: { per_minute: 1_000_000, per_hour: 10_000_000, per_day: 100_000_000 },
    });
    const paths = {
      private: { route: '/v1/retrievers/bench/execute', key: adminKey as string | null },
      public: { route: '/v1/public/retrievers/bench-public/execute?return_presigned_urls=false', key: null },
    };
    const run = (which: keyof typeof paths, i: number) => call('POST', paths[which].route, { inputs: { vector: queries[i % QUERIES] } }, paths[which].key);
    // Warm both paths (indexes, caches, JIT).
    for (let i = 0; i < 20; i++) await Promise.all([run('private', i), run('public', i)]);

    const times = { private: [] as number[], public: [] as number[] };
    for (let i = 0; i < QUERIES; i++) {
      for (const which of (i % 2 === 0 ? ['private', 'public'] : ['public', 'private']) as Array<keyof typeof paths>) {
        const t0 = performance.now();
        await run(which, i);
        times[which].push(performance.now() - t0);
      }
    }
    const qps = async (which: keyof typeof paths) => {
      let done = 0;
      const until = performance.now() + SECONDS * 1000;
      await Promise.all(Array.from({ length: CLIENTS }, async (_, c) => {
        for (let i = c; performance.now() < until; i += CLIENTS) {
          await run(which, i);
          done++;
        }
      }));
      return done / SECONDS;
    };
    const throughput = { private: await qps('private'), public: await qps('public') };
    // A second private round, so the order does not favour either side.
    throughput.private = (throughput.private + (await qps('private'))) / 2;
    throughput.public = (throughput.public + (await qps('public'))) / 2;

    console.log(`\nsame retriever (feature_search, ${DOCS} docs, top 10), ${args.backend}, same run`);
    for (const which of ['private', 'public'] as const) {
      const sorted = [...times[which]].sort((a, b) => a - b);
      console.log(`  ${which.padEnd(8)} p50 ${ms(pct(sorted, 50)).padStart(10)}   p95 ${ms(pct(sorted, 95)).padStart(10)}   QPS@${CLIENTS} ${throughput[which].toFixed(0).padStart(6)}`);
    }
    const p50 = (which: 'private' | 'public') => pct([...times[which]].sort((a, b) => a - b), 50);
    console.log(`  public overhead: p50 ${(((p50('public') / p50('private')) - 1) * 100).toFixed(1)}%, QPS ${(((throughput.private / throughput.public) - 1) * 100).toFixed(1)}% (target ≤ 10%)`);

    const page = await fetch(`${kernel.url}/p/bench-public`);
    if (page.ok) {
      const html = await page.text();
      let bytes = Buffer.byteLength(html);
      const external: string[] = [];
      for (const m of html.matchAll(/(?:src|href)="([^"]+)"/g)) {
        const ref = m[1]!;
        if (/^https?:\/\//.test(ref) && !ref.startsWith(kernel.url)) external.push(ref);
        else if (/\.(js|css)(\?|$)/.test(ref)) bytes += (await (await fetch(new URL(ref, kernel.url))).arrayBuffer()).byteLength;
      }
      console.log(`\nsearch page /p/bench-public first load: ${(bytes / 1024).toFixed(1)} KB (target < 100 KB), external requests: ${external.length}`);
    } else {
      console.log(`\nsearch page /p/{public_name}: not served here (${page.status}); first-load size not measured`);
    }
  } finally {
    await kernel.stop();
    await rm(home, { recursive: true, force: true });
  }
}

await main();
