/**
 * Audio decoding to what audio models take: mono 32-bit float PCM in [-1, 1] at a chosen sample rate
 * (`-f f32le -ac 1 -ar N`; several channels are averaged), either whole (`decodeAudio`, bounded) or as a stream of sample blocks
 * (`streamAudio`, constant memory whatever the length).
 */
import { endianness } from 'node:os';
import { InputError } from '../errors.js';
import { runFfmpeg, streamFfmpeg, type FfmpegCallOptions, type StreamFfmpegOptions } from './ffmpeg.js';

export interface AudioDecodeOptions {
  /** Output rate in Hz (the audio is resampled to it). */
  sampleRate: number;
  /** Start here (seconds from the beginning of the media). */
  startSeconds?: number;
  /** Decode at most this many seconds. */
  durationSeconds?: number;
}

export const BYTES_PER_SAMPLE = 4;
const LITTLE_ENDIAN = endianness() === 'LE';

function validate(options: AudioDecodeOptions): void {
  const { sampleRate, startSeconds, durationSeconds } = options;
  if (!Number.isInteger(sampleRate) || sampleRate < 1000 || sampleRate > 384_000) {
    throw new InputError(`sample rate must be an integer between 1000 and 384000 Hz, got ${sampleRate}`);
  }
  if (startSeconds !== undefined && !(Number.isFinite(startSeconds) && startSeconds >= 0)) {
    throw new InputError(`start must be a non-negative number of seconds, got ${startSeconds}`);
  }
  if (durationSeconds !== undefined && !(Number.isFinite(durationSeconds) && durationSeconds > 0)) {
    throw new InputError(`duration must be a positive number of seconds, got ${durationSeconds}`);
  }
}

/** Seconds as ffmpeg reads them (plain decimal, never exponent notation). */
export function formatSeconds(seconds: number): string {
  return seconds.toFixed(6);
}

function audioArgs(file: string, options: AudioDecodeOptions): string[] {
  validate(options);
  const args: string[] = [];
  // Before -i: seek in the input; ffmpeg decodes from the preceding sync point and drops samples up to it,
  // so the start is sample-accurate.
  if (options.startSeconds) args.push('-ss', formatSeconds(options.startSeconds));
  args.push('-i', file);
  if (options.durationSeconds !== undefined) args.push('-t', formatSeconds(options.durationSeconds));
  // rematrix_maxval=1 scales the mix-down so its weights sum to at most 1: stereo becomes the mean of its
  // channels (ffmpeg's default adds them at -3 dB, which can exceed full scale).
  args.push('-map', '0:a:0', '-vn', '-sn', '-dn', '-af', 'aresample=rematrix_maxval=1');
  args.push('-ac', '1', '-ar', String(options.sampleRate), '-f', 'f32le', 'pipe:1');
  return args;
}

/** Reinterprets little-endian float32 bytes (a whole number of samples) as samples. */
export function float32FromBytes(bytes: Buffer): Float32Array {
  const count = Math.floor(bytes.length / BYTES_PER_SAMPLE);
  const out = new Float32Array(count);
  if (LITTLE_ENDIAN) {
    // Copy through a byte view: the Buffer's offset need not be 4-byte aligned.
    new Uint8Array(out.buffer).set(bytes.subarray(0, count * BYTES_PER_SAMPLE));
  } else {
    for (let i = 0; i < count; i++) out[i] = bytes.readFloatLE(i * BYTES_PER_SAMPLE);
  }
  return out;
}

export interface DecodeAudioOptions extends AudioDecodeOptions, FfmpegCallOptions {
  /** Refuse (PayloadTooLargeError) to decode more samples than this (default: one hour at the rate). */
  maxSamples?: number;
}

/** Decodes (part of) the first audio stream of `file` to mono float samples at `sampleRate`. */
export async function decodeAudio(file: string, options: DecodeAudioOptions): Promise<Float32Array> {
  const maxSamples = options.maxSamples ?? options.sampleRate * 3600;
  const { stdout } = await runFfmpeg(audioArgs(file, options), {
    ...options,
    timeoutMs: options.timeoutMs ?? 600_000,
    maxOutputBytes: maxSamples * BYTES_PER_SAMPLE,
  });
  return float32FromBytes(stdout);
}

export interface StreamAudioOptions extends AudioDecodeOptions, StreamFfmpegOptions {}

/**
 * Decodes the first audio stream of `file` and yields its samples in blocks as ffmpeg produces them
 * (block sizes vary; concatenated they are the whole signal). ffmpeg pauses while the consumer works.
 */
export async function* streamAudio(file: string, options: StreamAudioOptions): AsyncGenerator<Float32Array, void, undefined> {
  let carry: Buffer = Buffer.alloc(0);
  for await (const chunk of streamFfmpeg(audioArgs(file, options), options)) {
    const bytes = carry.length > 0 ? Buffer.concat([carry, chunk]) : chunk;
    const whole = bytes.length - (bytes.length % BYTES_PER_SAMPLE);
    // A sample split between two pipe reads waits for its other half.
    carry = Buffer.from(bytes.subarray(whole));
    if (whole > 0) yield float32FromBytes(bytes.subarray(0, whole));
  }
}
