/**
 * video_extractor: splits a video into segments (fixed intervals, or scenes found by ffmpeg's scene
 * score) and writes one document per segment: its time span, a keyframe (a JPEG of the segment's middle
 * frame, saved as an artifact), the text OCR reads in that keyframe, a 256-d `keyframe_embedding`
 * (image-descriptor) and a 136-d `audio_embedding` of the segment's sound (log-mel-audio).
 *
 * Every document carries both features. A video without an audio track gets the embedding of silence
 * (what log-mel-audio returns for a silent clip) and `has_audio: false`: no sound and a silent track
 * sound the same, every document of the collection has the same features, and audio search simply
 * ranks silent segments as silent.
 *
 * All decoding runs in ffmpeg processes and all models in the inference workers; segments are handled
 * in small batches (one inference call per model per batch) and yielded batch by batch. Keys are
 * `segment:<index>`; keyframe artifacts are `segment-<index>/keyframe.jpg`, replaced on a re-run.
 */
import { InputError } from '../../../kernel/errors.js';
import { decodeAudio } from '../../../kernel/media/audio.js';
import { extractFrame } from '../../../kernel/media/frames.js';
import { openMediaInput } from '../../../kernel/media/media-input.js';
import { probeMedia, type MediaProbe } from '../../../kernel/media/probe.js';
import { detectSceneChanges } from '../../../kernel/media/scenes.js';
import { defineExtractor, type BlobReference, type DocumentDraft, type ExtractorContext } from '../../../kernel/plugins.js';
import { parametersSchema, resolveParameters, type ResolvedVideoParameters } from './parameters.js';
import { mapLimit, sceneSegments, timeSegments, type TimeSpan } from './segments.js';

export const IMAGE_MODEL = 'image-descriptor';
export const KEYFRAME_EMBEDDING_DIMS = 256;
export const AUDIO_MODEL = 'log-mel-audio';
export const AUDIO_EMBEDDING_DIMS = 136;
export const OCR_MODEL = 'paddle-ocr';
/** Audio analysis rate: log-mel-audio's bands reach 8 kHz. */
export const SAMPLE_RATE = 16_000;
/** Segments handled per round of inference calls (and yielded together). */
export const SEGMENT_BATCH = 8;
/** ffmpeg processes run at once for frames and audio (each is multi-threaded already). */
const FFMPEG_PARALLEL = 2;
/** OCR reads text better from a larger frame than the stored thumbnail; capped so huge frames stay cheap. */
const OCR_MAX_SIZE = 1920;
/**
 * A long segment's sound is described from its middle 30 s: plenty for a descriptor of band statistics,
 * and it bounds the samples a batch holds and sends.
 */
const AUDIO_MAX_SECONDS = 30;
/** Length of the silent clip whose embedding stands for "no sound". */
const SILENCE_SECONDS = 0.5;

const round = (value: number, digits = 3): number => Number(value.toFixed(digits));

function checkDims(vectors: number[][], dims: number, model: string, feature: string): number[][] {
  for (const vector of vectors) {
    // The feature is declared with a fixed size; a model of another size would write vectors the index cannot hold.
    if (vector.length !== dims) throw new Error(`video_extractor: ${model} gives ${vector.length}-d vectors; ${feature} needs ${dims}`);
  }
  return vectors;
}

async function planSegments(ctx: ExtractorContext, file: string, probe: MediaProbe, params: ResolvedVideoParameters): Promise<TimeSpan[]> {
  const duration = probe.durationSeconds ?? 0;
  if (params.splitMethod === 'time') return timeSegments(duration, params.interval, params.minSceneLength, params.maxSegments);
  const cuts = await detectSceneChanges(file, { threshold: params.sceneThreshold, startSeconds: probe.startSeconds, slots: ctx.mediaProcesses });
  return sceneSegments(duration, cuts, params.minSceneLength, params.maxSegments);
}

/** The keyframe's time: the middle of the segment (away from the transitions at its edges). */
function keyframeTime(span: TimeSpan): number {
  return (span.start + span.end) / 2;
}

interface SegmentMedia {
  keyframe: Buffer;
  /** The frame OCR reads (the keyframe itself when the video is no larger than the thumbnail). */
  ocrImage: Buffer | undefined;
  /** Mono samples at SAMPLE_RATE; empty when the segment has no sound. */
  audio: Float32Array;
}

class SegmentProcessor {
  private silence: number[] | undefined;

  constructor(
    private readonly ctx: ExtractorContext,
    private readonly file: string,
    private readonly probe: MediaProbe,
    private readonly params: ResolvedVideoParameters,
  ) {}

  private get needsLargerOcrFrame(): boolean {
    const video = this.probe.video;
    return video !== null && Math.max(video.width, video.height) > this.params.thumbnailSize;
  }

  private async decodeSegment(span: TimeSpan): Promise<SegmentMedia> {
    const time = keyframeTime(span);
    const keyframe = await extractFrame(this.file, { timeSeconds: time, maxSize: this.params.thumbnailSize, format: 'jpeg', slots: this.ctx.mediaProcesses });
    let ocrImage: Buffer | undefined;
    if (this.params.enableOcr) {
      ocrImage = this.needsLargerOcrFrame
        ? await extractFrame(this.file, { timeSeconds: time, maxSize: OCR_MAX_SIZE, format: 'jpeg', jpegQuality: 2, slots: this.ctx.mediaProcesses })
        : keyframe;
    }
    let audio: Float32Array = new Float32Array(0);
    const length = span.end - span.start;
    if (this.probe.hasAudio && length > 0) {
      const seconds = Math.min(length, AUDIO_MAX_SECONDS);
      audio = await decodeAudio(this.file, {
        sampleRate: SAMPLE_RATE,
        startSeconds: span.start + (length - seconds) / 2,
        durationSeconds: seconds,
        slots: this.ctx.mediaProcesses,
      });
    }
    return { keyframe, ocrImage, audio };
  }

  private async silenceEmbedding(): Promise<number[]> {
    if (!this.silence) {
      const [result] = await this.ctx.inference.embedAudio(AUDIO_MODEL, [
        { samples: new Float32Array(Math.round(SILENCE_SECONDS * SAMPLE_RATE)), sampleRate: SAMPLE_RATE },
      ]);
      this.silence = checkDims([result?.vector ?? []], AUDIO_EMBEDDING_DIMS, AUDIO_MODEL, 'audio_embedding')[0]!;
    }
    return this.silence;
  }

  private async audioEmbeddings(media: readonly SegmentMedia[]): Promise<number[][]> {
    const withSound = media.map((m, i) => ({ i, samples: m.audio })).filter((m) => m.samples.length > 0);
    const vectors = new Array<number[]>(media.length);
    if (withSound.length > 0) {
      const results = await this.ctx.inference.embedAudio(
        AUDIO_MODEL,
        withSound.map((m) => ({ samples: m.samples, sampleRate: SAMPLE_RATE })),
      );
      const checked = checkDims(results.map((r) => r.vector), AUDIO_EMBEDDING_DIMS, AUDIO_MODEL, 'audio_embedding');
      withSound.forEach((m, k) => (vectors[m.i] = checked[k]!));
    }
    for (let i = 0; i < media.length; i++) vectors[i] ??= await this.silenceEmbedding();
    return vectors;
  }

  /** Decodes, stores and analyses one batch of segments; returns their drafts in order. */
  async process(spans: readonly TimeSpan[], firstIndex: number, count: number): Promise<DocumentDraft[]> {
    const media = await mapLimit(spans, FFMPEG_PARALLEL, (span) => this.decodeSegment(span));
    const keyframes = await Promise.all(
      media.map((m, k) => this.ctx.artifacts.save(`segment-${firstIndex + k}/keyframe.jpg`, m.keyframe, 'image/jpeg')),
    );
    // The three models are independent: with several inference workers they run side by side.
    const [imageResults, ocrResults, audioVectors] = await Promise.all([
      this.ctx.inference.embedImage(IMAGE_MODEL, media.map((m) => m.keyframe)),
      this.params.enableOcr ? this.ctx.inference.ocr(OCR_MODEL, media.map((m) => m.ocrImage!)) : Promise.resolve(undefined),
      this.audioEmbeddings(media),
    ]);
    const imageVectors = checkDims(imageResults.map((r) => r.vector), KEYFRAME_EMBEDDING_DIMS, IMAGE_MODEL, 'keyframe_embedding');
    const texts = ocrResults?.map((r) => r.text.trim());

    return spans.map((span, k): DocumentDraft => {
      const index = firstIndex + k;
      const keyframe: BlobReference = keyframes[k]!;
      return {
        key: `segment:${index}`,
        fields: {
          start_time: round(span.start),
          end_time: round(span.end),
          duration: round(span.end - span.start),
          segment_index: index,
          segment_count: count,
          split_method: this.params.splitMethod,
          keyframe,
          keyframe_time: round(keyframeTime(span)),
          width: this.probe.video?.width ?? 0,
          height: this.probe.video?.height ?? 0,
          has_audio: this.probe.hasAudio,
          ...(texts ? { ocr_text: texts[k] ?? '' } : {}),
        },
        features: { keyframe_embedding: imageVectors[k]!, audio_embedding: audioVectors[k]! },
      };
    });
  }
}

export default defineExtractor({
  name: 'video_extractor',
  version: '1.0',
  description:
    'Splits a video into segments (fixed interval or scene changes) and writes one document per segment with its time span, ' +
    'a keyframe JPEG, the text read in it (OCR), a 256-d keyframe embedding and a 136-d embedding of its audio.',
  accepts: ['video/*'],
  inputs: [
    {
      name: 'video',
      type: 'video',
      required: true,
      description: 'A blob reference to a video file in any format ffmpeg reads.',
    },
  ],
  parameters: parametersSchema,
  features: [
    { name: 'keyframe_embedding', dims: KEYFRAME_EMBEDDING_DIMS, distance: 'cosine', model: IMAGE_MODEL },
    { name: 'audio_embedding', dims: AUDIO_EMBEDDING_DIMS, distance: 'cosine', model: AUDIO_MODEL },
  ],
  fields: {
    type: 'object',
    additionalProperties: false,
    required: [
      'start_time',
      'end_time',
      'duration',
      'segment_index',
      'segment_count',
      'split_method',
      'keyframe',
      'keyframe_time',
      'width',
      'height',
      'has_audio',
    ],
    properties: {
      start_time: { type: 'number', minimum: 0, description: 'Start of the segment in seconds.' },
      end_time: { type: 'number', minimum: 0, description: 'End of the segment in seconds (exclusive).' },
      duration: { type: 'number', minimum: 0, description: 'end_time - start_time.' },
      segment_index: { type: 'integer', minimum: 0, description: 'Position of the segment, from 0.' },
      segment_count: { type: 'integer', minimum: 1, description: 'Number of segments the video gave.' },
      split_method: { type: 'string', enum: ['time', 'scene'], description: 'How the video was split.' },
      keyframe: {
        type: 'object',
        additionalProperties: false,
        required: ['storage_key', 'content_type', 'size_bytes'],
        properties: {
          storage_key: { type: 'string', minLength: 1 },
          content_type: { type: 'string' },
          size_bytes: { type: 'integer', minimum: 1 },
        },
        description: "JPEG of the segment's middle frame (longest side at most thumbnail_size), stored as an artifact.",
      },
      keyframe_time: { type: 'number', minimum: 0, description: 'Time of the keyframe in seconds.' },
      width: { type: 'integer', minimum: 0, description: 'Frame width of the video as displayed (after rotation).' },
      height: { type: 'integer', minimum: 0, description: 'Frame height of the video as displayed.' },
      has_audio: { type: 'boolean', description: 'The video has an audio track (without one, audio_embedding is that of silence).' },
      ocr_text: { type: 'string', description: 'Text read in the keyframe (only when enable_ocr).' },
    },
  },
  async *extract(ctx, input): AsyncIterable<DocumentDraft> {
    const params = resolveParameters(input.parameters);
    const media = await openMediaInput(ctx.blobs, input.fields.video, { extractor: 'video_extractor', input: 'video' });
    try {
      const probe = await probeMedia(media.path, { slots: ctx.mediaProcesses });
      if (!probe.hasVideo) {
        throw new InputError(`video_extractor: the input has no video stream (format ${probe.format})`, { format: probe.format });
      }
      const spans = await planSegments(ctx, media.path, probe, params);
      const processor = new SegmentProcessor(ctx, media.path, probe, params);
      for (let first = 0; first < spans.length; first += SEGMENT_BATCH) {
        const drafts = await processor.process(spans.slice(first, first + SEGMENT_BATCH), first, spans.length);
        yield* drafts;
      }
    } finally {
      await media.dispose();
    }
  },
});
