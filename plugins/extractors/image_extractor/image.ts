/**
 * The image work image_extractor does itself, all through sharp (libvips decodes and resizes on libuv's
 * thread pool, not on the event loop): reading the header, the thumbnail (which also proves the whole
 * image decodes), and the copy sent to the inference workers.
 */
import type { Sharp, SharpOptions } from 'sharp';
import { InputError } from '../../../kernel/errors.js';
import { readJpegHeader, stripJpegMetadata } from './jpeg.js';

type SharpFactory = (input: Uint8Array, options?: SharpOptions) => Sharp;

/** Longest side sent to the models; larger images are scaled down first (the OCR model works at 2048 at most). */
export const WORKING_MAX_SIDE = 2048;
/** Images above this many bytes are re-encoded smaller before they travel to a worker, whatever their size. */
const WORKING_MAX_BYTES = 8 * 1024 * 1024;

let sharpModule: Promise<SharpFactory> | undefined;

/** sharp is imported on first use, so listing the extractor in the API process never loads libvips. */
function loadSharp(): Promise<SharpFactory> {
  sharpModule ??= import('sharp').then(
    (mod) => mod.default as SharpFactory,
    (err: unknown) => {
      sharpModule = undefined;
      throw err;
    },
  );
  return sharpModule;
}

export interface ImageHeader {
  /** Size after EXIF orientation, as the picture is seen. */
  width: number;
  height: number;
  /** sharp's name of the encoding: jpeg, png, webp, gif, tiff, avif, heif, svg, ... */
  format: string;
  hasAlpha: boolean;
  /** EXIF orientation (1–8), when the file has one. */
  orientation: number | undefined;
  /** libvips' name of the colour space: srgb, b-w, cmyk, ... */
  space: string | undefined;
  hasProfile: boolean;
}

/** A JPEG up to this size that needs no resize is kept as its own thumbnail (jpeg.ts). */
const OWN_THUMBNAIL_MAX_BYTES = 96 * 1024;

function unreadable(err: unknown): InputError {
  return new InputError(`image_extractor: the image cannot be decoded: ${(err as Error).message}`);
}

export async function readHeader(bytes: Buffer): Promise<ImageHeader> {
  // Most pictures are JPEGs: their header is read in JavaScript (jpeg.ts), sharp reads anything else or unusual.
  const jpeg = readJpegHeader(bytes);
  if (jpeg) return { ...jpeg, format: 'jpeg', hasAlpha: false };
  const sharp = await loadSharp();
  try {
    const meta = await sharp(bytes, { autoOrient: true }).metadata();
    const width = meta.autoOrient?.width ?? meta.width;
    const height = meta.autoOrient?.height ?? meta.height;
    if (!meta.format || !width || !height) throw new Error('no image size or format');
    return {
      width,
      height,
      format: meta.format,
      hasAlpha: meta.hasAlpha,
      orientation: meta.orientation,
      space: meta.space,
      hasProfile: meta.hasProfile === true,
    };
  } catch (err) {
    throw unreadable(err);
  }
}

/**
 * The image as its own thumbnail, without its metadata (jpeg.ts), when that is what makeThumbnail would
 * make anyway: a modest sRGB or grey JPEG, upright, no larger than `maxSide`, without an ICC profile.
 */
export function ownThumbnail(bytes: Buffer, header: ImageHeader, maxSide: number): { jpeg: Buffer; width: number; height: number } | undefined {
  const fits =
    header.format === 'jpeg' &&
    bytes.length <= OWN_THUMBNAIL_MAX_BYTES &&
    Math.max(header.width, header.height) <= maxSide &&
    (header.orientation === undefined || header.orientation === 1) &&
    (header.space === 'srgb' || header.space === 'b-w') &&
    !header.hasAlpha &&
    !header.hasProfile;
  const jpeg = fits ? stripJpegMetadata(bytes) : undefined;
  return jpeg && { jpeg, width: header.width, height: header.height };
}

/** A JPEG of at most `maxSide` pixels on the longer side (never enlarged), transparency laid on white. */
export async function makeThumbnail(bytes: Buffer, maxSide: number): Promise<{ jpeg: Buffer; width: number; height: number }> {
  const sharp = await loadSharp();
  try {
    const { data, info } = await sharp(bytes, { autoOrient: true })
      .resize({ width: maxSide, height: maxSide, fit: 'inside', withoutEnlargement: true })
      .flatten({ background: '#ffffff' })
      .jpeg({ quality: 82 })
      .toBuffer({ resolveWithObject: true });
    return { jpeg: data, width: info.width, height: info.height };
  } catch (err) {
    throw unreadable(err);
  }
}

/**
 * What the models get: the original bytes when they are of modest size, else an oriented copy scaled to
 * WORKING_MAX_SIDE (PNG when the image has transparency, to keep it; high-quality JPEG otherwise).
 */
export async function workingCopy(bytes: Buffer, header: ImageHeader): Promise<Buffer> {
  if (Math.max(header.width, header.height) <= WORKING_MAX_SIDE && bytes.length <= WORKING_MAX_BYTES) return bytes;
  const sharp = await loadSharp();
  try {
    const image = sharp(bytes, { autoOrient: true }).resize({
      width: WORKING_MAX_SIDE,
      height: WORKING_MAX_SIDE,
      fit: 'inside',
      withoutEnlargement: true,
    });
    return await (header.hasAlpha ? image.png() : image.jpeg({ quality: 92 })).toBuffer();
  } catch (err) {
    throw unreadable(err);
  }
}
