/**
 * audio_extractor: decodes an audio (or video) object's first audio track with ffmpeg to mono 16 kHz,
 * cuts it into fixed-length segments (optionally overlapping) and writes one document per segment with
 * its time span, level (RMS and dBFS) and a 136-d `audio_embedding` from the log-mel-audio model.
 *
 * The track is decoded as a stream and segments are embedded in batches as they complete, so memory
 * stays at about one batch of segments whatever the length. Documents are yielded once the track has
 * ended, because each carries `segment_count`, known only then (what is held meanwhile is small: the
 * fields and one vector per segment). Keys are `segment:<index>`: decoding and cutting are deterministic,
 * so a re-run replaces rather than duplicates.
 */
import { streamAudio } from '../../../kernel/media/audio.js';
import { openMediaInput } from '../../../kernel/media/media-input.js';
import { probeMedia } from '../../../kernel/media/probe.js';
import { defineExtractor, type DocumentDraft, type ExtractorContext } from '../../../kernel/plugins.js';
import { parametersSchema, resolveParameters } from './parameters.js';
import { AudioSegmenter, rms, toDbfs, type AudioSegment } from './segmenter.js';

export const AUDIO_MODEL = 'log-mel-audio';
export const AUDIO_EMBEDDING_DIMS = 136;
/** log-mel-audio accepts any rate from 8 kHz; 16 kHz covers its 8 kHz top band and is the rate it prepares for. */
export const SAMPLE_RATE = 16_000;
/** Segments per embedAudio call, and samples per call (~8 MB on the wire), whichever is reached first. */
export const EMBED_MAX_CLIPS = 16;
export const EMBED_MAX_SAMPLES = 2_000_000;

const round = (value: number, digits: number): number => Number(value.toFixed(digits));

interface PendingDocument {
  index: number;
  fields: Record<string, unknown>;
  vector: number[];
}

async function embedBatch(ctx: ExtractorContext, segments: readonly AudioSegment[]): Promise<number[][]> {
  const results = await ctx.inference.embedAudio(
    AUDIO_MODEL,
    segments.map((s) => ({ samples: s.samples, sampleRate: SAMPLE_RATE })),
  );
  if (results.length !== segments.length) {
    throw new Error(`audio_extractor: ${AUDIO_MODEL} returned ${results.length} vectors for ${segments.length} segments`);
  }
  return results.map(({ vector }) => {
    // The feature is declared with a fixed size; a model of another size would write vectors the index cannot hold.
    if (vector.length !== AUDIO_EMBEDDING_DIMS) {
      throw new Error(`audio_extractor: ${AUDIO_MODEL} gives ${vector.length}-d vectors; audio_embedding needs ${AUDIO_EMBEDDING_DIMS}`);
    }
    return vector;
  });
}

function fieldsOf(segment: AudioSegment): Record<string, unknown> {
  const level = rms(segment.samples);
  return {
    start_time: round(segment.start / SAMPLE_RATE, 3),
    end_time: round(segment.end / SAMPLE_RATE, 3),
    duration: round((segment.end - segment.start) / SAMPLE_RATE, 3),
    segment_index: segment.index,
    sample_rate: SAMPLE_RATE,
    rms: round(level, 6),
    loudness_db: round(toDbfs(level), 2),
  };
}

export default defineExtractor({
  name: 'audio_extractor',
  version: '1.0',
  description:
    'Cuts the audio track of an audio or video object into fixed-length, optionally overlapping segments and writes one ' +
    'document per segment with its time span, loudness and a 136-d log-mel audio embedding.',
  accepts: ['audio/*', 'video/*'],
  inputs: [
    {
      name: 'audio',
      type: 'audio',
      required: true,
      description: 'A blob reference to an audio file (or a video, whose first audio track is used); any format ffmpeg reads.',
    },
  ],
  parameters: parametersSchema,
  features: [{ name: 'audio_embedding', dims: AUDIO_EMBEDDING_DIMS, distance: 'cosine', model: AUDIO_MODEL }],
  fields: {
    type: 'object',
    additionalProperties: false,
    required: ['start_time', 'end_time', 'duration', 'segment_index', 'segment_count', 'sample_rate', 'rms', 'loudness_db'],
    properties: {
      start_time: { type: 'number', minimum: 0, description: 'Start of the segment in seconds from the start of the track.' },
      end_time: { type: 'number', minimum: 0, description: 'End of the segment in seconds (exclusive).' },
      duration: { type: 'number', minimum: 0, description: 'end_time - start_time.' },
      segment_index: { type: 'integer', minimum: 0, description: 'Position of the segment, from 0.' },
      segment_count: { type: 'integer', minimum: 1, description: 'Number of segments the track gave.' },
      sample_rate: { type: 'integer', minimum: 1, description: 'Rate (Hz) the audio was decoded at for analysis.' },
      rms: { type: 'number', minimum: 0, description: 'Root mean square level of the segment, full scale = 1.' },
      loudness_db: {
        type: 'number',
        maximum: 0.01,
        description: 'RMS level in dBFS (0 = full-scale square wave; digital silence reads -120).',
      },
    },
  },
  async *extract(ctx, input): AsyncIterable<DocumentDraft> {
    const params = resolveParameters(input.parameters);
    const media = await openMediaInput(ctx.blobs, input.fields.audio, { extractor: 'audio_extractor', input: 'audio' });
    try {
      const probe = await probeMedia(media.path, { measureDuration: false, slots: ctx.mediaProcesses });
      if (!probe.hasAudio) {
        // A silent video (or a picture) is not an error for a collection that also gets audio: it gives no segments.
        ctx.log.info({ objectId: input.objectId, format: probe.format }, 'audio_extractor: the input has no audio stream; no segments');
        return;
      }
      const segmenter = new AudioSegmenter({
        length: Math.round(params.segmentLength * SAMPLE_RATE),
        hop: Math.round(params.hop * SAMPLE_RATE),
        minLength: Math.round(params.minSegment * SAMPLE_RATE),
      });
      const documents: PendingDocument[] = [];
      let batch: AudioSegment[] = [];
      let batchSamples = 0;
      const flush = async (): Promise<void> => {
        if (batch.length === 0) return;
        const vectors = await embedBatch(ctx, batch);
        batch.forEach((segment, i) => documents.push({ index: segment.index, fields: fieldsOf(segment), vector: vectors[i]! }));
        batch = [];
        batchSamples = 0;
      };
      const add = async (segments: readonly AudioSegment[]): Promise<void> => {
        for (const segment of segments) {
          if (batch.length > 0 && (batch.length >= EMBED_MAX_CLIPS || batchSamples + segment.samples.length > EMBED_MAX_SAMPLES)) await flush();
          batch.push(segment);
          batchSamples += segment.samples.length;
        }
      };

      for await (const block of streamAudio(media.path, { sampleRate: SAMPLE_RATE, slots: ctx.mediaProcesses })) await add(segmenter.push(block));
      await add(segmenter.finish());
      await flush();

      for (const doc of documents) {
        yield {
          key: `segment:${doc.index}`,
          fields: { ...doc.fields, segment_count: documents.length },
          features: { audio_embedding: doc.vector },
        };
      }
    } finally {
      await media.dispose();
    }
  },
});
