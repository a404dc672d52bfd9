/**
 * `npx tsx scripts/bench/ocr.ts [pictures] [pages]` (defaults 40 and 8): OCR speed and characters right,
 * paddle-ocr (the built-in model, in this process, as an inference worker on this machine runs it) beside
 * the optional tesseract-ocr model (Debian's `tesseract`, one process per picture, as many at once as there
 * are cores) on the same pictures in the same run. Pictures are drawn here with known text (DejaVu Sans through an SVG, as the tests do):
 * `pictures` 256×256 JPEGs with two short lines (what an image collection with OCR on sees), and `pages`
 * 1240×880 JPEGs with twelve lines of sentence text. Character accuracy is 1 − (edit distance / length)
 * of the drawn text, whitespace collapsed, case kept, summed over all pictures; "no spaces" is the same with
 * whitespace removed. CPU/pic is CPU time per picture (this process plus tesseract's processes): on a
 * machine shared with other work, pictures/s moves with the load, CPU time per picture much less.
 *
 * paddle-ocr runs three ways: in this process one picture per call, in this process the whole set in one
 * call, and through the gRPC inference workers `tessera serve` would spawn, one picture per call from many
 * callers at once (the image extractor's path; CPU then includes the workers'). tesseract is skipped (with
 * a note) when missing.
 */
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import os from 'node:os';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import sharp from 'sharp';
import { MODEL_THREADS_ENV } from '../../kernel/inference/model-io.js';

const pictureCount = Number(process.argv[2] ?? 40);
const pageCount = Number(process.argv[3] ?? 8);
const cores = os.availableParallelism();
// The threads one inference worker's models get when the pool runs one worker on this machine.
process.env[MODEL_THREADS_ENV] ??= String(cores);
const { createPaddleOcrModel } = await import('../../plugins/models/paddle-ocr/index.js');
const { createTesseractOcrModel } = await import('../../plugins/models/tesseract-ocr/index.js');
const { startInferenceWorkers } = await import('../../kernel/inference/index.js');
const { pino } = await import('pino');

function lcg(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s, 1103515245) + 12345) >>> 0;
    return s / 2 ** 32;
  };
}
const random = lcg(11);
const WORDS = 'river stone Lamp harbor bread Glacier orbit violin ember cedar Meadow canyon signal quartz tide lantern North 2026 invoice total 48.50 Tessera search'.split(' ');
const pick = () => WORDS[Math.floor(random() * WORDS.length)]!;
const words = (n: number) => Array.from({ length: n }, pick).join(' ');

function escapeXml(text: string): string {
  return text.replace(/[<>&'"]/g, (c) => ({ '<': '&lt;', '>': '&gt;', '&': '&amp;', "'": '&apos;', '"': '&quot;' })[c]!);
}

interface Sample {
  jpeg: Buffer;
  text: string;
}

async function draw(width: number, height: number, lines: string[], fontSize: number): Promise<Sample> {
  const body = lines
    .map((line, i) => `<text x="16" y="${Math.round(fontSize * 1.2 + i * fontSize * 1.6)}" font-family="DejaVu Sans" font-size="${fontSize}" fill="#111">${escapeXml(line)}</text>`)
    .join('');
  const svg = `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}"><rect width="100%" height="100%" fill="#fbfbf6"/>${body}</svg>`;
  return { jpeg: await sharp(Buffer.from(svg)).jpeg({ quality: 88 }).toBuffer(), text: lines.join('\n') };
}

const pictures = await Promise.all(Array.from({ length: pictureCount }, () => draw(256, 256, [words(2), words(1)], 30)));
const pages = await Promise.all(Array.from({ length: pageCount }, () => draw(1240, 880, Array.from({ length: 12 }, () => words(6)), 30)));

function normalise(text: string): string {
  return text.replace(/\s+/gu, ' ').trim();
}

function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) {
      current[j] = Math.min(previous[j]! + 1, current[j - 1]! + 1, previous[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
    }
    previous = current;
  }
  return previous[b.length]!;
}

/** Characters right over the whole set: Σ max(0, len − distance) / Σ len. */
function accuracy(samples: readonly Sample[], read: readonly string[]): number {
  let right = 0;
  let total = 0;
  for (const [i, sample] of samples.entries()) {
    const expected = normalise(sample.text);
    right += Math.max(0, expected.length - editDistance(expected, normalise(read[i] ?? '')));
    total += expected.length;
  }
  return total === 0 ? 1 : right / total;
}

/** Characters right ignoring whitespace (PaddleOCR's Chinese-and-Latin model often drops the spaces between words). */
function accuracyWithoutSpaces(samples: readonly Sample[], read: readonly string[]): number {
  return accuracy(
    samples.map((s) => ({ ...s, text: s.text.replace(/\s+/gu, '') })),
    read.map((t) => t.replace(/\s+/gu, '')),
  );
}

interface Figures {
  perSecond: number;
  /** CPU time per picture (this process and its children): what carries to a quieter or bigger machine. */
  cpuMs: number;
  accuracy: number;
  accuracyNoSpaces: number;
}

/** CPU seconds of this process and of its children that have exited (tesseract runs as children). */
function cpuSeconds(): number {
  const own = process.cpuUsage();
  // /proc/self/stat fields 16 and 17: children's user and system time, in clock ticks (100 per second).
  const fields = readFileSync('/proc/self/stat', 'utf8').split(') ')[1]!.split(' ');
  const children = (Number(fields[13]) + Number(fields[14])) / 100;
  return (own.user + own.system) / 1e6 + children;
}

async function timed(samples: readonly Sample[], read: (samples: readonly Sample[]) => Promise<string[]>): Promise<Figures> {
  const cpuBefore = cpuSeconds();
  const started = performance.now();
  const texts = await read(samples);
  const seconds = (performance.now() - started) / 1000;
  return {
    perSecond: samples.length / seconds,
    cpuMs: ((cpuSeconds() - cpuBefore) * 1000) / samples.length,
    accuracy: accuracy(samples, texts),
    accuracyNoSpaces: accuracyWithoutSpaces(samples, texts),
  };
}

const paddle = createPaddleOcrModel();
await paddle.load();
const paddleBatch = async (samples: readonly Sample[]) => (await paddle.infer(samples.map((s) => s.jpeg))).map((r) => r.text);
const paddleSingle = async (samples: readonly Sample[]) => {
  const out: string[] = [];
  for (const s of samples) out.push((await paddle.infer([s.jpeg]))[0]!.text);
  return out;
};

async function tesseractAvailable(): Promise<string | null> {
  try {
    const { stdout, stderr } = await promisify(execFile)('tesseract', ['--version']);
    return (stdout || stderr).split('\n')[0]!.trim();
  } catch {
    return null;
  }
}

// The optional tesseract-ocr model plugin: one tesseract process per picture, as many at once as the
// worker's share of the cores (TESSERA_MODEL_THREADS, set above).
const tesseractModel = createTesseractOcrModel();
async function tesseractAll(samples: readonly Sample[]): Promise<string[]> {
  return (await tesseractModel.infer(samples.map((s) => s.jpeg))).map((r) => r.text);
}

// The service's path: paddle-ocr in the inference workers `tessera serve` spawns (default count), one
// picture per call from many callers at once, as the image extractor makes them (the client coalesces them).
const runtime = await startInferenceWorkers({
  plugins: [fileURLToPath(new URL('../../plugins/models/paddle-ocr/index.ts', import.meta.url))],
  log: pino({ level: 'silent' }),
  pool: { logLevel: 'silent' },
});
/** CPU seconds the inference worker processes have used so far (/proc/<pid>/stat utime + stime). */
function workerCpuSeconds(): number {
  return (runtime.pool?.workers() ?? []).reduce((sum, w) => {
    if (!w.pid) return sum;
    const fields = readFileSync(`/proc/${w.pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
    return sum + (Number(fields[11]) + Number(fields[12])) / 100;
  }, 0);
}
async function throughWorkers(samples: readonly Sample[]): Promise<string[]> {
  return Promise.all(samples.map(async (s) => (await runtime.client.ocr('paddle-ocr', [s.jpeg]))[0]!.text));
}
async function timedWorkers(samples: readonly Sample[]): Promise<Figures> {
  const before = workerCpuSeconds();
  const figures = await timed(samples, throughWorkers);
  return { ...figures, cpuMs: figures.cpuMs + ((workerCpuSeconds() - before) * 1000) / samples.length };
}
await throughWorkers(pictures.slice(0, 2)); // loads the model in the worker

const tesseract = await tesseractAvailable();
const fmt = (f: Figures | null) =>
  f
    ? `${f.perSecond.toFixed(1).padStart(8)} /s ${f.cpuMs.toFixed(0).padStart(8)} ms ${(f.accuracy * 100).toFixed(1).padStart(8)} % ${(f.accuracyNoSpaces * 100).toFixed(1).padStart(8)} %`
    : '       (not installed)';
console.log(`${cores} cores; paddle-ocr with ${process.env[MODEL_THREADS_ENV]} reader threads; ${tesseract ?? 'tesseract not installed (apt-get install -y tesseract-ocr)'}`);
console.log(`${'set'.padEnd(30)} ${'engine'.padEnd(26)} ${'pictures/s'.padStart(11)} ${'CPU/pic'.padStart(11)} ${'chars right'.padStart(10)} ${'no spaces'.padStart(10)}`);
for (const [name, samples] of [
  [`${pictureCount} × 256×256 JPEG`, pictures],
  [`${pageCount} × 1240×880 page JPEG`, pages],
] as const) {
  if (samples.length === 0) continue;
  await paddleBatch(samples.slice(0, 2)); // warm-up at this size
  const rows: Array<[string, Figures | null]> = [
    ['paddle-ocr, one per call', await timed(samples, paddleSingle)],
    ['paddle-ocr, batched', await timed(samples, paddleBatch)],
    [`paddle-ocr, ${runtime.pool?.workers().length ?? 0} gRPC worker(s)`, await timedWorkers(samples)],
    ['tesseract (1 per core)', tesseract ? await timed(samples, tesseractAll) : null],
  ];
  for (const [engine, figures] of rows) console.log(`${name.padEnd(30)} ${engine.padEnd(26)} ${fmt(figures)}`);
}
await runtime.stop();
