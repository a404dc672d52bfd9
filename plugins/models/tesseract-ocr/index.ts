/**
 * `tesseract-ocr`: text in images with Debian's `tesseract` (package tesseract-ocr), an optional OCR model
 * beside the built-in paddle-ocr. Not among the built-ins: load it with
 * TESSERA_PLUGINS=plugins/models/tesseract-ocr/index.ts and name it in an extractor's OCR model. It needs
 * the `tesseract` program at run time (TESSERA_TESSERACT names another path); load() fails with a message
 * saying how to install it when it is missing. Languages: TESSERA_TESSERACT_LANG (default `eng`).
 *
 * Measured beside paddle-ocr by scripts/bench/ocr.ts: on document pages it costs about a quarter of
 * paddle-ocr's CPU time and keeps the spaces between words; on small pictures it costs about twice as much
 * (one process per picture). Input and output as paddle-ocr: encoded image bytes in; `{ text, boxes }` out,
 * one box per line (words joined by spaces) in source pixels, confidence 0..1.
 */
import { execFile, spawn } from 'node:child_process';
import { promisify } from 'node:util';
import { InputError, ServiceUnavailableError } from '../../../kernel/errors.js';
import type { OcrBox } from '../../../kernel/inference/model-io.js';
import { modelThreads } from '../../../kernel/inference/model-io.js';
import { defineModel, type ModelPlugin } from '../../../kernel/plugins.js';

export interface OcrResult {
  text: string;
  boxes: OcrBox[];
}

type SharpFactory = typeof import('sharp').default;

function program(): string {
  return process.env.TESSERA_TESSERACT || 'tesseract';
}

/** Checks that tesseract runs; the error says what to do when it does not. */
async function checkInstalled(): Promise<void> {
  try {
    await promisify(execFile)(program(), ['--version'], { timeout: 10_000 });
  } catch (err) {
    const missing = (err as NodeJS.ErrnoException).code === 'ENOENT';
    throw new ServiceUnavailableError(
      missing
        ? `tesseract-ocr: the \`${program()}\` program is not installed: install it (Debian: apt-get install -y tesseract-ocr) or set TESSERA_TESSERACT to its path`
        : `tesseract-ocr: \`${program()} --version\` failed: ${(err as Error).message}`,
    );
  }
}

/** Runs tesseract on one PNG and returns its TSV (word rows with boxes and confidences). */
function runTesseract(png: Buffer): Promise<string> {
  return new Promise((resolve, reject) => {
    // One thread per process: the worker's cores are used by running that many processes at once.
    const child = spawn(program(), ['stdin', 'stdout', '-l', process.env.TESSERA_TESSERACT_LANG || 'eng', '--psm', '3', 'tsv'], {
      env: { ...process.env, OMP_THREAD_LIMIT: '1' },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout.on('data', (c: Buffer) => out.push(c));
    child.stderr.on('data', (c: Buffer) => err.push(c));
    child.on('error', reject);
    child.on('close', (code) =>
      code === 0 ? resolve(Buffer.concat(out).toString('utf8')) : reject(new Error(`tesseract exited with ${code}: ${Buffer.concat(err).toString('utf8').trim()}`)),
    );
    child.stdin.on('error', () => undefined);
    child.stdin.end(png);
  });
}

/** Word rows of tesseract's TSV grouped into lines (block, paragraph, line), top to bottom. */
export function linesFromTsv(tsv: string): OcrResult {
  const lines = new Map<string, { words: string[]; conf: number[]; x0: number; y0: number; x1: number; y1: number }>();
  for (const row of tsv.split('\n').slice(1)) {
    const cells = row.split('\t');
    if (cells.length < 12 || cells[0] !== '5') continue;
    const text = cells.slice(11).join('\t').trim();
    if (!text) continue;
    const [left, top, width, height, conf] = cells.slice(6, 11).map(Number) as [number, number, number, number, number];
    const key = `${cells[2]}.${cells[3]}.${cells[4]}`;
    const line = lines.get(key) ?? { words: [], conf: [], x0: left, y0: top, x1: left + width, y1: top + height };
    line.words.push(text);
    line.conf.push(Math.max(0, Math.min(100, conf)) / 100);
    line.x0 = Math.min(line.x0, left);
    line.y0 = Math.min(line.y0, top);
    line.x1 = Math.max(line.x1, left + width);
    line.y1 = Math.max(line.y1, top + height);
    lines.set(key, line);
  }
  const boxes = [...lines.values()]
    .sort((a, b) => a.y0 - b.y0 || a.x0 - b.x0)
    .map((l) => ({
      text: l.words.join(' '),
      confidence: Math.round((l.conf.reduce((s, c) => s + c, 0) / l.conf.length) * 10_000) / 10_000,
      x: l.x0,
      y: l.y0,
      width: l.x1 - l.x0,
      height: l.y1 - l.y0,
    }));
  return { text: boxes.map((b) => b.text).join('\n'), boxes };
}

export function createTesseractOcrModel(): ModelPlugin<Uint8Array, OcrResult> {
  let sharp: SharpFactory | undefined;
  const load = async () => {
    await checkInstalled();
    sharp ??= (await import('sharp')).default;
    return sharp;
  };
  return defineModel<Uint8Array, OcrResult>({
    name: 'tesseract-ocr',
    task: 'ocr',
    load: async () => {
      await load();
    },
    infer: async (inputs) => {
      const decode = await load();
      const out: OcrResult[] = new Array(inputs.length);
      let next = 0;
      await Promise.all(
        Array.from({ length: Math.min(modelThreads(), inputs.length) }, async () => {
          while (next < inputs.length) {
            const i = next++;
            let png: Buffer;
            try {
              // Orientation applied and transparency laid on white, as for paddle-ocr.
              png = await decode(inputs[i]!, { autoOrient: true }).flatten({ background: '#ffffff' }).png({ compressionLevel: 1 }).toBuffer();
            } catch (err) {
              throw new InputError(`tesseract-ocr: image ${i} could not be decoded: ${(err as Error).message}`, { index: i });
            }
            out[i] = linesFromTsv(await runTesseract(png));
          }
        }),
      );
      return out;
    },
  });
}

export default createTesseractOcrModel();
