/**
 * `node --expose-gc --import tsx scripts/bench/text-search.ts [documents] [queries]`: the BM25 text index on the embedded default
 * (PGlite in a temporary TESSERA_HOME), or on PostgreSQL when DATABASE_URL is set.
 * - writes `documents` (100,000) short generated texts (8–24 words from a Zipf-distributed 5,000-word
 *   vocabulary) as documents of one collection, then indexes them: documents/s for each half;
 * - runs `queries` queries per kind at 1 client, in process (TextIndex.search): one to three words,
 *   a two-word phrase, a prefix, and words with a user-scoped principal filter; p50 / p95 in ms;
 * - how long a fresh process's first search takes (it loads the collection's postings into memory).
 */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { openKernelCore } from '../../kernel/app.js';
import { loadConfig } from '../../kernel/config.js';
import { seededRandom } from '../../kernel/random.js';
import { DatabaseHandle, TextIndex } from '../../kernel/tokens.js';
import { SqlTextIndex, type TextSearchRequest } from '../../kernel/text/index.js';
import { DocumentStore, type DocumentWrite } from '../../plugins/resources/collections/document-store.js';
import builtins from '../../plugins/index.js';

const DOCUMENTS = Number(process.argv[2] ?? 100_000);
const QUERIES = Number(process.argv[3] ?? 200);
const BATCH = 1_000;
const VOCABULARY = 5_000;
const COLLECTION = 'col_bench_text';

// Deterministic, so every run searches the same corpus.
const rand = seededRandom(42);
const syllables = ['ka', 'lo', 'mi', 'ne', 'ru', 'sa', 'ti', 'vo', 'ze', 'pa', 'qui', 'dor', 'fen', 'gal', 'hum', 'jor'];
const words = Array.from({ length: VOCABULARY }, (_, i) => {
  let w = '';
  let n = i + 1;
  while (n > 0) {
    w += syllables[n % syllables.length];
    n = Math.floor(n / syllables.length);
  }
  return w;
});
// Zipf (s = 1): word i is drawn with weight 1 / (i + 1).
const cumulative: number[] = [];
let total = 0;
for (let i = 0; i < VOCABULARY; i++) cumulative.push((total += 1 / (i + 1)));
function word(): string {
  const x = rand() * total;
  let lo = 0;
  let hi = VOCABULARY - 1;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (cumulative[mid]! < x) lo = mid + 1;
    else hi = mid;
  }
  return words[lo]!;
}
function sentence(): string {
  const n = 8 + Math.floor(rand() * 17);
  return Array.from({ length: n }, word).join(' ');
}

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

const home = await mkdtemp(path.join(os.tmpdir(), 'tessera-bench-text-'));
const core = await openKernelCore({
  config: { ...loadConfig(), home, logLevel: 'silent' },
  plugins: builtins.map((plugin) => ({ plugin, origin: 'builtin' })),
});
try {
  const db = core.services.get(DatabaseHandle).db;
  const kind = core.services.get(DatabaseHandle).kind;
  const index = core.services.get(TextIndex);
  const now = new Date();
  await db('collections').insert({
    collection_id: COLLECTION, organization_id: 'org_bench', namespace_id: 'ns_bench', collection_name: 'bench', description: null,
    source: JSON.stringify({ type: 'bucket', bucket_id: 'b' }), feature_extractors: '[]', taxonomy_applications: '[]', enabled: true,
    metadata: '{}', document_handling: '{}', cache_config: '{}', source_lineage: '[]', output_schema: '{"properties":{}}',
    status: 'ready', created_at: now, updated_at: now,
  });

  // Documents first (without the index), then the index over them: the two halves of a write, timed apart.
  const plain = new DocumentStore(db);
  const written: Array<{ document_id: string; fields: Record<string, string> }> = [];
  let started = performance.now();
  for (let start = 0; start < DOCUMENTS; start += BATCH) {
    const writes: DocumentWrite[] = [];
    for (let i = start; i < Math.min(DOCUMENTS, start + BATCH); i++) {
      writes.push({
        organizationId: 'org_bench', namespaceId: 'ns_bench', collectionId: COLLECTION, sourceKey: `k${i}`, rootObjectId: null,
        sourceCollectionId: null, sourceDocumentId: null, processingTier: 0, fields: { text: sentence() },
        ownerPrincipal: `usr_${i % 10}`, grants: [],
      });
    }
    for (const row of await plain.upsertMany(writes)) written.push({ document_id: row.document_id, fields: { text: row.fields.text as string } });
  }
  const documentSeconds = (performance.now() - started) / 1000;
  started = performance.now();
  for (let start = 0; start < written.length; start += BATCH) await index.index(COLLECTION, written.slice(start, start + BATCH));
  const indexSeconds = (performance.now() - started) / 1000;
  // A process's first search of the collection loads its postings from the database.
  const gc = (globalThis as { gc?: () => void }).gc;
  gc?.();
  const heapBefore = process.memoryUsage().heapUsed;
  started = performance.now();
  const fresh = new SqlTextIndex(db);
  await fresh.search({ collectionIds: [COLLECTION], query: words[0]!, limit: 10 });
  const loadSeconds = (performance.now() - started) / 1000;
  gc?.();
  const copyMegabytes = (process.memoryUsage().heapUsed - heapBefore) / 2 ** 20;
  const [stat] = await index.statistics(COLLECTION);

  const queryKinds: Record<string, () => Partial<TextSearchRequest> & { query: string }> = {
    'words (1-3)': () => ({ query: Array.from({ length: 1 + Math.floor(rand() * 3) }, word).join(' ') }),
    'rare words (2)': () => ({ query: `${words[500 + Math.floor(rand() * 4000)]} ${words[500 + Math.floor(rand() * 4000)]}` }),
    phrase: () => {
      const text = written[Math.floor(rand() * written.length)]!.fields.text!.split(' ');
      const at = Math.floor(rand() * (text.length - 1));
      return { query: `"${text[at]} ${text[at + 1]}"` };
    },
    'prefix*': () => ({ query: `${word().slice(0, 4)}*` }),
    'words, user-scoped': () => ({ query: Array.from({ length: 1 + Math.floor(rand() * 3) }, word).join(' '), principalId: `usr_${Math.floor(rand() * 10)}` }),
  };
  const results: Array<Record<string, string | number>> = [];
  for (const [name, make] of Object.entries(queryKinds)) {
    for (let i = 0; i < 10; i++) await index.search({ collectionIds: [COLLECTION], limit: 10, ...make() });
    const times: number[] = [];
    let hits = 0;
    for (let i = 0; i < QUERIES; i++) {
      const request = { collectionIds: [COLLECTION], limit: 10, ...make() };
      const t0 = performance.now();
      hits += (await index.search(request)).length;
      times.push(performance.now() - t0);
    }
    times.sort((a, b) => a - b);
    results.push({ query: name, p50_ms: +percentile(times, 50).toFixed(2), p95_ms: +percentile(times, 95).toFixed(2), mean_hits: +(hits / QUERIES).toFixed(1) });
  }

  console.log(`text index on ${kind}: ${DOCUMENTS} documents, ${stat?.average_length.toFixed(1)} words on average, ${VOCABULARY}-word Zipf vocabulary`);
  console.log(`documents written: ${documentSeconds.toFixed(1)} s (${Math.round(DOCUMENTS / documentSeconds)} documents/s)`);
  console.log(`text index built:  ${indexSeconds.toFixed(1)} s (${Math.round(DOCUMENTS / indexSeconds)} documents/s)`);
  console.log(
    `first search in a fresh process (loads the postings): ${loadSeconds.toFixed(1)} s` +
      (gc ? `; the in-process copy takes ${copyMegabytes.toFixed(0)} MB of heap` : ' (run node with --expose-gc to see the copy\'s size)'),
  );
  console.table(results);
} finally {
  await core.stop();
  await rm(home, { recursive: true, force: true });
}
