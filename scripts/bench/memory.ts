/**
 * `npx tsx scripts/bench/memory.ts`: resident memory of the whole service after every built-in model has
 * loaded and run. Starts the service as `npm start` does (`npm run build`, then `node bin/tessera.js serve`
 * with MALLOC_ARENA_MAX=2, on its embedded defaults: PGlite, local vectors and blobs, spawned inference
 * workers as `tessera serve` sizes them; TESSERA_INFERENCE_WORKERS overrides) in a process of its own with a
 * scratch TESSERA_HOME, calls every built-in model through its gRPC workers until each worker has loaded
 * each model (OCR on a 256×256 JPEG and a 1600×1200 page, so detection's buffers are sized for real pages),
 * then reads GET /v1/health and prints the memory of each component (the API process, each inference
 * worker) and the total beside the 1.2 GB target. `--sources` runs the TypeScript sources through tsx instead
 * (`node --import tsx kernel/cli.ts serve`, what `npm start` ran before dist/ was built), for comparison.
 */
import { execFileSync, spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import sharp from 'sharp';
import { InferenceClient } from '../../kernel/inference/client.js';

const TARGET_BYTES = 1.2e9;
const root = fileURLToPath(new URL('../../', import.meta.url));

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

execFileSync(process.execPath, [path.join(root, 'scripts/build.mjs')], { stdio: 'inherit' });
const home = await mkdtemp(path.join(os.tmpdir(), 'tessera-bench-memory-'));
const port = await freePort();
const url = `http://127.0.0.1:${port}`;
const fromSources = process.argv.includes('--sources');
// The first organization's admin key: health shows memory and worker figures to the operator only.
const adminKey = `svc_sk_bench_${'m'.repeat(47)}`;
const command = fromSources ? ['--import', 'tsx', path.join(root, 'kernel/cli.ts'), 'serve'] : [path.join(root, 'bin/tessera.js'), 'serve'];
const service = spawn(process.execPath, command, {
  cwd: root,
  env: { ...process.env, TESSERA_HOME: home, TESSERA_ADMIN_KEY: adminKey, PORT: String(port), HOST: '127.0.0.1', MALLOC_ARENA_MAX: '2', LOG_LEVEL: 'warn', TESSERA_PLUGINS: '' },
  stdio: ['ignore', 'ignore', 'inherit'],
});
const exited = new Promise<never>((_, reject) => service.once('exit', (code) => reject(new Error(`the service exited (code ${code}) before it answered`))));
exited.catch(() => undefined);
for (let waited = 0; ; waited += 250) {
  if (waited > 120_000) throw new Error('the service did not answer GET /v1/health within 2 minutes');
  const up = await Promise.race([fetch(`${url}/v1/health`).then((r) => r.ok, () => false), exited]);
  if (up) break;
  await new Promise((resolve) => setTimeout(resolve, 250));
}

interface WorkerFigures {
  address: string;
  pid: number | null;
  rss_bytes: number | null;
  heap_used_bytes: number | null;
  loaded_models: string[];
  model_threads: number | null;
}
interface Health {
  components: Record<string, { details?: { pid?: number; rss_bytes?: number; heap_used_bytes?: number; external_bytes?: number; workers?: WorkerFigures[] } }>;
  memory: { total_rss_bytes: number; by_component: Record<string, number> };
}
async function health(): Promise<Health> {
  return (await (await fetch(`${url}/v1/health`, { headers: { Authorization: `Bearer ${adminKey}` } })).json()) as Health;
}

function page(width: number, height: number, lines: string[], fontSize: number): Promise<Buffer> {
  const text = lines
    .map((line, i) => `<text x="24" y="${fontSize * 1.5 * (i + 1)}" font-family="DejaVu Sans" font-size="${fontSize}">${line}</text>`)
    .join('');
  const svg = `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}"><rect width="100%" height="100%" fill="#fff"/>${text}</svg>`;
  return sharp(Buffer.from(svg)).jpeg({ quality: 85 }).toBuffer();
}

const addresses = (await health()).components.inference?.details?.workers?.map((w) => w.address) ?? [];
const inference = new InferenceClient({ addresses });
try {
  const small = await page(256, 256, ['HARBOR 12', 'CEDAR LAMP'], 28);
  const large = await page(1600, 1200, Array.from({ length: 20 }, (_, i) => `Line ${i + 1}: the river stone glows like ember at dusk`), 36);
  const samples = new Float32Array(16_000).map((_, i) => Math.sin((2 * Math.PI * 440 * i) / 16_000) * 0.5);
  const models = await inference.listModels();
  const calls: Record<string, () => Promise<unknown>> = {
    embed_text: async () => undefined,
    embed_image: async () => undefined,
    embed_audio: async () => undefined,
    ocr: async () => undefined,
    rerank: async () => undefined,
  };
  const callFor = (name: string, task: string): (() => Promise<unknown>) => {
    switch (task) {
      case 'embed_text': return () => inference.embedText(name, ['the river stone glows like ember at dusk']);
      case 'embed_image': return () => inference.embedImage(name, [small]);
      case 'embed_audio': return () => inference.embedAudio(name, [{ samples, sampleRate: 16_000 }]);
      case 'ocr': return () => inference.ocr(name, [small, large]);
      case 'rerank': return () => inference.rerank(name, 'river stone', ['a stone by the river', 'a violin']);
      default: return calls[task] ?? (async () => undefined);
    }
  };
  // Round-robin spreads calls over the workers: repeat until every worker reports every model loaded.
  for (let round = 0; round < 20; round++) {
    const h = await health();
    const workers = h.components.inference?.details?.workers ?? [];
    const missing = models.filter((m) => workers.some((w) => !w.loaded_models.includes(m.name)));
    if (missing.length === 0 && round > 0) break;
    for (const m of round === 0 ? models : missing) await callFor(m.name, m.task)();
  }
  // Settle: let each process finish what it allocated for the calls.
  await new Promise((resolve) => setTimeout(resolve, 1_000));
  const h = await health();
  const mb = (n: number | null | undefined) => (n === null || n === undefined ? '?' : `${(n / 1e6).toFixed(0)} MB`);
  console.log(`service: ${fromSources ? 'the TypeScript sources through tsx' : 'the dist/ build, as npm start runs it'}`);
  console.log(`built-in models: ${models.map((m) => m.name).join(', ')}`);
  console.log(`${'component'.padEnd(34)} ${'rss'.padStart(8)}  loaded models`);
  const api = h.components.api?.details;
  console.log(`${`api (pid ${api?.pid})`.padEnd(34)} ${mb(api?.rss_bytes).padStart(8)}  (JS heap ${mb(api?.heap_used_bytes)}, external ${mb(api?.external_bytes)})`);
  for (const w of h.components.inference?.details?.workers ?? []) {
    console.log(`${`inference ${w.address} (pid ${w.pid}, ${w.model_threads} threads)`.padEnd(34)} ${mb(w.rss_bytes).padStart(8)}  (JS heap ${mb(w.heap_used_bytes)}) ${w.loaded_models.join(', ')}`);
  }
  const total = h.memory.total_rss_bytes;
  console.log(`${'total'.padEnd(34)} ${mb(total).padStart(8)}  target ≤ ${mb(TARGET_BYTES)}: ${total <= TARGET_BYTES ? 'met' : 'NOT met'}`);
} finally {
  inference.close();
  service.kill('SIGTERM');
  await new Promise((resolve) => service.once('exit', resolve));
  await rm(home, { recursive: true, force: true });
}
