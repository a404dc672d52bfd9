/**
 * Image models: encoded images → one float tensor. Each image is decoded with sharp (EXIF orientation
 * applied, transparency flattened onto white), resized to the model's size (`cover`: scale the short side
 * and centre-crop, as CLIP-style processors do; `fill`: stretch), scaled to 0..1, then (x − mean) / std
 * per channel, in the model's channel order and layout.
 */
import type { Sharp, SharpOptions } from 'sharp';
import { InputError } from '../../../kernel/errors.js';
import type { ImageModelSpec } from './manifest.js';
import { finishVector, poolRows } from './pooling.js';
import { openSession, runForOutput, type ModelSession } from './session.js';

type SharpFactory = (input: Uint8Array, options?: SharpOptions) => Sharp;

/** Images decoded at once: sharp works on libuv's pool, more in flight only holds more memory. */
const IN_FLIGHT = 4;

/** One image as `height × width × 3` normalised floats, written into `out` at `offset` in the spec's layout. */
async function writePixels(sharp: SharpFactory, bytes: Uint8Array, spec: ImageModelSpec, out: Float32Array, offset: number): Promise<void> {
  const { data, info } = await sharp(bytes, { autoOrient: true })
    .flatten({ background: '#ffffff' })
    .toColourspace('srgb')
    .resize(spec.width, spec.height, { fit: spec.resize, position: 'centre' })
    .raw()
    .toBuffer({ resolveWithObject: true });
  const plane = spec.width * spec.height;
  const channels = info.channels;
  const order = spec.channelOrder === 'bgr' ? [2, 1, 0] : [0, 1, 2];
  for (let p = 0; p < plane; p++) {
    for (let c = 0; c < 3; c++) {
      const source = order[c]!;
      // 1–2 channels: grey (+ alpha); 3–4: RGB (+ alpha).
      const value = data[p * channels + (channels >= 3 ? source : 0)]! / 255;
      const normalised = (value - spec.mean[source]!) / spec.std[source]!;
      out[offset + (spec.layout === 'nchw' ? c * plane + p : p * 3 + c)] = normalised;
    }
  }
}

export interface ImageRunner {
  load(): Promise<void>;
  embed(images: readonly unknown[]): Promise<number[][]>;
}

export function createImageRunner(spec: ImageModelSpec): ImageRunner {
  let model: ModelSession | undefined;
  let sharp: SharpFactory | undefined;

  return {
    async load() {
      const [mod, session] = await Promise.all([import('sharp'), openSession(spec.modelFile, { inputs: [spec.input], output: spec.output })]);
      sharp = mod.default as SharpFactory;
      model = session;
    },

    async embed(images) {
      if (!model || !sharp) throw new Error('not loaded');
      const each = spec.height * spec.width * 3;
      const pixels = new Float32Array(images.length * each);
      let next = 0;
      let failed = false; // one bad image fails the call: the other lanes stop instead of decoding the rest
      const lane = async (): Promise<void> => {
        while (next < images.length && !failed) {
          const i = next++;
          const bytes = images[i];
          if (!(bytes instanceof Uint8Array)) {
            failed = true;
            throw new InputError(`onnx model ${spec.name}: input ${i} is not image bytes`);
          }
          try {
            await writePixels(sharp!, bytes, spec, pixels, i * each);
          } catch (error) {
            failed = true;
            throw new InputError(`onnx model ${spec.name}: image ${i} could not be decoded: ${(error as Error).message}`);
          }
        }
      };
      await Promise.all(Array.from({ length: Math.min(IN_FLIGHT, images.length) }, lane));
      const dims = spec.layout === 'nchw' ? [images.length, 3, spec.height, spec.width] : [images.length, spec.height, spec.width, 3];
      const output = await runForOutput(model, { [spec.input]: new model.ort.Tensor('float32', pixels, dims) }, spec.output);
      return poolRows(output, spec.pooling, null).map((v) => finishVector(v, spec.normalize, spec.name));
    },
  };
}
