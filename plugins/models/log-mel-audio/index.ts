/**
 * `log-mel-audio`: a weight-free audio descriptor from log-mel band statistics (see ./descriptor.ts).
 * Input per item: `{ samples: Float32Array | number[], sampleRate }`, mono PCM in -1..1 at 8 kHz or more
 * (decode a WAV with `decodeWav`; mix other formats down with ffmpeg first). Output per item: a 136-d
 * L2-normalised `number[]`. Describes spectral shape and its movement (timbre, pitch region, noisiness),
 * independent of gain; it is not speech recognition or a learned audio embedding.
 */
import { defineModel, type ModelPlugin } from '../../../kernel/plugins.js';
import { LOG_MEL_DIMS, createAnalysisSetup, describeAudio, type AnalysisSetup, type AudioInput } from './descriptor.js';

export { LOG_MEL_DIMS, MEL_BANDS, describeAudio, createAnalysisSetup, logMelDescriptor } from './descriptor.js';
export type { AnalysisSetup, AudioInput } from './descriptor.js';
export { decodeWav, encodeWav } from './wav.js';
export type { DecodedWav, WavEncoding } from './wav.js';

/** A fresh model instance; it keeps the FFT plan, window and filterbank of each sample rate it has seen. */
export function createLogMelAudioModel(): ModelPlugin<AudioInput, number[]> {
  const setups = new Map<number, AnalysisSetup>();
  const setupFor = (rate: number): AnalysisSetup => {
    let setup = setups.get(rate);
    if (!setup) {
      setup = createAnalysisSetup(rate);
      if (setups.size >= 16) setups.clear(); // odd rates from many sources must not grow it without bound
      setups.set(rate, setup);
    }
    return setup;
  };
  return defineModel<AudioInput, number[]>({
    name: 'log-mel-audio',
    task: 'embed_audio',
    dims: LOG_MEL_DIMS,
    // Nothing to load; the 16 kHz setup (the common rate) is built eagerly so the first call is not slower.
    load: async () => {
      setupFor(16000);
    },
    infer: async (inputs) =>
      inputs.map((input, i) => {
        if (!input || typeof input !== 'object' || !(input.samples instanceof Float32Array || Array.isArray(input.samples))) {
          throw new TypeError(`log-mel-audio: input ${i} needs samples (Float32Array or number[]) and sampleRate`);
        }
        try {
          return describeAudio(setupFor(input.sampleRate), input.samples);
        } catch (err) {
          throw new Error(`log-mel-audio: input ${i}: ${(err as Error).message}`, { cause: err });
        }
      }),
  });
}

export default createLogMelAudioModel();
