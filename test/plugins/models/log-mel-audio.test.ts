/**
 * log-mel-audio: the contract, the FFT and WAV helpers, then descriptor behaviour on tones and noise
 * the test synthesises: the same tone at another gain, length or sample rate stays nearest to itself.
 */
import { describe, expect, it } from 'vitest';
import model, {
  LOG_MEL_DIMS,
  MEL_BANDS,
  createLogMelAudioModel,
  decodeWav,
  encodeWav,
  logMelDescriptor,
  type AudioInput,
} from '../../../plugins/models/log-mel-audio/index.js';
import { createFftPlan, fft, twoRealPowerSpectra } from '../../../plugins/models/log-mel-audio/fft.js';
import { createMelFilterbank, hzToMel, melToHz } from '../../../plugins/models/log-mel-audio/mel.js';
import { runModelContract } from '../../support/model-contract.js';

const RATE = 16000;

function tone(hz: number, seconds: number, amplitude: number, rate = RATE): Float32Array {
  return Float32Array.from({ length: Math.round(seconds * rate) }, (_, i) => amplitude * Math.sin((2 * Math.PI * hz * i) / rate));
}

function noise(seconds: number, amplitude: number, seed: number, rate = RATE): Float32Array {
  let s = seed >>> 0;
  return Float32Array.from({ length: Math.round(seconds * rate) }, () => {
    s = (Math.imul(s, 1103515245) + 12345) >>> 0;
    return amplitude * ((s / 2 ** 32) * 2 - 1);
  });
}

runModelContract(model, {
  sampleInputs: [
    { samples: tone(440, 0.5, 0.5), sampleRate: RATE },
    { samples: tone(2000, 0.3, 0.8), sampleRate: 44100 },
    { samples: noise(0.4, 0.3, 1), sampleRate: RATE },
    { samples: new Float32Array(800), sampleRate: RATE }, // silence
    { samples: Array.from(tone(1000, 0.005, 0.5)), sampleRate: RATE }, // number[], shorter than one frame
    { samples: new Float32Array(0), sampleRate: 8000 }, // empty
  ] satisfies AudioInput[],
  expectDims: LOG_MEL_DIMS,
  create: createLogMelAudioModel,
});

const cos = (a: readonly number[], b: readonly number[]): number => a.reduce((s, x, i) => s + x * b[i]!, 0);
const describeClip = (samples: Float32Array, sampleRate = RATE): number[] => logMelDescriptor({ samples, sampleRate });

describe('log-mel-audio helpers', () => {
  it('the FFT matches a direct DFT', () => {
    const n = 64;
    const plan = createFftPlan(n);
    const x = noise(n / RATE, 1, 9);
    const re = Float64Array.from(x);
    const im = new Float64Array(n);
    fft(plan, re, im);
    for (const k of [0, 1, 5, 31, 32, 63]) {
      let dr = 0;
      let di = 0;
      for (let t = 0; t < n; t++) {
        dr += x[t]! * Math.cos((2 * Math.PI * k * t) / n);
        di -= x[t]! * Math.sin((2 * Math.PI * k * t) / n);
      }
      expect(re[k]).toBeCloseTo(dr, 9);
      expect(im[k]).toBeCloseTo(di, 9);
    }
    expect(() => createFftPlan(48)).toThrow(RangeError);
  });

  it('two real frames through one complex FFT give each frame its own power spectrum', () => {
    const n = 128;
    const plan = createFftPlan(n);
    const a = noise(n / RATE, 1, 3);
    const b = noise(n / RATE, 1, 4);
    const both = { re: Float64Array.from(a), im: Float64Array.from(b) };
    const pa = new Float64Array(n / 2 + 1);
    const pb = new Float64Array(n / 2 + 1);
    twoRealPowerSpectra(plan, both.re, both.im, pa, pb);
    for (const [frame, power] of [[a, pa], [b, pb]] as const) {
      const re = Float64Array.from(frame);
      const im = new Float64Array(n);
      fft(plan, re, im);
      for (let k = 0; k <= n / 2; k++) expect(power[k]).toBeCloseTo(re[k]! ** 2 + im[k]! ** 2, 8);
    }
  });

  it('mel filters are ordered in frequency and every band under Nyquist catches energy', () => {
    expect(melToHz(hzToMel(1234))).toBeCloseTo(1234, 9);
    const fb = createMelFilterbank(MEL_BANDS, 512, RATE, 30, 8000);
    for (let b = 0; b < MEL_BANDS; b++) expect(fb.weights[b]!.some((w) => w > 0)).toBe(true);
    for (let b = 1; b < MEL_BANDS; b++) expect(fb.start[b]!).toBeGreaterThanOrEqual(fb.start[b - 1]!);
    // At 8 kHz the bands above 4 kHz are empty rather than squeezed.
    const low = createMelFilterbank(MEL_BANDS, 256, 8000, 30, 8000);
    expect(low.weights[MEL_BANDS - 1]).toHaveLength(0);
  });

  it('decodeWav reads back 16-bit PCM and 32-bit float WAVs', () => {
    const x = tone(440, 0.1, 0.7);
    const pcm = decodeWav(encodeWav([x], RATE, 'pcm16'));
    expect(pcm.sampleRate).toBe(RATE);
    expect(pcm.channels).toBe(1);
    expect(pcm.samples).toHaveLength(x.length);
    expect(Math.max(...pcm.samples.map((v, i) => Math.abs(v - x[i]!)))).toBeLessThan(1 / 16000);
    const float = decodeWav(encodeWav([x], 44100, 'float32'));
    expect(float.sampleRate).toBe(44100);
    expect(Array.from(float.samples)).toEqual(Array.from(x));
  });

  it('decodeWav mixes stereo down to mono and skips unknown chunks', () => {
    const left = Float32Array.of(0.5, -0.5, 0.25);
    const right = Float32Array.of(0.5, 0.5, -0.25);
    const wav = encodeWav([left, right], 22050, 'float32');
    const decoded = decodeWav(wav);
    expect(decoded.channels).toBe(2);
    expect(Array.from(decoded.samples)).toEqual([0.5, 0, 0]);
    // A LIST chunk (odd length, padded) between fmt and data, as many writers add.
    const list = new Uint8Array([...'LIST'].map((c) => c.charCodeAt(0)).concat([3, 0, 0, 0, 1, 2, 3, 0]));
    const spliced = new Uint8Array(wav.length + list.length);
    spliced.set(wav.subarray(0, 36));
    spliced.set(list, 36);
    spliced.set(wav.subarray(36), 36 + list.length);
    expect(Array.from(decodeWav(spliced).samples)).toEqual([0.5, 0, 0]);
  });

  it('decodeWav refuses what it cannot read', () => {
    expect(() => decodeWav(new Uint8Array(10))).toThrow(/RIFF/);
    const wav = encodeWav([tone(440, 0.01, 0.5)], RATE);
    new DataView(wav.buffer).setUint16(20, 2, true); // ADPCM
    expect(() => decodeWav(wav)).toThrow(/unsupported/);
  });
});

describe('log-mel-audio descriptor', () => {
  it('the same tone at another gain, length and sample rate is nearer than a different tone or noise', async () => {
    const a440 = decodeWav(encodeWav([tone(440, 1, 0.5)], RATE));
    const [ref, quiet, long, resampled, a2k, hiss] = await model.infer([
      a440,
      { samples: tone(440, 1, 0.05), sampleRate: RATE },
      { samples: tone(440, 2.5, 0.3), sampleRate: RATE },
      decodeWav(encodeWav([tone(440, 1, 0.4, 44100)], 44100, 'float32')),
      decodeWav(encodeWav([tone(2000, 1, 0.5)], RATE)),
      decodeWav(encodeWav([noise(1, 0.5, 11)], RATE)),
    ]);
    const other = Math.max(cos(ref!, a2k!), cos(ref!, hiss!));
    for (const same of [quiet!, long!, resampled!]) {
      expect(cos(ref!, same)).toBeGreaterThan(0.95);
      expect(cos(ref!, same)).toBeGreaterThan(other + 0.5);
    }
    // And each sound stays nearest to its own kind.
    const otherNoise = describeClip(noise(2, 0.1, 99));
    expect(cos(hiss!, otherNoise)).toBeGreaterThan(cos(hiss!, a2k!));
    expect(cos(hiss!, otherNoise)).toBeGreaterThan(cos(hiss!, ref!));
  });

  it('tells a steady tone from a sweep and from a tone with gaps', () => {
    const steady = describeClip(tone(1000, 1, 0.5));
    const sweep = describeClip(Float32Array.from({ length: RATE }, (_, i) => 0.5 * Math.sin(2 * Math.PI * (300 * (i / RATE) + 1500 * (i / RATE) ** 2))));
    const gated = describeClip(tone(1000, 1, 0.5).map((v, i) => (Math.floor(i / 1600) % 2 === 0 ? v : 0)));
    expect(cos(steady, sweep)).toBeLessThan(0.8);
    expect(cos(steady, gated)).toBeLessThan(0.95);
  });

  it('silence and empty input give the silence vector', () => {
    const silent = describeClip(new Float32Array(RATE));
    expect(silent[LOG_MEL_DIMS - 1]).toBe(1);
    expect(describeClip(new Float32Array(0))).toEqual(silent);
    expect(cos(silent, describeClip(tone(440, 1, 0.5)))).toBe(0);
  });

  it('rejects bad input with the item index', async () => {
    await expect(model.infer([{ samples: tone(440, 0.1, 0.5), sampleRate: 100 }])).rejects.toThrow(/input 0: sampleRate/);
    await expect(model.infer([{ samples: Float32Array.of(0, Number.NaN), sampleRate: RATE }])).rejects.toThrow(/not a finite/);
    await expect(model.infer([{ sampleRate: RATE } as unknown as AudioInput])).rejects.toThrow(/needs samples/);
  });
});
