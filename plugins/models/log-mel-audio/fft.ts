/**
 * Iterative radix-2 complex FFT (in place), with a helper that takes the power spectra of two real
 * frames with one complex transform (frame A as the real part, frame B as the imaginary part, separated
 * afterwards by conjugate symmetry), which halves the work for real audio.
 */

export interface FftPlan {
  readonly size: number;
  readonly bitReverse: Uint32Array;
  readonly cos: Float64Array;
  readonly sin: Float64Array;
}

export function isPowerOfTwo(n: number): boolean {
  return Number.isInteger(n) && n >= 2 && (n & (n - 1)) === 0;
}

export function nextPowerOfTwo(n: number): number {
  let p = 2;
  while (p < n) p *= 2;
  return p;
}

export function createFftPlan(size: number): FftPlan {
  if (!isPowerOfTwo(size)) throw new RangeError(`FFT size must be a power of two ≥ 2, got ${size}`);
  const bits = Math.log2(size);
  const bitReverse = new Uint32Array(size);
  for (let i = 0; i < size; i++) {
    let r = 0;
    for (let b = 0, x = i; b < bits; b++, x >>= 1) r = (r << 1) | (x & 1);
    bitReverse[i] = r;
  }
  const cos = new Float64Array(size / 2);
  const sin = new Float64Array(size / 2);
  for (let k = 0; k < size / 2; k++) {
    cos[k] = Math.cos((2 * Math.PI * k) / size);
    sin[k] = -Math.sin((2 * Math.PI * k) / size); // forward transform: e^(-2πik/N)
  }
  return { size, bitReverse, cos, sin };
}

/** Forward DFT of (re, im) in place: X[k] = Σ x[n] e^(-2πikn/N). */
export function fft(plan: FftPlan, re: Float64Array, im: Float64Array): void {
  const n = plan.size;
  const rev = plan.bitReverse;
  for (let i = 0; i < n; i++) {
    const j = rev[i]!;
    if (j > i) {
      const tr = re[i]!;
      re[i] = re[j]!;
      re[j] = tr;
      const ti = im[i]!;
      im[i] = im[j]!;
      im[j] = ti;
    }
  }
  for (let len = 2; len <= n; len <<= 1) {
    const half = len >> 1;
    const step = n / len;
    for (let start = 0; start < n; start += len) {
      for (let k = 0; k < half; k++) {
        const wr = plan.cos[k * step]!;
        const wi = plan.sin[k * step]!;
        const a = start + k;
        const b = a + half;
        const xr = re[b]! * wr - im[b]! * wi;
        const xi = re[b]! * wi + im[b]! * wr;
        re[b] = re[a]! - xr;
        im[b] = im[a]! - xi;
        re[a]! += xr;
        im[a]! += xi;
      }
    }
  }
}

/**
 * Power spectra |X[k]|², k = 0..N/2, of two real frames at once. `re` holds frame A, `im` frame B (both
 * already windowed and zero-padded); both arrays are overwritten. Results go to powerA / powerB (length N/2+1).
 */
export function twoRealPowerSpectra(
  plan: FftPlan,
  re: Float64Array,
  im: Float64Array,
  powerA: Float64Array,
  powerB: Float64Array,
): void {
  fft(plan, re, im);
  const n = plan.size;
  for (let k = 0; k <= n / 2; k++) {
    const m = (n - k) & (n - 1);
    // A[k] = (Z[k] + conj Z[N-k]) / 2,  B[k] = (Z[k] - conj Z[N-k]) / 2i
    const ar = (re[k]! + re[m]!) / 2;
    const ai = (im[k]! - im[m]!) / 2;
    const br = (im[k]! + im[m]!) / 2;
    const bi = (re[m]! - re[k]!) / 2;
    powerA[k] = ar * ar + ai * ai;
    powerB[k] = br * br + bi * bi;
  }
}
