/**
 * The 256-d image descriptor, computed from a 64×64 sRGB working picture (see ./index.ts for decoding).
 * Four blocks, each L2-normalised and then weighted, so no block dominates because of its size:
 *
 *   [0, 112)   HSV colour histogram: 16 hues × 3 saturations × 2 values for chromatic pixels (96), plus
 *              16 grey levels for achromatic ones (16). Hue and grey level are soft-binned (linear
 *              interpolation between neighbouring bins) and chromatic/achromatic is a soft split, so
 *              the small colour shifts of JPEG re-encoding do not flip pixels between bins. Bin masses
 *              are square-rooted (Hellinger), so a large flat background does not drown the rest.
 *   [112, 160) colour layout: mean opponent colour (lightness, red–green, yellow–blue) of a 4×4 grid.
 *   [160, 224) luminance layout: 8×8 grid of mean luma minus the picture's mean (structure, not brightness).
 *   [224, 256) texture: Sobel edge orientations (8 bins over 0..π, soft, magnitude-weighted) in each
 *              quadrant, scaled by edge strength so a flat picture has little texture signal.
 *
 * The whole vector is L2-normalised; compare with cosine (= dot product).
 */
import { luma, normaliseBlock, type Pixels } from './pixels.js';

export const IMAGE_DESCRIPTOR_DIMS = 256;
export const WORKING_SIZE = 64;

const HUES = 16;
const SATS = 3;
const VALS = 2;
const GREYS = 16;
const WEIGHTS = { colour: 1, colourLayout: 0.7, lumaLayout: 0.7, texture: 0.6 } as const;

function clamp01(x: number): number {
  return x < 0 ? 0 : x > 1 ? 1 : x;
}

function colourHistogram(px: Pixels): Float64Array {
  const hist = new Float64Array(HUES * SATS * VALS + GREYS);
  const n = px.width * px.height;
  for (let i = 0, j = 0; i < n; i++, j += 3) {
    const r = px.rgb[j]! / 255;
    const g = px.rgb[j + 1]! / 255;
    const b = px.rgb[j + 2]! / 255;
    const max = Math.max(r, g, b);
    const min = Math.min(r, g, b);
    const v = max;
    const s = max === 0 ? 0 : (max - min) / max;
    // Below ~10–20% saturation or value, hue is noise: share such pixels out to the grey bins.
    const chroma = clamp01((s - 0.1) / 0.1) * clamp01((v - 0.1) / 0.1);

    if (chroma > 0) {
      let h: number; // 0..6
      const d = max - min;
      if (max === r) h = ((g - b) / d + 6) % 6;
      else if (max === g) h = (b - r) / d + 2;
      else h = (r - g) / d + 4;
      const hPos = (h / 6) * HUES - 0.5; // bin centres at 0.5, 1.5, ...
      const h0 = Math.floor(hPos);
      const frac = hPos - h0;
      const hA = (h0 + HUES) % HUES;
      const hB = (h0 + 1) % HUES;
      const si = Math.min(SATS - 1, s < 0.4 ? 0 : s < 0.7 ? 1 : 2);
      const vi = v < 0.6 ? 0 : 1;
      const offset = si * VALS + vi;
      hist[hA * SATS * VALS + offset]! += chroma * (1 - frac);
      hist[hB * SATS * VALS + offset]! += chroma * frac;
    }
    if (chroma < 1) {
      const gPos = clamp01(v) * (GREYS - 1);
      const g0 = Math.min(GREYS - 2, Math.floor(gPos));
      const frac = gPos - g0;
      const base = HUES * SATS * VALS;
      hist[base + g0]! += (1 - chroma) * (1 - frac);
      hist[base + g0 + 1]! += (1 - chroma) * frac;
    }
  }
  for (let k = 0; k < hist.length; k++) hist[k] = Math.sqrt(hist[k]! / n);
  return normaliseBlock(hist, WEIGHTS.colour);
}

/** Mean of each channel of `values` (pixel-major, `channels` per pixel) over a grid×grid layout. */
function gridMeans(px: Pixels, grid: number, channels: number, values: Float64Array): Float64Array {
  const out = new Float64Array(grid * grid * channels);
  const counts = new Float64Array(grid * grid);
  for (let y = 0; y < px.height; y++) {
    const rowCell = Math.min(grid - 1, Math.floor((y * grid) / px.height)) * grid;
    for (let x = 0; x < px.width; x++) {
      const cell = rowCell + Math.min(grid - 1, Math.floor((x * grid) / px.width));
      const p = (y * px.width + x) * channels;
      for (let c = 0; c < channels; c++) out[cell * channels + c]! += values[p + c]!;
      counts[cell]!++;
    }
  }
  for (let cell = 0; cell < grid * grid; cell++) {
    for (let c = 0; c < channels; c++) out[cell * channels + c]! /= counts[cell]! || 1;
  }
  return out;
}

function colourLayout(px: Pixels): Float64Array {
  // Opponent colour centred on mid-grey, so white and black point in opposite directions and hue
  // differences show up as signed values (a cosine of all-positive means would call everything similar).
  const n = px.width * px.height;
  const opponent = new Float64Array(n * 3);
  for (let i = 0; i < n * 3; i += 3) {
    const r = px.rgb[i]! / 255;
    const g = px.rgb[i + 1]! / 255;
    const b = px.rgb[i + 2]! / 255;
    opponent[i] = (r + g + b) / 3 - 0.5;
    opponent[i + 1] = (r - g) / 2;
    opponent[i + 2] = (r + g) / 4 - b / 2;
  }
  return normaliseBlock(gridMeans(px, 4, 3, opponent), WEIGHTS.colourLayout);
}

function lumaLayout(px: Pixels, y: Float64Array): Float64Array {
  const block = gridMeans(px, 8, 1, y);
  let mean = 0;
  for (const v of block) mean += v;
  mean /= block.length;
  for (let i = 0; i < block.length; i++) block[i] = (block[i]! - mean) / 255;
  return normaliseBlock(block, WEIGHTS.lumaLayout);
}

function texture(px: Pixels, y: Float64Array): Float64Array {
  const BINS = 8;
  const block = new Float64Array(4 * BINS);
  const w = px.width;
  const h = px.height;
  let total = 0;
  for (let r = 1; r < h - 1; r++) {
    for (let c = 1; c < w - 1; c++) {
      const p = r * w + c;
      const gx = y[p - w + 1]! + 2 * y[p + 1]! + y[p + w + 1]! - y[p - w - 1]! - 2 * y[p - 1]! - y[p + w - 1]!;
      const gy = y[p + w - 1]! + 2 * y[p + w]! + y[p + w + 1]! - y[p - w - 1]! - 2 * y[p - w]! - y[p - w + 1]!;
      const mag = Math.sqrt(gx * gx + gy * gy); // not Math.hypot: several times slower in V8
      if (mag === 0) continue;
      total += mag;
      let theta = Math.atan2(gy, gx);
      if (theta < 0) theta += Math.PI; // edge orientation, not direction: 0..π
      const pos = (theta / Math.PI) * BINS - 0.5;
      const b0 = Math.floor(pos);
      const frac = pos - b0;
      const quadrant = (r < h / 2 ? 0 : 2) + (c < w / 2 ? 0 : 1);
      block[quadrant * BINS + ((b0 + BINS) % BINS)]! += mag * (1 - frac);
      block[quadrant * BINS + ((b0 + 1) % BINS)]! += mag * frac;
    }
  }
  // Mean Sobel magnitude of ~60 (luma units) is a busy picture; a flat one gets a proportionally weaker block.
  const strength = Math.min(1, total / ((w - 2) * (h - 2)) / 60);
  return normaliseBlock(block, WEIGHTS.texture * Math.sqrt(strength));
}

/** The 256-d L2-normalised descriptor of a working picture (any size, 64×64 expected). */
export function imageDescriptor(px: Pixels): number[] {
  const y = luma(px);
  const blocks = [colourHistogram(px), colourLayout(px), lumaLayout(px, y), texture(px, y)];
  const out: number[] = [];
  for (const block of blocks) for (const v of block) out.push(v);
  let sum = 0;
  for (const v of out) sum += v * v;
  // The colour histogram is never empty, so the norm is never 0.
  const inv = 1 / Math.sqrt(sum);
  return out.map((v) => v * inv);
}
