/** The decoded, downscaled picture every part of the descriptor is computed from. */
export interface Pixels {
  width: number;
  height: number;
  /** Interleaved 8-bit sRGB, 3 bytes per pixel, row-major. */
  rgb: Uint8Array;
}

/** Rec. 601 luma, 0..255: what the perceptual hash and the texture features look at. */
export function luma(px: Pixels): Float64Array {
  const n = px.width * px.height;
  const out = new Float64Array(n);
  for (let i = 0, j = 0; i < n; i++, j += 3) {
    out[i] = 0.299 * px.rgb[j]! + 0.587 * px.rgb[j + 1]! + 0.114 * px.rgb[j + 2]!;
  }
  return out;
}

/** Scales a block to unit L2 norm (a zero block stays zero), then by its weight in the whole descriptor. */
export function normaliseBlock(block: Float64Array, weight: number): Float64Array {
  let sum = 0;
  for (const x of block) sum += x * x;
  if (sum === 0) return block;
  const k = weight / Math.sqrt(sum);
  for (let i = 0; i < block.length; i++) block[i]! *= k;
  return block;
}
