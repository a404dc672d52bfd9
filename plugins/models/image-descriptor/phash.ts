/**
 * DCT perceptual hash (the pHash recipe): 32×32 greyscale, 2-D DCT-II, the 8×8 lowest frequencies
 * without the DC row and column, one bit per coefficient (above or below their median). Resizing,
 * re-encoding and mild colour changes barely move the low frequencies, so the hash survives them; a
 * different picture flips about half the bits.
 * Known weakness (of pHash itself): a perfectly symmetric or periodic synthetic picture has many
 * near-zero coefficients whose signs are noise, so even a resized copy of it can flip many bits.
 */
import { luma, type Pixels } from './pixels.js';

const N = 32;
const K = 9; // frequencies 0..8; 0 (DC) is dropped below

// cos((2x+1)uπ / 2N), read-only after module load.
const COS: Float64Array = (() => {
  const t = new Float64Array(K * N);
  for (let u = 0; u < K; u++) for (let x = 0; x < N; x++) t[u * N + x] = Math.cos(((2 * x + 1) * u * Math.PI) / (2 * N));
  return t;
})();

/** 32×32 greyscale by box-averaging the working picture (whose sides must be multiples of 32). */
function grey32(px: Pixels): Float64Array {
  const y = luma(px);
  const fx = px.width / N;
  const fy = px.height / N;
  if (!Number.isInteger(fx) || !Number.isInteger(fy)) throw new RangeError('phash needs sides that are multiples of 32');
  const out = new Float64Array(N * N);
  for (let r = 0; r < px.height; r++) {
    for (let c = 0; c < px.width; c++) out[Math.floor(r / fy) * N + Math.floor(c / fx)]! += y[r * px.width + c]!;
  }
  const inv = 1 / (fx * fy);
  for (let i = 0; i < out.length; i++) out[i]! *= inv;
  return out;
}

/** 64-bit hash as 16 lowercase hex digits. */
export function perceptualHash(px: Pixels): string {
  const g = grey32(px);
  // Separable DCT restricted to the K lowest frequencies: rows first (N×K), then columns (K×K).
  const rows = new Float64Array(N * K);
  for (let y = 0; y < N; y++) {
    for (let u = 0; u < K; u++) {
      let s = 0;
      for (let x = 0; x < N; x++) s += g[y * N + x]! * COS[u * N + x]!;
      rows[y * K + u] = s;
    }
  }
  const coeffs: number[] = [];
  for (let v = 1; v < K; v++) {
    for (let u = 1; u < K; u++) {
      let s = 0;
      for (let y = 0; y < N; y++) s += rows[y * K + u]! * COS[v * N + y]!;
      coeffs.push(s);
    }
  }
  const sorted = [...coeffs].sort((a, b) => a - b);
  const median = (sorted[31]! + sorted[32]!) / 2;
  let hex = '';
  for (let i = 0; i < 64; i += 4) {
    let nibble = 0;
    for (let b = 0; b < 4; b++) nibble = (nibble << 1) | (coeffs[i + b]! > median ? 1 : 0);
    hex += nibble.toString(16);
  }
  return hex;
}

/** Number of differing bits between two hashes of equal length (0 = same picture, ~32 = unrelated). */
export function hammingDistance(a: string, b: string): number {
  if (a.length !== b.length) throw new RangeError('hashes differ in length');
  let d = 0;
  for (let i = 0; i < a.length; i++) {
    let x = parseInt(a[i]!, 16) ^ parseInt(b[i]!, 16);
    while (x) {
      d += x & 1;
      x >>= 1;
    }
  }
  return d;
}
