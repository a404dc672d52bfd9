/**
 * `tsx scripts/bench/byo-vectors.ts [requests] [size] [dims]` (defaults 20, 1000, 384): documents per
 * second written directly through HTTP (`POST /v1/collections/{id}/documents/bulk`), each with one
 * `text_embedding` vector, one request at a time: first as new documents, then the same keys re-sent
 * (replacements). Request bodies are serialised before the clock starts.
 *
 * The server runs in this process on its embedded defaults (PGlite, pgvector), or on PostgreSQL (and
 * its vector engine) when DATABASE_URL is set.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { pino } from 'pino';
import { startKernel } from '../../kernel/app.js';
import { loadConfig } from '../../kernel/config.js';
import { VectorIndex } from '../../kernel/tokens.js';
import { featureIndexName } from '../../kernel/vectors/naming.js';
import builtins from '../../plugins/index.js';

const requests = Number(process.argv[2] ?? 20);
const size = Number(process.argv[3] ?? 1000);
const dims = Number(process.argv[4] ?? 384);
const home = await mkdtemp(path.join(os.tmpdir(), 'tessera-bench-byo-'));
const adminKey = `svc_sk_bench_${'v'.repeat(47)}`;
const kernel = await startKernel({
  config: { ...loadConfig(), home, port: 0, host: '127.0.0.1', adminKey, logLevel: 'silent', batchHealthIntervalMs: 0 },
  plugins: builtins.map((plugin) => ({ plugin, origin: 'builtin' })),
  overrides: { logger: pino({ level: 'silent' }) },
});

async function call(method: string, route: string, body?: string): Promise<Record<string, any>> {
  const res = await fetch(`${kernel.url}${route}`, {
    method,
    headers: { Authorization: `Bearer ${adminKey}`, 'X-Namespace': 'bench', 'Content-Type': 'application/json' },
    ...(body !== undefined ? { body } : {}),
  });
  const json = (await res.json()) as Record<string, any>;
  if (!res.ok) throw new Error(`${method} ${route}: ${res.status} ${JSON.stringify(json).slice(0, 500)}`);
  return json;
}

/** Seeded, so every run writes the same vectors. */
function vector(seed: number): number[] {
  let s = seed + 1;
  const out = Array.from({ length: dims }, () => ((s = (s * 1103515245 + 12345) % 2147483648) / 2147483648) - 0.5);
  const norm = Math.hypot(...out);
  return out.map((x) => x / norm);
}

function bodyOf(request: number): string {
  const documents = Array.from({ length: size }, (_, j) => {
    const i = request * size + j;
    return { key: `doc-${i}`, fields: { title: `document ${i}`, group: i % 10 }, metadata: { shard: i % 4 }, vectors: { text_embedding: vector(i) } };
  });
  return JSON.stringify({ documents });
}

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

async function pass(label: string, bodies: string[]): Promise<void> {
  const times: number[] = [];
  const started = performance.now();
  for (const body of bodies) {
    const t0 = performance.now();
    await call('POST', '/v1/collections/vectors/documents/bulk', body);
    times.push(performance.now() - t0);
  }
  const seconds = (performance.now() - started) / 1000;
  times.sort((a, b) => a - b);
  const docs = bodies.length * size;
  console.log(
    `${label.padEnd(12)} ${docs} docs in ${seconds.toFixed(2)} s = ${Math.round(docs / seconds)} docs/s; per request p50 ${percentile(times, 50).toFixed(0)} ms, max ${times.at(-1)!.toFixed(0)} ms`,
  );
}

try {
  await call('POST', '/v1/namespaces', JSON.stringify({ namespace_name: 'bench' }));
  await call('POST', '/v1/buckets', JSON.stringify({ bucket_name: 'unused' }));
  const collection = await call(
    'POST',
    '/v1/collections/create',
    JSON.stringify({ collection_name: 'vectors', source: { type: 'bucket', bucket_id: 'unused' }, feature_extractors: [{ feature_extractor_name: 'text_extractor' }] }),
  );
  const bodies = Array.from({ length: requests }, (_, r) => bodyOf(r));
  const engine = kernel.services.get(VectorIndex).engine;
  console.log(`bring your own vectors: ${requests} × ${size} documents × ${dims}-d, ${(bodies[0]!.length / 1e6).toFixed(1)} MB per request, ${process.env.DATABASE_URL ? 'PostgreSQL' : 'PGlite'}, ${engine}`);
  await pass('create', bodies);
  await pass('replace', bodies);
  const stored = await kernel.services.get(VectorIndex).count(featureIndexName(collection.collection_id as string, 'text_embedding'));
  console.log(`vectors stored: ${stored}; documents: ${(await call('GET', '/v1/collections/vectors')).document_count}`);
} finally {
  await kernel.stop();
  await rm(home, { recursive: true, force: true });
}
