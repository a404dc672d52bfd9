/**
 * `npx tsx scripts/bench/memory.ts`: resident memory of the whole service after every built-in model has
 * loaded and run. Starts the server in this process on its embedded defaults (PGlite, local vectors and
 * blobs, spawned inference workers as `tessera serve` sizes them; TESSERA_INFERENCE_WORKERS overrides),
 * calls every built-in model through the gRPC workers until each worker has loaded each model (OCR on a
 * 256×256 JPEG and a 1600×1200 page, so detection's buffers are sized for real pages), then reads
 * GET /v1/health and prints the memory of each component (this API process, each inference worker) and
 * the total beside the 1.2 GB target. Runs with MALLOC_ARENA_MAX=2, as `npm start` (and the Dockerfile and
 * Procfile) launch the service: re-executes itself with it when unset.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { pino } from 'pino';
import sharp from 'sharp';
import { startKernel } from '../../kernel/app.js';
import { loadConfig } from '../../kernel/config.js';
import { Inference } from '../../kernel/tokens.js';
import builtins from '../../plugins/index.js';

if (process.env.MALLOC_ARENA_MAX === undefined) {
  const { spawnSync } = await import('node:child_process');
  const run = spawnSync(process.execPath, [...process.execArgv, ...process.argv.slice(1)], { stdio: 'inherit', env: { ...process.env, MALLOC_ARENA_MAX: '2' } });
  process.exit(run.status ?? 1);
}

const TARGET_BYTES = 1.2e9;
const home = await mkdtemp(path.join(os.tmpdir(), 'tessera-bench-memory-'));
const pluginsModule = fileURLToPath(new URL('../../plugins/index.ts', import.meta.url));
const kernel = await startKernel({
  config: { ...loadConfig(), home, port: 0, host: '127.0.0.1', logLevel: 'silent', batchHealthIntervalMs: 0 },
  plugins: builtins.map((plugin) => ({ plugin, origin: 'builtin' })),
  inferencePlugins: [pluginsModule],
  // As `tessera serve` runs: the task thread is part of the API process's memory.
  taskThreadPlugins: [pluginsModule],
  overrides: { logger: pino({ level: 'silent' }) },
});
const inference = kernel.services.get(Inference);

interface WorkerFigures {
  address: string;
  pid: number | null;
  rss_bytes: number | null;
  heap_used_bytes: number | null;
  loaded_models: string[];
  model_threads: number | null;
}
interface Health {
  components: Record<string, { details?: { rss_bytes?: number; heap_used_bytes?: number; external_bytes?: number; workers?: WorkerFigures[] } }>;
  memory: { total_rss_bytes: number; by_component: Record<string, number> };
}
async function health(): Promise<Health> {
  return (await (await fetch(`${kernel.url}/v1/health`)).json()) as Health;
}

function page(width: number, height: number, lines: string[], fontSize: number): Promise<Buffer> {
  const text = lines
    .map((line, i) => `<text x="24" y="${fontSize * 1.5 * (i + 1)}" font-family="DejaVu Sans" font-size="${fontSize}">${line}</text>`)
    .join('');
  const svg = `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}"><rect width="100%" height="100%" fill="#fff"/>${text}</svg>`;
  return sharp(Buffer.from(svg)).jpeg({ quality: 85 }).toBuffer();
}

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
  console.log(`built-in models: ${models.map((m) => m.name).join(', ')}`);
  console.log(`${'component'.padEnd(34)} ${'rss'.padStart(8)}  loaded models`);
  const api = h.components.api?.details;
  console.log(`${`api (pid ${process.pid})`.padEnd(34)} ${mb(api?.rss_bytes).padStart(8)}  (JS heap ${mb(api?.heap_used_bytes)}, external ${mb(api?.external_bytes)})`);
  for (const w of h.components.inference?.details?.workers ?? []) {
    console.log(`${`inference ${w.address} (pid ${w.pid}, ${w.model_threads} threads)`.padEnd(34)} ${mb(w.rss_bytes).padStart(8)}  (JS heap ${mb(w.heap_used_bytes)}) ${w.loaded_models.join(', ')}`);
  }
  const total = h.memory.total_rss_bytes;
  console.log(`${'total'.padEnd(34)} ${mb(total).padStart(8)}  target ≤ ${mb(TARGET_BYTES)}: ${total <= TARGET_BYTES ? 'met' : 'NOT met'}`);
} finally {
  await kernel.stop();
  await rm(home, { recursive: true, force: true });
}
