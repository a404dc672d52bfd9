/**
 * Audio models over raw waveforms (wav2vec2 / HuBERT style `input_values [batch, samples]`): each clip
 * is resampled linearly to the model's rate, cut to max_seconds, optionally normalised to zero mean and
 * unit variance, and clips of equal length run together. Clips of different lengths run as separate
 * batches instead of being padded: a convolutional front end smears padding into the frames next to it,
 * so padding would change a clip's embedding depending on its batch.
 */
import type { Tensor } from 'onnxruntime-node';
import { InputError } from '../../../kernel/errors.js';
import type { AudioClipInput } from '../../../kernel/inference/model-io.js';
import type { AudioModelSpec } from './manifest.js';
import { finishVector, poolRows } from './pooling.js';
import { integerTensor, openSession, runForOutput, type ModelSession } from './session.js';

/** Linear interpolation from `from` Hz to `to` Hz (the first sample stays put; the end is clamped). */
export function resampleLinear(samples: Float32Array, from: number, to: number): Float32Array {
  if (from === to || samples.length === 0) return samples;
  const length = Math.max(1, Math.round((samples.length * to) / from));
  const out = new Float32Array(length);
  const step = from / to;
  const last = samples.length - 1;
  for (let j = 0; j < length; j++) {
    const position = j * step;
    const i = Math.min(last, Math.floor(position));
    const frac = position - i;
    out[j] = i >= last ? samples[last]! : samples[i]! * (1 - frac) + samples[i + 1]! * frac;
  }
  return out;
}

/** Zero mean, unit variance (what Hugging Face feature extractors do with `do_normalize`). */
export function normaliseWaveform(samples: Float32Array): Float32Array {
  let mean = 0;
  for (const s of samples) mean += s;
  mean /= samples.length;
  let variance = 0;
  for (const s of samples) variance += (s - mean) ** 2;
  variance /= samples.length;
  const scale = 1 / Math.sqrt(variance + 1e-7);
  return Float32Array.from(samples, (s) => (s - mean) * scale);
}

function isClip(value: unknown): value is AudioClipInput {
  return !!value && typeof value === 'object' && (value as AudioClipInput).samples instanceof Float32Array && typeof (value as AudioClipInput).sampleRate === 'number';
}

export interface AudioRunner {
  load(): Promise<void>;
  embed(clips: readonly unknown[]): Promise<number[][]>;
}

export function createAudioRunner(spec: AudioModelSpec): AudioRunner {
  let model: ModelSession | undefined;

  const prepare = (clip: unknown, i: number): Float32Array => {
    if (!isClip(clip)) throw new InputError(`onnx model ${spec.name}: input ${i} needs samples (Float32Array) and sampleRate`);
    if (!(clip.sampleRate > 0)) throw new InputError(`onnx model ${spec.name}: clip ${i} has no sample rate`);
    if (clip.samples.length === 0) throw new InputError(`onnx model ${spec.name}: clip ${i} has no samples`);
    let samples = resampleLinear(clip.samples, clip.sampleRate, spec.sampleRate);
    if (samples.length > spec.maxSamples) samples = samples.subarray(0, spec.maxSamples);
    return spec.normalizeAudio ? normaliseWaveform(samples) : samples;
  };

  return {
    async load() {
      const inputs = spec.attentionMask ? [spec.input, spec.attentionMask] : [spec.input];
      model = await openSession(spec.modelFile, { inputs, output: spec.output });
    },

    async embed(clips) {
      if (!model) throw new Error('not loaded');
      const waveforms = clips.map(prepare);
      const groups = new Map<number, number[]>();
      waveforms.forEach((w, i) => {
        const group = groups.get(w.length);
        if (group) group.push(i);
        else groups.set(w.length, [i]);
      });
      const out = new Array<number[]>(clips.length);
      for (const [length, members] of groups) {
        const data = new Float32Array(members.length * length);
        members.forEach((clip, row) => data.set(waveforms[clip]!, row * length));
        const dims = [members.length, length];
        const feeds: Record<string, Tensor> = { [spec.input]: new model.ort.Tensor('float32', data, dims) };
        if (spec.attentionMask) feeds[spec.attentionMask] = integerTensor(model, spec.attentionMask, new Array<number>(data.length).fill(1), dims);
        const output = await runForOutput(model, feeds, spec.output);
        poolRows(output, spec.pooling, null).forEach((v, row) => {
          out[members[row]!] = finishVector(v, spec.normalize, spec.name);
        });
      }
      return out;
    },
  };
}
