/**
 * image-descriptor: the contract, then retrieval behaviour on pictures the test draws itself with sharp:
 * a re-encoded, resized copy must find its original, the perceptual hash must survive it, and colours
 * must read as they look.
 */
import sharp, { type Sharp } from 'sharp';
import { beforeAll, describe, expect, it } from 'vitest';
import model, {
  IMAGE_DESCRIPTOR_DIMS,
  createImageDescriptorModel,
  hammingDistance,
  type ImageDescription,
} from '../../../plugins/models/image-descriptor/index.js';
import { runModelContract } from '../../support/model-contract.js';

const SIZE = 256;

/** A sharp pipeline over an RGB picture drawn by `paint(x, y)`. */
function draw(paint: (x: number, y: number) => readonly [number, number, number], width = SIZE, height = SIZE): Sharp {
  const raw = Buffer.alloc(width * height * 3);
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      const [r, g, b] = paint(x, y);
      raw.set([r, g, b], (y * width + x) * 3);
    }
  }
  return sharp(raw, { raw: { width, height, channels: 3 } });
}

/** A tiny deterministic PRNG (LCG), so the noise picture is the same on every run. */
function lcg(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s, 1103515245) + 12345) >>> 0;
    return s / 2 ** 32;
  };
}

// Off-centre shapes on purpose: the DCT hash of a perfectly symmetric picture has many near-zero
// coefficients whose signs are noise (see phash.ts), which is not what these tests are about.
const redSquare = (x: number, y: number) => (x > 30 && x < 130 && y > 50 && y < 170 ? ([220, 20, 30] as const) : ([255, 255, 255] as const));
const CIRCLES = [[60, 70, 30], [170, 90, 45], [120, 190, 25], [210, 200, 35]] as const;
const blueCircles = (x: number, y: number) =>
  CIRCLES.some(([cx, cy, r]) => (x - cx) ** 2 + (y - cy) ** 2 < r * r) ? ([20, 40, 220] as const) : ([240, 240, 250] as const);
const gradient = (x: number, y: number) => [x, y, 128] as const;

const images: Record<string, Uint8Array> = {};

beforeAll(async () => {
  const random = lcg(12345);
  images.red = await draw(redSquare).png().toBuffer();
  images.blue = await draw(blueCircles).png().toBuffer();
  images.noise = await draw(() => [(random() * 256) | 0, (random() * 256) | 0, (random() * 256) | 0]).png().toBuffer();
  images.gradient = await draw(gradient).png().toBuffer();
  images.solidRed = await draw(() => [200, 16, 24]).jpeg().toBuffer();
  // Resized and re-encoded copies.
  images.redSmallJpeg = await sharp(images.red).resize(100, 100).jpeg({ quality: 70 }).toBuffer();
  images.blueWebp = await sharp(images.blue).resize(180, 180).webp({ quality: 60 }).toBuffer();
  images.noiseJpeg = await sharp(images.noise).resize(128, 128).jpeg({ quality: 80 }).toBuffer();
  images.gradientBig = await sharp(images.gradient).resize(512, 512).jpeg({ quality: 85 }).toBuffer();
});

// The contract needs its inputs when its suite is declared, so they are made at import (top-level
// await): a PNG with transparency, a greyscale PNG, a JPEG, a GIF and a 1×1 picture.
const contractInputs: Uint8Array[] = await Promise.all([
  draw(redSquare, 64, 48).ensureAlpha(0.5).png().toBuffer(),
  draw((x) => [x * 4, x * 4, x * 4], 64, 64).greyscale().png().toBuffer(),
  draw(blueCircles).jpeg({ quality: 90 }).toBuffer(),
  draw(gradient, 40, 80).gif().toBuffer(),
  draw(() => [255, 255, 255], 1, 1).png().toBuffer(),
]);

runModelContract(model, {
  sampleInputs: contractInputs,
  expectDims: IMAGE_DESCRIPTOR_DIMS,
  create: createImageDescriptorModel,
});

const cos = (a: readonly number[], b: readonly number[]): number => a.reduce((s, x, i) => s + x * b[i]!, 0);

describe('image-descriptor', () => {
  let out: Record<string, ImageDescription>;

  beforeAll(async () => {
    const names = Object.keys(images);
    const results = await model.infer(names.map((n) => images[n]!));
    out = Object.fromEntries(names.map((n, i) => [n, results[i]!]));
  });

  it('a resized, re-encoded copy is nearest to its original', () => {
    const originals = ['red', 'blue', 'noise', 'gradient'];
    const copies: Record<string, string> = { redSmallJpeg: 'red', blueWebp: 'blue', noiseJpeg: 'noise', gradientBig: 'gradient' };
    for (const [copy, original] of Object.entries(copies)) {
      const ranked = [...originals].sort((a, b) => cos(out[copy]!.vector, out[b]!.vector) - cos(out[copy]!.vector, out[a]!.vector));
      expect(ranked[0], `${copy} should be nearest to ${original}`).toBe(original);
      expect(cos(out[copy]!.vector, out[original]!.vector)).toBeGreaterThan(0.9);
    }
  });

  it('the perceptual hash barely moves for a resized copy and differs a lot between pictures', () => {
    expect(out.red!.phash).toMatch(/^[0-9a-f]{16}$/);
    expect(hammingDistance(out.red!.phash, out.redSmallJpeg!.phash)).toBeLessThanOrEqual(8);
    expect(hammingDistance(out.blue!.phash, out.blueWebp!.phash)).toBeLessThanOrEqual(8);
    expect(hammingDistance(out.noise!.phash, out.noiseJpeg!.phash)).toBeLessThanOrEqual(8);
    const distinct = ['red', 'blue', 'noise', 'gradient'];
    for (const a of distinct) {
      for (const b of distinct) if (a < b) expect(hammingDistance(out[a]!.phash, out[b]!.phash), `${a} vs ${b}`).toBeGreaterThanOrEqual(20);
    }
  });

  it('reports dominant colours as they look', () => {
    const [first] = out.solidRed!.dominant_colors;
    expect(first).toMatch(/^#[0-9a-f]{6}$/);
    const [r, g, b] = [1, 3, 5].map((i) => parseInt(first!.slice(i, i + 2), 16));
    expect(r).toBeGreaterThan(160);
    expect(g).toBeLessThan(70);
    expect(b).toBeLessThan(70);
    expect(out.solidRed!.dominant_colors).toHaveLength(1);
    // The red square on white: white first (more area), then red.
    expect(out.red!.dominant_colors.slice(0, 2)).toEqual(['#ffffff', expect.stringMatching(/^#d[0-9a-f]1[0-9a-f]1[0-9a-f]$/)]);
    expect(out.blue!.dominant_colors[1]).toMatch(/^#1[0-9a-f]{3}d[0-9a-f]$/);
  });

  it('reports the original size, after EXIF orientation', async () => {
    expect([out.red!.width, out.red!.height]).toEqual([SIZE, SIZE]);
    expect([out.redSmallJpeg!.width, out.redSmallJpeg!.height]).toEqual([100, 100]);
    const rotated = await draw(redSquare, 120, 80).jpeg().withMetadata({ orientation: 6 }).toBuffer();
    const [desc] = await model.infer([rotated]);
    expect([desc!.width, desc!.height]).toEqual([80, 120]);
  });

  it('different pictures are further apart than copies', () => {
    expect(cos(out.red!.vector, out.blue!.vector)).toBeLessThan(cos(out.red!.vector, out.redSmallJpeg!.vector) - 0.3);
    expect(cos(out.noise!.vector, out.gradient!.vector)).toBeLessThan(0.5);
  });

  it('takes plain Uint8Arrays (what structured cloning turns a Buffer into), views at an offset included', async () => {
    const plain = new Uint8Array(images.blue!);
    const padded = new Uint8Array(plain.length + 7);
    padded.set(plain, 7);
    const [a, b] = await model.infer([plain, padded.subarray(7)]);
    expect(a).toEqual(out.blue);
    expect(b).toEqual(out.blue);
  });

  it('rejects bytes that are not an image, naming the input', async () => {
    await expect(model.infer([images.red!, new Uint8Array([1, 2, 3, 4])])).rejects.toThrow(/input 1 could not be decoded/);
    await expect(model.infer(['nope' as unknown as Uint8Array])).rejects.toThrow(/input 0 is not a Uint8Array/);
  });
});
