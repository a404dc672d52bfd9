/**
 * Puts an image into the shape the OCR pipeline reads best: EXIF orientation applied, transparency laid on
 * white (the pipeline ignores alpha, so transparent black-on-nothing would read as black on black), and at
 * most MAX_SIDE pixels on the longer side (detection runs at full input size and its cost grows with the
 * area; recognition crops lines from the same picture, so shrinking further loses small text).
 */
import type { Sharp, SharpOptions } from 'sharp';
import type { RgbImage } from './pipeline.js';

export const MAX_SIDE = 2048;

export type SharpFactory = (input: Uint8Array, options?: SharpOptions) => Sharp;

export interface PreparedImage {
  /** The prepared picture's RGB pixels. */
  rgb: RgbImage;
  /** Size of the source image after orientation (what boxes are reported in). */
  width: number;
  height: number;
  /** Source pixels per prepared pixel (≥ 1). */
  scale: number;
}

export async function prepareImage(sharp: SharpFactory, bytes: Uint8Array): Promise<PreparedImage> {
  const { data, info } = await sharp(bytes, { autoOrient: true })
    .flatten({ background: '#ffffff' })
    .resize({ width: MAX_SIDE, height: MAX_SIDE, fit: 'inside', withoutEnlargement: true })
    .removeAlpha()
    .toColourspace('srgb')
    .raw()
    .toBuffer({ resolveWithObject: true });
  const meta = await sharp(bytes, { autoOrient: true }).metadata();
  const width = meta.autoOrient?.width ?? meta.width ?? info.width;
  const height = meta.autoOrient?.height ?? meta.height ?? info.height;
  if (info.channels !== 3) throw new Error(`expected 3 channels after preparation, got ${info.channels}`);
  return { rgb: { data, width: info.width, height: info.height }, width, height, scale: Math.max(width / info.width, height / info.height, 1) };
}
