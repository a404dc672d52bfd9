/**
 * Triangular mel filterbank (HTK mel scale, Slaney area normalisation so white noise comes out roughly
 * flat across bands). Band edges are fixed in hertz (not in FFT bins), so recordings at different sample
 * rates land in the same bands; bands above a recording's Nyquist frequency stay empty.
 */

export interface MelFilterbank {
  readonly bands: number;
  /** First FFT bin of each band. */
  readonly start: Uint32Array;
  /** Weights of each band, from its first bin on. */
  readonly weights: readonly Float64Array[];
}

export const hzToMel = (hz: number): number => 2595 * Math.log10(1 + hz / 700);
export const melToHz = (mel: number): number => 700 * (10 ** (mel / 2595) - 1);

export function createMelFilterbank(bands: number, fftSize: number, sampleRate: number, fMin: number, fMax: number): MelFilterbank {
  const nyquist = sampleRate / 2;
  const bins = fftSize / 2 + 1;
  const binHz = sampleRate / fftSize;
  const melMin = hzToMel(fMin);
  const melMax = hzToMel(fMax);
  const edges = Array.from({ length: bands + 2 }, (_, i) => melToHz(melMin + ((melMax - melMin) * i) / (bands + 1)));
  const start = new Uint32Array(bands);
  const weights: Float64Array[] = [];
  for (let b = 0; b < bands; b++) {
    const lo = edges[b]!;
    const mid = edges[b + 1]!;
    const hi = edges[b + 2]!;
    const area = 2 / (hi - lo);
    if (lo >= nyquist) {
      start[b] = 0;
      weights.push(new Float64Array(0));
      continue;
    }
    const first = Math.max(0, Math.ceil(lo / binHz));
    const last = Math.min(bins - 1, Math.floor(hi / binHz));
    const w = new Float64Array(Math.max(0, last - first + 1));
    let any = false;
    for (let k = first; k <= last; k++) {
      const f = k * binHz;
      const t = f <= mid ? (f - lo) / (mid - lo) : (hi - f) / (hi - mid);
      if (t > 0) {
        w[k - first] = t * area;
        any = true;
      }
    }
    if (!any) {
      // A low band narrower than one FFT bin catches no bin centre: give it the bin nearest its centre,
      // so every band below Nyquist measures something.
      const k = Math.min(bins - 1, Math.round(mid / binHz));
      start[b] = k;
      weights.push(Float64Array.of(1 / binHz)); // what a full triangle's weights sum to
      continue;
    }
    start[b] = first;
    weights.push(w);
  }
  return { bands, start, weights };
}

export function applyFilterbank(fb: MelFilterbank, power: Float64Array, out: Float64Array): void {
  for (let b = 0; b < fb.bands; b++) {
    const w = fb.weights[b]!;
    const s = fb.start[b]!;
    let sum = 0;
    for (let i = 0; i < w.length; i++) sum += w[i]! * power[s + i]!;
    out[b] = sum;
  }
}
