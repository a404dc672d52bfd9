/**
 * audio_extractor's parameters: the JSON Schema a collection's `parameters` are checked against, and
 * their resolution into sample counts (`hop` defaults to `segment_length`, which JSON Schema's
 * `default` cannot express).
 */
import { Ajv } from 'ajv';
import { InputError } from '../../../kernel/errors.js';
import type { JsonSchema } from '../../../kernel/plugins.js';

export const DEFAULT_SEGMENT_LENGTH = 10;
export const DEFAULT_MIN_SEGMENT = 1;
/** Longest segment: one clip travels to the inference worker in one message. */
export const MAX_SEGMENT_LENGTH = 300;

export interface AudioExtractorParameters {
  segment_length?: number;
  hop?: number;
  min_segment?: number;
}

export interface ResolvedAudioParameters {
  segmentLength: number;
  hop: number;
  minSegment: number;
}

export const parametersSchema: JsonSchema = {
  type: 'object',
  additionalProperties: false,
  properties: {
    segment_length: {
      type: 'number',
      minimum: 0.1,
      maximum: MAX_SEGMENT_LENGTH,
      default: DEFAULT_SEGMENT_LENGTH,
      description: 'Length of each segment in seconds (the last one may be shorter).',
    },
    hop: {
      type: 'number',
      minimum: 0.1,
      maximum: 3600,
      description:
        'Seconds from one segment start to the next. Default: segment_length (back to back); smaller overlaps, larger leaves gaps.',
    },
    min_segment: {
      type: 'number',
      minimum: 0,
      maximum: MAX_SEGMENT_LENGTH,
      default: DEFAULT_MIN_SEGMENT,
      description: 'A final segment shorter than this many seconds is dropped (a recording shorter than one segment is always kept).',
    },
  },
};

const validate = new Ajv({ strict: false, allErrors: true, useDefaults: true }).compile<AudioExtractorParameters>(parametersSchema as object);

/** Checks `raw` against the schema and fills the defaults. InputError on a bad value. */
export function resolveParameters(raw: Record<string, unknown>): ResolvedAudioParameters {
  const params: unknown = structuredClone(raw);
  if (!validate(params)) {
    const problems = (validate.errors ?? []).map((e) => `${e.instancePath || '/'} ${e.message ?? 'is invalid'}`);
    throw new InputError(`audio_extractor: invalid parameters: ${problems.join('; ')}`, { problems });
  }
  const segmentLength = params.segment_length ?? DEFAULT_SEGMENT_LENGTH;
  return {
    segmentLength,
    hop: params.hop ?? segmentLength,
    minSegment: params.min_segment ?? DEFAULT_MIN_SEGMENT,
  };
}
