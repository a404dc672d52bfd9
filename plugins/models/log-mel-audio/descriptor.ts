/**
 * The log-mel audio descriptor (136 dims, L2-normalised), for mono PCM at any sample rate ≥ 8 kHz:
 *
 * Frames of 25 ms every 10 ms, Hann window, zero-padded to a power of two, radix-2 FFT (./fft.ts), 64 mel
 * bands from 30 Hz to 8 kHz (./mel.ts), power in dB. The dB values are taken relative to the loudest
 * band-frame of the clip and clamped 80 dB below it, so the descriptor ignores playback gain and the
 * digital noise floor (the same sound louder or quieter lands in the same place).
 *
 *   [0, 64)    mean over frames of each band, centred across bands (spectral shape), / 20 dB
 *   [64, 128)  standard deviation over frames of each band (how much it moves), / 10 dB, weight 0.5
 *   [128, 135) summary statistics, weight 0.5, each mapped to about -1..1: mel spectral centroid mean
 *              and std, spectral flux mean and std, spectral flatness mean, frame loudness std,
 *              zero-crossing rate mean
 *   [135]      silence: 1 for a clip with no signal (every other entry 0), else 0; keeps the vector
 *              unit-length and makes all silent clips identical
 *
 * Input shorter than one frame is zero-padded to one frame. Compare with cosine (= dot product).
 */
import { createFftPlan, nextPowerOfTwo, twoRealPowerSpectra, type FftPlan } from './fft.js';
import { applyFilterbank, createMelFilterbank, type MelFilterbank } from './mel.js';

export const MEL_BANDS = 64;
export const LOG_MEL_DIMS = 2 * MEL_BANDS + 7 + 1;
export const FRAME_SECONDS = 0.025;
export const HOP_SECONDS = 0.01;
export const MIN_SAMPLE_RATE = 8000;
const F_MIN = 30;
const F_MAX = 8000;
const TOP_DB = 80;
/** Peak below -100 dBFS counts as silence (below 16-bit quantisation). */
const SILENCE_PEAK = 1e-5;

export interface AudioInput {
  /** Mono PCM, nominally in -1..1. */
  samples: Float32Array | readonly number[];
  sampleRate: number;
}

/** Everything derived from the sample rate; build once per rate and reuse. */
export interface AnalysisSetup {
  sampleRate: number;
  frameLength: number;
  hop: number;
  plan: FftPlan;
  window: Float64Array;
  filterbank: MelFilterbank;
}

export function createAnalysisSetup(sampleRate: number): AnalysisSetup {
  if (!Number.isFinite(sampleRate) || sampleRate < MIN_SAMPLE_RATE || sampleRate > 768_000) {
    throw new RangeError(`sampleRate must be between ${MIN_SAMPLE_RATE} and 768000 Hz, got ${sampleRate}`);
  }
  const frameLength = Math.round(FRAME_SECONDS * sampleRate);
  const hop = Math.round(HOP_SECONDS * sampleRate);
  const size = nextPowerOfTwo(frameLength);
  const window = new Float64Array(frameLength);
  // Periodic Hann (the spectral-analysis form: overlapping frames at this hop sum smoothly).
  for (let i = 0; i < frameLength; i++) window[i] = 0.5 - 0.5 * Math.cos((2 * Math.PI * i) / frameLength);
  return {
    sampleRate,
    frameLength,
    hop,
    plan: createFftPlan(size),
    window,
    filterbank: createMelFilterbank(MEL_BANDS, size, sampleRate, F_MIN, F_MAX),
  };
}

function silenceVector(): number[] {
  const v = new Array<number>(LOG_MEL_DIMS).fill(0);
  v[LOG_MEL_DIMS - 1] = 1;
  return v;
}

/** Log-mel power (dB) of every frame: frames × MEL_BANDS, row-major; plus each frame's zero-crossing rate. */
function logMelFrames(setup: AnalysisSetup, samples: Float32Array | readonly number[]): { db: Float64Array; zcr: Float64Array; frames: number } {
  const { frameLength, hop, plan, window, filterbank } = setup;
  const n = samples.length;
  const frames = n <= frameLength ? 1 : 1 + Math.floor((n - frameLength) / hop);
  const size = plan.size;
  const re = new Float64Array(size);
  const im = new Float64Array(size);
  const powA = new Float64Array(size / 2 + 1);
  const powB = new Float64Array(size / 2 + 1);
  const mel = new Float64Array(MEL_BANDS);
  const db = new Float64Array(frames * MEL_BANDS);
  const zcr = new Float64Array(frames);

  const fill = (target: Float64Array, frame: number): void => {
    target.fill(0);
    const offset = frame * hop;
    let crossings = 0;
    let prev = 0;
    for (let i = 0; i < frameLength; i++) {
      const x = offset + i < n ? samples[offset + i]! : 0;
      target[i] = x * window[i]!;
      if (i > 0 && (x >= 0) !== (prev >= 0)) crossings++;
      prev = x;
    }
    zcr[frame] = crossings / (frameLength - 1);
  };
  const store = (power: Float64Array, frame: number): void => {
    applyFilterbank(filterbank, power, mel);
    for (let b = 0; b < MEL_BANDS; b++) db[frame * MEL_BANDS + b] = 10 * Math.log10(Math.max(mel[b]!, 1e-20));
  };

  for (let f = 0; f < frames; f += 2) {
    fill(re, f);
    if (f + 1 < frames) fill(im, f + 1);
    else im.fill(0);
    twoRealPowerSpectra(plan, re, im, powA, powB);
    store(powA, f);
    if (f + 1 < frames) store(powB, f + 1);
  }
  return { db, zcr, frames };
}

/** The descriptor of one clip, computed with a setup made for its sample rate. */
export function describeAudio(setup: AnalysisSetup, samples: Float32Array | readonly number[]): number[] {
  let peak = 0;
  for (let i = 0; i < samples.length; i++) {
    const a = Math.abs(samples[i]!);
    if (!Number.isFinite(a)) throw new RangeError(`sample ${i} is not a finite number`);
    if (a > peak) peak = a;
  }
  if (peak < SILENCE_PEAK) return silenceVector();

  const { db, zcr, frames } = logMelFrames(setup, samples);
  // Relative to the loudest band-frame, clamped TOP_DB below: gain-invariant, floor-invariant.
  let top = -Infinity;
  for (const v of db) if (v > top) top = v;
  for (let i = 0; i < db.length; i++) db[i] = Math.max(db[i]!, top - TOP_DB) - top;

  const mean = new Float64Array(MEL_BANDS);
  const std = new Float64Array(MEL_BANDS);
  for (let f = 0; f < frames; f++) for (let b = 0; b < MEL_BANDS; b++) mean[b]! += db[f * MEL_BANDS + b]!;
  for (let b = 0; b < MEL_BANDS; b++) mean[b]! /= frames;
  for (let f = 0; f < frames; f++) {
    for (let b = 0; b < MEL_BANDS; b++) {
      const d = db[f * MEL_BANDS + b]! - mean[b]!;
      std[b]! += d * d;
    }
  }
  for (let b = 0; b < MEL_BANDS; b++) std[b] = Math.sqrt(std[b]! / frames);

  // Per-frame summaries, from linear band power (centroid, flatness, loudness) and dB (flux).
  const centroid = new Float64Array(frames);
  const flatness = new Float64Array(frames);
  const loudness = new Float64Array(frames);
  const flux = new Float64Array(Math.max(1, frames - 1));
  for (let f = 0; f < frames; f++) {
    let sum = 0;
    let weighted = 0;
    let logSum = 0;
    for (let b = 0; b < MEL_BANDS; b++) {
      const p = 10 ** (db[f * MEL_BANDS + b]! / 10); // relative power, floor 1e-8
      sum += p;
      weighted += b * p;
      logSum += Math.log(p);
    }
    centroid[f] = weighted / sum / (MEL_BANDS - 1);
    flatness[f] = Math.exp(logSum / MEL_BANDS) / (sum / MEL_BANDS);
    loudness[f] = 10 * Math.log10(sum / MEL_BANDS);
    if (f > 0) {
      let up = 0;
      for (let b = 0; b < MEL_BANDS; b++) up += Math.max(0, db[f * MEL_BANDS + b]! - db[(f - 1) * MEL_BANDS + b]!);
      flux[f - 1] = up / MEL_BANDS;
    }
  }

  const out = new Array<number>(LOG_MEL_DIMS).fill(0);
  let shape = 0;
  for (let b = 0; b < MEL_BANDS; b++) shape += mean[b]!;
  shape /= MEL_BANDS;
  for (let b = 0; b < MEL_BANDS; b++) {
    out[b] = (mean[b]! - shape) / 20;
    out[MEL_BANDS + b] = (0.5 * std[b]!) / 10;
  }
  const summary = [
    meanOf(centroid) * 2 - 1,
    stdOf(centroid) * 4,
    meanOf(flux) / 10,
    stdOf(flux) / 10,
    meanOf(flatness) * 2 - 1,
    stdOf(loudness) / 10,
    meanOf(zcr) * 2 - 1,
  ];
  summary.forEach((v, i) => (out[2 * MEL_BANDS + i] = 0.5 * v));

  let norm = 0;
  for (const v of out) norm += v * v;
  // Every entry exactly 0 would need flat shape, no movement and three summaries at exactly their
  // midpoints; guard anyway so the output is always unit-length.
  if (norm === 0) return silenceVector();
  const inv = 1 / Math.sqrt(norm);
  return out.map((v) => v * inv);
}

function meanOf(a: Float64Array): number {
  let s = 0;
  for (const v of a) s += v;
  return a.length ? s / a.length : 0;
}

function stdOf(a: Float64Array): number {
  const m = meanOf(a);
  let s = 0;
  for (const v of a) s += (v - m) * (v - m);
  return a.length ? Math.sqrt(s / a.length) : 0;
}

/** One-off convenience: the descriptor of one clip (builds the per-rate setup each call). */
export function logMelDescriptor(input: AudioInput): number[] {
  return describeAudio(createAnalysisSetup(input.sampleRate), input.samples);
}
