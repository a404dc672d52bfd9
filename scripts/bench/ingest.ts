/**
 * `tsx scripts/bench/ingest.ts [texts] [images] [ocr-images]` (defaults 10000, 1000 and 0): objects per second end to end —
 * objects created through the API (`POST /objects/bulk`), one batch submitted, every document and vector written — for short
 * texts (text_extractor), 256×256 JPEGs (image_extractor, OCR off) and 256×256 JPEGs with two short lines of
 * text (image_extractor with OCR), beside, in the same run: the bare model calls on
 * the same inputs (in process, and through the gRPC inference workers), a bare bulk insert of the same
 * documents and vectors straight into the stores (the floor for writes), and the p99 latency of
 * `GET /v1/me` while idle and while the batch runs (does batch work leave the API responsive?), timed by a
 * client in a worker thread (scripts/bench/http-load.ts), as the batch's status is polled from another and the
 * objects are created from a third: the service's event loop is not the clients'. Beside that p99: the HTTP thread's event loop delay, and each
 * thread's CPU and wait for a core during the batch (scripts/bench/thread-cpu.ts), which tell the API's own
 * stalls from a full machine's. The texts run twice: first on a service just started, then (new texts, new
 * bucket and collection) on the same service warm, its batch path compiled by V8: a running service's steady state.
 *
 * The server runs in this process on its embedded defaults (PGlite in its thread, tasks in theirs, pgvector,
 * local blobs, spawned inference workers), or on PostgreSQL/NATS when DATABASE_URL/NATS_URL are set.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { monitorEventLoopDelay, type IntervalHistogram } from 'node:perf_hooks';
import { pino } from 'pino';
import sharp from 'sharp';
import { startKernel } from '../../kernel/app.js';
import { loadConfig } from '../../kernel/config.js';
import { startThreadProfile } from '../../kernel/thread-profile.js';
import { DatabaseHandle, Inference, VectorIndex } from '../../kernel/tokens.js';
import { featureIndexName } from '../../kernel/vectors/naming.js';
import builtins from '../../plugins/index.js';
import { Documents } from '../../plugins/resources/collections/index.js';
import { createHashedNgramTextModel } from '../../plugins/models/hashed-ngram-text/index.js';
import imageDescriptor from '../../plugins/models/image-descriptor/index.js';
import { createPaddleOcrModel } from '../../plugins/models/paddle-ocr/index.js';
import { HttpLoad } from './http-load.js';
import { threadCpuLines, threadTicks } from './thread-cpu.js';

const textCount = Number(process.argv[2] ?? 10_000);
const imageCount = Number(process.argv[3] ?? 1_000);
const ocrImageCount = Number(process.argv[4] ?? 0);
const home = await mkdtemp(path.join(os.tmpdir(), 'tessera-bench-ingest-'));
const adminKey = `svc_sk_bench_${'i'.repeat(47)}`;
const pluginsModule = fileURLToPath(new URL('../../plugins/index.ts', import.meta.url));
const kernel = await startKernel({
  config: { ...loadConfig(), home, port: 0, host: '127.0.0.1', adminKey, logLevel: 'silent', batchHealthIntervalMs: 0 },
  plugins: builtins.map((plugin) => ({ plugin, origin: 'builtin' })),
  inferencePlugins: [pluginsModule],
  // As `tessera serve` runs: tasks in their own thread (TESSERA_TASK_THREAD=false runs them on the HTTP thread).
  taskThreadPlugins: [pluginsModule],
  overrides: { logger: pino({ level: 'silent' }) },
});
const inference = kernel.services.get(Inference);
const meClient = new HttpLoad(kernel.url, { Authorization: `Bearer ${adminKey}`, 'X-Namespace': 'bench' });
const batchClient = new HttpLoad(kernel.url, { Authorization: `Bearer ${adminKey}`, 'X-Namespace': 'bench' });
const createClient = new HttpLoad(kernel.url, { Authorization: `Bearer ${adminKey}`, 'X-Namespace': 'bench' });
const db = kernel.services.get(DatabaseHandle).db;

async function call(method: string, route: string, body?: unknown): Promise<Record<string, any>> {
  const res = await fetch(`${kernel.url}${route}`, {
    method,
    headers: { Authorization: `Bearer ${adminKey}`, 'X-Namespace': 'bench', 'Content-Type': 'application/json' },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
  const json = (await res.json()) as Record<string, any>;
  if (!res.ok) throw new Error(`${method} ${route}: ${res.status} ${JSON.stringify(json)}`);
  return json;
}

const WORDS = 'river stone lamp harbor bread glacier orbit violin ember cedar meadow canyon signal quartz tide lantern'.split(' ');
function shortText(i: number): string {
  const pick = (k: number) => WORDS[(i * 7 + k * 13) % WORDS.length];
  return `Note ${i}: the ${pick(1)} near the ${pick(2)} glows like ${pick(3)} at dusk.`;
}

async function jpeg(i: number): Promise<Buffer> {
  const r = (i * 37) % 256;
  const g = (i * 91) % 256;
  const b = (i * 53) % 256;
  const svg = `<svg xmlns="http://www.w3.org/2000/svg" width="256" height="256">
    <rect width="256" height="256" fill="rgb(${r},${g},${b})"/>
    <circle cx="${64 + (i % 128)}" cy="128" r="${20 + (i % 60)}" fill="rgb(${b},${r},${g})"/>
    <rect x="20" y="${(i * 5) % 200}" width="200" height="24" fill="rgb(${g},${b},${r})"/></svg>`;
  return sharp(Buffer.from(svg)).jpeg({ quality: 85 }).toBuffer();
}

/** A 256×256 JPEG with two short lines of dark text on a light ground (what an image collection with OCR sees). */
async function textJpeg(i: number): Promise<Buffer> {
  const word = (k: number) => WORDS[(i * 5 + k * 11) % WORDS.length]!;
  const svg = `<svg xmlns="http://www.w3.org/2000/svg" width="256" height="256">
    <rect width="256" height="256" fill="rgb(${245 - (i % 20)},${245 - (i % 13)},235)"/>
    <text x="16" y="60" font-family="DejaVu Sans" font-size="30" fill="#111">${word(0)} ${word(1)}</text>
    <text x="16" y="108" font-family="DejaVu Sans" font-size="30" fill="#111">${word(2)}</text></svg>`;
  return sharp(Buffer.from(svg)).jpeg({ quality: 88 }).toBuffer();
}

async function ingest(
  bucket: string,
  collection: Record<string, unknown>,
  count: number,
  bulkSize: number,
  blobOf: (i: number) => Promise<Record<string, unknown>>,
): Promise<{
  createSeconds: number; batchSeconds: number; requestSeconds: number; batch: Record<string, any>; meDuring: number[]; loopDelay: IntervalHistogram; cpuSeconds: number; rssAfter: number;
  byThread: string[];
}> {
  await call('POST', '/v1/buckets', { bucket_name: bucket });
  await call('POST', '/v1/collections/create', { ...collection, source: { type: 'bucket', bucket_id: bucket } });
  // POST /objects/bulk, up to 1000 objects a request (capped by the JSON body limit for large blobs), 2 in
  // flight, from the client's worker thread: the requests are made before timing, and neither making them
  // nor reading the answers is charged to the service's event loop.
  const perRequest = bulkSize;
  const bodies = [];
  for (let first = 0; first < count; first += perRequest) {
    const objects = [];
    for (let i = first; i < Math.min(count, first + perRequest); i++) objects.push({ key: `o/${i}`, blobs: [await blobOf(i)] });
    bodies.push({ objects });
  }
  const createProfile = process.env.BENCH_PROFILE ? await startProfile() : undefined;
  const created = await createClient.posts(`/v1/buckets/${bucket}/objects/bulk`, bodies, 2, ['object_id']);
  const ids = created.found.flat() as string[];
  if (ids.length !== count) throw new Error(`created ${ids.length} objects, expected ${count}`);
  const createSeconds = created.seconds;
  if (createProfile) await createProfile(`${process.env.BENCH_PROFILE}-${bucket}-create.cpuprofile`);
  const profile = process.env.BENCH_PROFILE ? await startProfile() : undefined;
  const batchStart = performance.now();
  const cpuStart = process.cpuUsage();
  const threadsStart = threadTicks();
  const sampler = await sampleMe();
  // How long the HTTP thread's event loop is held up (its own work, or waiting for a core): beside the
  // /v1/me latency, it tells the API's own stalls from the client's.
  const loopDelay = monitorEventLoopDelay({ resolution: 1 });
  loopDelay.enable();
  // A request lists at most 10,000 object ids; a larger batch takes the whole bucket, which holds just the objects created above.
  const batch = await call('POST', `/v1/buckets/${bucket}/batches`, count > 10_000 ? { prefix: '' } : { object_ids: ids });
  await call('POST', `/v1/buckets/${bucket}/batches/${batch.batch_id}/submit`);
  const requestSeconds = (performance.now() - batchStart) / 1000;
  // Polled from the batch client's worker thread, like the /v1/me sampler: the service's event loop only serves.
  const done: Record<string, any> = await batchClient.pollUntil(
    `/v1/buckets/${bucket}/batches/${batch.batch_id as string}`, ['COMPLETED', 'COMPLETED_WITH_ERRORS', 'FAILED', 'CANCELED'], 100,
  );
  const batchSeconds = (performance.now() - batchStart) / 1000;
  const meDuring = await sampler.stop();
  loopDelay.disable();
  const cpu = process.cpuUsage(cpuStart);
  const cpuSeconds = (cpu.user + cpu.system) / 1e6;
  const rssAfter = process.memoryUsage().rss;
  const byThread = threadCpuLines(threadsStart, 1, 50);
  if (profile) await profile(`${process.env.BENCH_PROFILE}-${bucket}.cpuprofile`);
  if (done.status !== 'COMPLETED') throw new Error(`batch ended ${done.status}: ${JSON.stringify(done.tier_tasks?.[0]?.errors?.slice(0, 2))}`);
  return { createSeconds, batchSeconds, requestSeconds, batch: done, meDuring, loopDelay, cpuSeconds, rssAfter, byThread };
}

/** `GET /v1/me` one call at a time, every ~10 ms, until stopped: the API's latency as a client sees it. */
async function sampleMe(): Promise<{ stop: () => Promise<number[]> }> {
  await meClient.startSampling('/v1/me', 10);
  return { stop: () => meClient.stopSampling() };
}

async function idleMe(count: number): Promise<number[]> {
  const sampler = await sampleMe();
  await new Promise((r) => setTimeout(r, count * 11));
  return sampler.stop();
}

function p99(samples: readonly number[]): number {
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * 0.99))] ?? 0;
}

/**
 * The floor for writes: the same documents and vectors written straight into the document store and the
 * vector index (no API, no batch, no extraction), 500 a statement, into a collection of the same shape.
 */
async function bareInsert(
  name: string,
  extractor: Record<string, unknown>,
  feature: string,
  count: number,
  fieldsOf: (i: number) => Record<string, unknown>,
  vectorOf: (i: number) => number[],
): Promise<number> {
  await call('POST', '/v1/buckets', { bucket_name: name });
  const created = await call('POST', '/v1/collections/create', { collection_name: name, feature_extractors: [extractor], source: { type: 'bucket', bucket_id: name } });
  const collection = (await db('collections').where({ collection_id: created.collection_id }).first()) as { collection_id: string; organization_id: string; namespace_id: string };
  const documents = kernel.services.get(Documents);
  const vectors = kernel.services.get(VectorIndex);
  const index = featureIndexName(collection.collection_id, feature);
  const t0 = performance.now();
  await vectors.ensureIndex({ name: index, dims: vectorOf(0).length, distance: 'cosine' });
  for (let first = 0; first < count; first += 500) {
    const writes = [];
    for (let i = first; i < Math.min(count, first + 500); i++) {
      writes.push({
        organizationId: collection.organization_id,
        namespaceId: collection.namespace_id,
        collectionId: collection.collection_id,
        sourceKey: `floor/${i}`,
        rootObjectId: null,
        sourceCollectionId: null,
        sourceDocumentId: null,
        processingTier: 0,
        fields: fieldsOf(i),
      });
    }
    const rows = await documents.upsertMany(writes);
    await vectors.upsert(index, rows.map((row, k) => ({ id: row.document_id, vector: vectorOf(first + k), payload: { fields: row.fields } })));
  }
  return count / ((performance.now() - t0) / 1000);
}

/**
 * BENCH_PROFILE=<path prefix>: CPU profiles of this process's HTTP thread while the objects are created
 * (`<prefix>-<bucket>-create.cpuprofile`) and during each batch (`<prefix>-<bucket>.cpuprofile`).
 */
async function startProfile(): Promise<(file: string) => Promise<void>> {
  const profile = await startThreadProfile();
  return async (file) => {
    await writeFile(file, JSON.stringify((await profile.stop()).cpu));
    console.log(`  CPU profile: ${file}`);
  };
}

interface Bare {
  inProcess: number;
  workers: number;
  insert: number;
  meIdle: number[];
}

function report(label: string, count: number, r: Awaited<ReturnType<typeof ingest>>, bare: Bare): void {
  const { inProcess: bareInProcess, workers: bareWorkers } = bare;
  const tier = r.batch.tier_tasks[0];
  const total = r.createSeconds + r.batchSeconds;
  const extract = tier.performance.bottlenecks.find((b: { stage_name: string }) => b.stage_name.startsWith('extract:'));
  const stages = tier.performance.bottlenecks
    .map((b: { stage_name: string; total_time_ms: number }) => `${b.stage_name} ${(b.total_time_ms / 1000).toFixed(1)} s`)
    .join(', ');
  headline(label, count, r);
  console.log(`  stage time summed over records (overlapping): ${stages}`);
  console.log(
    `  inference share of the batch: extract stage ${(extract.total_time_ms / 1000).toFixed(1)} s summed over concurrent records; ` +
      `bare model time for the same inputs ${(count / bareInProcess).toFixed(1)} s in one process = ${((count / bareInProcess / r.batchSeconds) * 100).toFixed(0)}% of the batch's wall time`,
  );
  console.log(`  side by side (per second):`);
  console.log(`    bare model, in process:                ${bareInProcess.toFixed(0)} inputs/s`);
  console.log(`    bare model, through the gRPC workers:  ${bareWorkers.toFixed(0)} inputs/s`);
  console.log(`    bare bulk insert (documents + vectors): ${bare.insert.toFixed(0)} documents/s`);
  console.log(`    end to end:                            ${(tier.documents_written / total).toFixed(0)} documents/s  (batch alone ${(tier.documents_written / r.batchSeconds).toFixed(0)}/s)`);
  console.log(`  CPU of this process (API, runner, database) during the batch: ${((r.cpuSeconds / Math.max(1, tier.documents_written)) * 1000).toFixed(2)} s per 1,000 documents`);
  if (r.byThread.length > 0) console.log(`  CPU during the batch by thread (Linux /proc; main is the HTTP thread):\n${r.byThread.join('\n')}`);
  console.log(`  resident memory of this process right after the batch: ${(r.rssAfter / 1e6).toFixed(0)} MB`);
  console.log(
    `  GET /v1/me p99: idle ${p99(bare.meIdle).toFixed(1)} ms (${bare.meIdle.length} calls), during the batch ${p99(r.meDuring).toFixed(1)} ms ` +
      `(${r.meDuring.length} calls; max ${Math.max(...r.meDuring).toFixed(1)} ms)`,
  );
  const ms = (ns: number) => (ns / 1e6).toFixed(1);
  console.log(
    `  HTTP thread's event loop delay during the batch (1 ms timer): p50 ${ms(r.loopDelay.percentile(50))} ms, p99 ${ms(r.loopDelay.percentile(99))} ms, ` +
      `max ${ms(r.loopDelay.max)} ms`,
  );
}

/** The run's name and its rates: end to end, creating the objects, the batch. */
function headline(label: string, count: number, r: Awaited<ReturnType<typeof ingest>>): void {
  const total = r.createSeconds + r.batchSeconds;
  console.log(`\n${label}: ${count} objects, ${r.batch.tier_tasks[0].documents_written} documents`);
  console.log(`  end to end (create objects + batch):  ${(count / total).toFixed(0)} objects/s  (${total.toFixed(1)} s)`);
  console.log(`    creating objects (POST /objects/bulk): ${(count / r.createSeconds).toFixed(0)} objects/s  (${r.createSeconds.toFixed(1)} s)`);
  console.log(`    batch, submit → COMPLETED:         ${(count / r.batchSeconds).toFixed(0)} objects/s  (${r.batchSeconds.toFixed(1)} s)`);
  console.log(`      of which the create and submit requests: ${(r.requestSeconds * 1000).toFixed(0)} ms`);
}

/** The headline figures of a repeated run, with its CPU and the API's latency. */
function reportBrief(label: string, count: number, r: Awaited<ReturnType<typeof ingest>>, meIdle: readonly number[]): void {
  headline(label, count, r);
  const written = r.batch.tier_tasks[0].documents_written as number;
  console.log(`  CPU of this process during the batch: ${((r.cpuSeconds / Math.max(1, written)) * 1000).toFixed(2)} s per 1,000 documents`);
  if (r.byThread.length > 0) console.log(`  CPU during the batch by thread:\n${r.byThread.join('\n')}`);
  console.log(`  GET /v1/me p99: idle ${p99(meIdle).toFixed(1)} ms, during the batch ${p99(r.meDuring).toFixed(1)} ms (max ${Math.max(...r.meDuring).toFixed(1)} ms)`);
}

/**
 * 256×256 JPEGs through image_extractor (OCR on or off): the floor (a bare insert of such documents with
 * `vectorOf` as their image_embedding), then the batch, reported beside the bare model's rates.
 */
async function pictures(
  bucket: string,
  collectionName: string,
  label: string,
  images: readonly Buffer[],
  enableOcr: boolean,
  vectorOf: (i: number) => number[],
  bare: { inProcess: number; workers: number },
): Promise<void> {
  const extractor = { feature_extractor_name: 'image_extractor', parameters: { enable_ocr: enableOcr } };
  const insert = await bareInsert(`${collectionName}-floor`, extractor, 'image_embedding', images.length, (i) => ({
    width: 256, height: 256, format: 'jpeg', size_bytes: images[i]!.length, dominant_colours: ['#000000'],
    ...(enableOcr ? { ocr_text: 'river stone\nlamp' } : {}),
    thumbnail: { storage_key: `floor/${i}`, content_type: 'image/jpeg', size_bytes: 1 },
  }), vectorOf);
  const meIdle = await idleMe(200);
  const collection = { collection_name: collectionName, feature_extractors: [extractor] };
  const result = await ingest(bucket, collection, images.length, 100, async (i) => ({ property: 'content', base64: images[i]!.toString('base64') }));
  report(label, images.length, result, { ...bare, insert, meIdle });
}

try {
  await call('POST', '/v1/namespaces', { namespace_name: 'bench' });
  // The API compiles each operation's request validator on its first call: one tiny batch through the same
  // operations first, so the latency measured during the batches is the batch's doing, not a first call's.
  await ingest('warmup', { collection_name: 'warmup', feature_extractors: [{ feature_extractor_name: 'text_extractor' }] }, 2, 2, async (i) => ({
    property: 'content',
    text: shortText(i),
  }));

  if (textCount > 0) {
    const texts = Array.from({ length: textCount }, (_, i) => shortText(i));
    const model = createHashedNgramTextModel();
    await model.load();
    let t0 = performance.now();
    const textVectors: number[][] = [];
    for (let i = 0; i < texts.length; i += 64) textVectors.push(...((await model.infer(texts.slice(i, i + 64))) as ArrayLike<number>[]).map((v) => Array.from(v)));
    const bareInProcess = texts.length / ((performance.now() - t0) / 1000);
    t0 = performance.now();
    await inference.embedText('hashed-ngram-text', texts.slice(0, 64)); // connect
    t0 = performance.now();
    await inference.embedText('hashed-ngram-text', texts);
    const bareWorkers = texts.length / ((performance.now() - t0) / 1000);
    const insert = await bareInsert('texts-floor', { feature_extractor_name: 'text_extractor' }, 'text_embedding', textCount, (i) => ({
      text: texts[i], chunk_index: 0, chunk_count: 1, char_start: 0, char_end: texts[i]!.length, word_count: texts[i]!.split(' ').length, truncated: false,
    }), (i) => textVectors[i]!);
    const meIdle = await idleMe(200);
    const result = await ingest('texts', { collection_name: 'text-chunks', feature_extractors: [{ feature_extractor_name: 'text_extractor' }] }, textCount, 1000, async (i) => ({
      property: 'content',
      text: texts[i],
    }));
    report('Short texts (text_extractor, 384-d hashed n-gram embedding)', textCount, result, { inProcess: bareInProcess, workers: bareWorkers, insert, meIdle });
    // A running service has compiled its batch path long before (V8 optimizes hot code as it runs: about a
    // core-second of compilation during the first 10,000 texts): the same work once more, new texts into a
    // new bucket and collection, is the steady state.
    const again = await ingest('texts-again', { collection_name: 'text-chunks-again', feature_extractors: [{ feature_extractor_name: 'text_extractor' }] }, textCount, 1000, async (i) => ({
      property: 'content',
      text: shortText(textCount + i),
    }));
    reportBrief('The same again, the service warm (new texts, new bucket and collection)', textCount, again, meIdle);
  }

  if (imageCount > 0) {
    const images = await Promise.all(Array.from({ length: imageCount }, (_, i) => jpeg(i)));
    const model = imageDescriptor;
    await model.load();
    let t0 = performance.now();
    const imageVectors: number[][] = [];
    for (let i = 0; i < images.length; i += 16) {
      const described = await (model.infer as (inputs: Buffer[]) => Promise<Array<{ vector: ArrayLike<number> }>>)(images.slice(i, i + 16));
      imageVectors.push(...described.map((d) => Array.from(d.vector)));
    }
    const bareInProcess = images.length / ((performance.now() - t0) / 1000);
    await inference.embedImage('image-descriptor', images.slice(0, 4));
    t0 = performance.now();
    await inference.embedImage('image-descriptor', images);
    const bareWorkers = images.length / ((performance.now() - t0) / 1000);
    await pictures('images', 'pictures', '256×256 JPEGs (image_extractor: descriptor + thumbnail; OCR off)', images, false, (i) => imageVectors[i]!, { inProcess: bareInProcess, workers: bareWorkers });
  }

  if (ocrImageCount > 0) {
    const images = await Promise.all(Array.from({ length: ocrImageCount }, (_, i) => textJpeg(i)));
    // The bare model here is OCR alone (the extractor's descriptor and thumbnail come on top of it).
    const model = createPaddleOcrModel();
    await model.load();
    let t0 = performance.now();
    await model.infer(images);
    const bareInProcess = images.length / ((performance.now() - t0) / 1000);
    await inference.ocr('paddle-ocr', images.slice(0, 2));
    t0 = performance.now();
    await Promise.all(images.map((image) => inference.ocr('paddle-ocr', [image])));
    const bareWorkers = images.length / ((performance.now() - t0) / 1000);
    await pictures('ocr-images', 'pictures-with-text', '256×256 JPEGs with two lines of text (image_extractor with OCR: paddle-ocr, descriptor, thumbnail)', images, true, () => Array.from({ length: 256 }, (_, k) => Math.sin(k)), {
      inProcess: bareInProcess,
      workers: bareWorkers,
    });
  }
} finally {
  await meClient.close();
  await batchClient.close();
  await createClient.close();
  await kernel.stop();
  await rm(home, { recursive: true, force: true });
}
