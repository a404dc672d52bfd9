/**
 * Test media made by the tests themselves (no downloads): tones and WAV files written from JS, videos
 * rendered by ffmpeg from its lavfi sources (solid-colour scenes, a sine tone), and a harness for the
 * media extractors: a real in-process inference worker with the real image-descriptor, log-mel-audio and
 * hashed-ngram-text models, `paddle-ocr` (a stand-in that names colours, or the real one), a LocalBlobStore
 * in a temp dir and artifacts.
 */
import { rm, writeFile } from 'node:fs/promises';
import sharp from 'sharp';
import { InferenceClient, type AudioClip, type CallOverrides, type EmbeddingResult, type OcrResultOutput } from '../../../kernel/inference/client.js';
import { runFfmpeg } from '../../../kernel/media/ffmpeg.js';
import { defineModel, type ModelPlugin } from '../../../kernel/plugins.js';
import { createHashedNgramTextModel } from '../../../plugins/models/hashed-ngram-text/index.js';
import { createImageDescriptorModel } from '../../../plugins/models/image-descriptor/index.js';
import { createLogMelAudioModel, encodeWav } from '../../../plugins/models/log-mel-audio/index.js';
import { createPaddleOcrModel } from '../../../plugins/models/paddle-ocr/index.js';
import { startExtractorHarness, type ExtractorHarness } from '../extractor-harness.js';

// ------------------------------------------------------------------------------------------------ audio

/** A sine tone: `seconds` of `frequency` Hz at `sampleRate`, peak `amplitude`. */
export function sine(frequency: number, seconds: number, sampleRate: number, amplitude = 0.5): Float32Array {
  const n = Math.round(seconds * sampleRate);
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) out[i] = amplitude * Math.sin((2 * Math.PI * frequency * i) / sampleRate);
  return out;
}

/** Pieces joined end to end. */
export function concatSamples(...parts: readonly Float32Array[]): Float32Array {
  const out = new Float32Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const part of parts) {
    out.set(part, at);
    at += part.length;
  }
  return out;
}

/** A 16-bit PCM WAV of the given channels (equal lengths). */
export function wavBytes(channels: readonly Float32Array[], sampleRate: number): Buffer {
  const bytes = encodeWav(channels, sampleRate, 'pcm16');
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

// ------------------------------------------------------------------------------------------------ video

export interface SceneSpec {
  /** Any colour ffmpeg knows (`red`, `blue`, `0x336699`). */
  color: string;
  seconds: number;
}

export interface VideoSpec {
  scenes: readonly SceneSpec[];
  width?: number;
  height?: number;
  fps?: number;
  /** A sine tone over the whole video; omit for a video without an audio track. */
  toneHz?: number;
  /** Written as display-matrix rotation (what phones record). */
  rotate?: 90 | 180 | 270;
}

/**
 * Renders an MP4 (MPEG-4 Part 2 video and AAC audio: encoders every ffmpeg build has) of solid-colour
 * scenes, optionally with a tone over the whole length.
 */
export async function renderVideo(file: string, spec: VideoSpec): Promise<void> {
  const width = spec.width ?? 320;
  const height = spec.height ?? 240;
  const fps = spec.fps ?? 25;
  const total = spec.scenes.reduce((s, scene) => s + scene.seconds, 0);
  const inputs: string[] = [];
  for (const scene of spec.scenes) inputs.push('-f', 'lavfi', '-i', `color=c=${scene.color}:s=${width}x${height}:r=${fps}:d=${scene.seconds}`);
  const outputs = ['-filter_complex', `${spec.scenes.map((_, i) => `[${i}:v]`).join('')}concat=n=${spec.scenes.length}:v=1:a=0[v]`, '-map', '[v]'];
  if (spec.toneHz !== undefined) {
    inputs.push('-f', 'lavfi', '-i', `sine=frequency=${spec.toneHz}:sample_rate=44100:duration=${total}`);
    outputs.push('-map', `${spec.scenes.length}:a`, '-c:a', 'aac', '-b:a', '96k');
  }
  outputs.push('-c:v', 'mpeg4', '-q:v', '3', '-pix_fmt', 'yuv420p');
  if (!spec.rotate) {
    await runFfmpeg([...inputs, ...outputs, '-y', file], { timeoutMs: 60_000 });
    return;
  }
  // An encoder drops the rotate tag (ffmpeg applies rotation when decoding): tag it on a stream copy instead.
  const plain = `${file}.plain.mp4`;
  await runFfmpeg([...inputs, ...outputs, '-y', plain], { timeoutMs: 60_000 });
  await runFfmpeg(['-i', plain, '-c', 'copy', '-metadata:s:v:0', `rotate=${spec.rotate}`, '-y', file], { timeoutMs: 60_000 });
  await rm(plain, { force: true });
}

export interface Slide {
  /** An encoded picture (PNG, JPEG). */
  image: Buffer;
  seconds: number;
}

/** Renders an MP4 showing each picture for its time (no audio); pictures of one size, cropped to even dimensions. */
export async function renderSlides(file: string, slides: readonly Slide[], fps = 25): Promise<void> {
  const inputs: string[] = [];
  for (const [i, slide] of slides.entries()) {
    const picture = `${file}.slide-${i}.png`;
    await writeFile(picture, slide.image);
    inputs.push('-loop', '1', '-framerate', String(fps), '-t', String(slide.seconds), '-i', picture);
  }
  const graph = `${slides.map((_, i) => `[${i}:v]`).join('')}concat=n=${slides.length}:v=1:a=0,crop=trunc(iw/2)*2:trunc(ih/2)*2[v]`;
  await runFfmpeg([...inputs, '-filter_complex', graph, '-map', '[v]', '-c:v', 'mpeg4', '-q:v', '2', '-pix_fmt', 'yuv420p', '-y', file], {
    timeoutMs: 60_000,
  });
  await Promise.all(slides.map((_, i) => rm(`${file}.slide-${i}.png`, { force: true })));
}

// ------------------------------------------------------------------------------------------------ pictures

/** The colour name a solid picture is closest to, from its mean RGB: 'RED', 'GREEN', 'BLUE', 'WHITE', 'BLACK' or 'OTHER'. */
export async function colourName(image: Uint8Array): Promise<string> {
  const { channels } = await sharp(image).stats();
  const [r, g, b] = channels.map((c) => c.mean) as [number, number, number];
  if (r > 200 && g > 200 && b > 200) return 'WHITE';
  if (r < 50 && g < 50 && b < 50) return 'BLACK';
  if (r > 150 && g < 80 && b < 80) return 'RED';
  if (g > 100 && r < 80 && b < 80) return 'GREEN';
  if (b > 150 && r < 80 && g < 80) return 'BLUE';
  return 'OTHER';
}

/**
 * A stand-in for the `paddle-ocr` model (another plugin, written separately): it "reads" the name of the
 * picture's colour, so a test can tell which frame OCR was given, and records the size of every image.
 */
export function standInOcrModel(seen: Array<{ width: number; height: number }>): ModelPlugin<Buffer, string> {
  return defineModel<Buffer, string>({
    name: 'paddle-ocr',
    task: 'ocr',
    load: async () => undefined,
    infer: async (images) =>
      Promise.all(
        images.map(async (image) => {
          const meta = await sharp(image).metadata();
          seen.push({ width: meta.width, height: meta.height });
          return colourName(image);
        }),
      ),
  });
}

// ------------------------------------------------------------------------------------------------ harness

/** An inference client that records how many inputs each call carried, so tests count calls instead of timing them. */
export class RecordingInferenceClient extends InferenceClient {
  /** Inputs per call, by method (a name of its own, clear of the client's internals). */
  readonly callSizes = { embedAudio: [] as number[], embedImage: [] as number[], ocr: [] as number[] };

  override async embedAudio(model: string, clips: readonly AudioClip[], overrides?: CallOverrides): Promise<EmbeddingResult[]> {
    this.callSizes.embedAudio.push(clips.length);
    return super.embedAudio(model, clips, overrides);
  }

  override async embedImage(model: string, images: readonly Uint8Array[], overrides?: CallOverrides): Promise<EmbeddingResult[]> {
    this.callSizes.embedImage.push(images.length);
    return super.embedImage(model, images, overrides);
  }

  override async ocr(model: string, images: readonly Uint8Array[], overrides?: CallOverrides): Promise<OcrResultOutput[]> {
    this.callSizes.ocr.push(images.length);
    return super.ocr(model, images, overrides);
  }
}

export type MediaHarness = ExtractorHarness<RecordingInferenceClient> & {
  /** Sizes of the images the stand-in OCR model was given (empty with the real model). */
  ocrImages: Array<{ width: number; height: number }>;
};

export interface MediaHarnessOptions {
  /** Serve the real paddle-ocr model instead of the colour-naming stand-in (slower to load). */
  realOcr?: boolean;
}

export async function startMediaHarness(name: string, options: MediaHarnessOptions = {}): Promise<MediaHarness> {
  const ocrImages: Array<{ width: number; height: number }> = [];
  const ocr = options.realOcr ? createPaddleOcrModel() : standInOcrModel(ocrImages);
  const harness = await startExtractorHarness({
    name,
    models: [createImageDescriptorModel(), createLogMelAudioModel(), createHashedNgramTextModel(), ocr],
    client: (o) => new RecordingInferenceClient(o),
  });
  return { ...harness, ocrImages };
}
