/**
 * `image-descriptor`: a weight-free visual descriptor through sharp (libvips).
 * Input: the bytes of one image (PNG, JPEG, WebP, GIF, TIFF, AVIF, SVG... whatever sharp decodes) as a
 * Uint8Array or Buffer. Output per image: `{ vector, width, height, dominant_colors, phash }` where
 * `vector` is a 256-d L2-normalised `number[]` (colour histogram, colour and luminance layout, edge
 * orientations; see ./descriptor.ts), `width`/`height` are the image's size after EXIF orientation,
 * `dominant_colors` are up to five '#rrggbb' colours, most frequent first, and `phash` is a 64-bit DCT
 * perceptual hash as 16 hex digits (compare with `hammingDistance`).
 *
 * Similar pictures (resized, re-encoded) land close; it knows colours, layout and texture, not objects.
 * An image sharp cannot decode rejects the whole call with an InputError naming its index.
 */
import type { Sharp, SharpOptions } from 'sharp';
import { InputError } from '../../../kernel/errors.js';
import { defineModel, type ModelPlugin } from '../../../kernel/plugins.js';
import { dominantColours } from './colours.js';
import { IMAGE_DESCRIPTOR_DIMS, WORKING_SIZE, imageDescriptor } from './descriptor.js';
import { perceptualHash } from './phash.js';
import type { Pixels } from './pixels.js';

export { IMAGE_DESCRIPTOR_DIMS, imageDescriptor } from './descriptor.js';
export { hammingDistance, perceptualHash } from './phash.js';
export { dominantColours } from './colours.js';
export type { Pixels } from './pixels.js';

export interface ImageDescription {
  vector: number[];
  width: number;
  height: number;
  dominant_colors: string[];
  phash: string;
}

type SharpFactory = (input: Uint8Array, options?: SharpOptions) => Sharp;

/** Images decoded at once per call: sharp works on libuv's thread pool, more in flight only queues memory. */
const IN_FLIGHT = 4;

/** Decodes, orients, flattens transparency onto white and squeezes to the working size. */
async function describe(sharp: SharpFactory, bytes: Uint8Array): Promise<ImageDescription> {
  const image = sharp(bytes, { autoOrient: true });
  const meta = await image.metadata();
  const { data, info } = await image
    .flatten({ background: '#ffffff' })
    .toColourspace('srgb')
    // 'fill' ignores the aspect ratio: every picture maps onto the same grid, so a resized copy (same
    // aspect) lines up cell for cell with its original.
    .resize(WORKING_SIZE, WORKING_SIZE, { fit: 'fill' })
    .raw()
    .toBuffer({ resolveWithObject: true });
  const pixels: Pixels = { width: info.width, height: info.height, rgb: toRgb(data, info.channels) };
  return {
    vector: imageDescriptor(pixels),
    width: meta.autoOrient?.width ?? meta.width,
    height: meta.autoOrient?.height ?? meta.height,
    dominant_colors: dominantColours(pixels),
    phash: perceptualHash(pixels),
  };
}

function toRgb(data: Uint8Array, channels: number): Uint8Array {
  if (channels === 3) return data;
  const n = data.length / channels;
  const out = new Uint8Array(n * 3);
  for (let i = 0; i < n; i++) {
    // 1–2 channels: grey (+alpha, already flattened); 4: RGB + a leftover alpha.
    const r = data[i * channels]!;
    out[i * 3] = r;
    out[i * 3 + 1] = channels >= 3 ? data[i * channels + 1]! : r;
    out[i * 3 + 2] = channels >= 3 ? data[i * channels + 2]! : r;
  }
  return out;
}

/** A fresh model instance; sharp is imported on first load() (inference workers only), once per instance. */
export function createImageDescriptorModel(): ModelPlugin<Uint8Array, ImageDescription> {
  let loading: Promise<SharpFactory> | undefined;
  const load = (): Promise<SharpFactory> => {
    // Dynamic import: the API process lists this plugin but never pays for libvips; a failed import
    // is not cached, so a later load() can try again.
    loading ??= import('sharp').then(
      (mod) => mod.default as SharpFactory,
      (err: unknown) => {
        loading = undefined;
        throw err;
      },
    );
    return loading;
  };

  return defineModel<Uint8Array, ImageDescription>({
    name: 'image-descriptor',
    task: 'embed_image',
    dims: IMAGE_DESCRIPTOR_DIMS,
    load: async () => {
      await load();
    },
    infer: async (inputs) => {
      if (inputs.length === 0) return [];
      const sharp = await load();
      const out = new Array<ImageDescription>(inputs.length);
      let next = 0;
      let failed = false; // one bad image fails the call: stop the other lanes instead of finishing the batch
      const worker = async (): Promise<void> => {
        while (next < inputs.length && !failed) {
          const i = next++;
          const bytes = inputs[i];
          if (!(bytes instanceof Uint8Array)) {
            failed = true;
            throw new TypeError(`image-descriptor: input ${i} is not a Uint8Array`);
          }
          try {
            out[i] = await describe(sharp, bytes);
          } catch (err) {
            failed = true;
            // An InputError travels to the caller as one (INVALID_ARGUMENT): the image is at fault, not the worker.
            throw new InputError(`image-descriptor: input ${i} could not be decoded: ${(err as Error).message}`);
          }
        }
      };
      await Promise.all(Array.from({ length: Math.min(IN_FLIGHT, inputs.length) }, worker));
      return out;
    },
  });
}

export default createImageDescriptorModel();
