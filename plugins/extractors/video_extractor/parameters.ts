/**
 * video_extractor's parameters: the JSON Schema a collection's `parameters` are checked against, and
 * their resolution (defaults filled, checked again here because the extractor can be called by code that
 * skipped the collection's validation).
 */
import { Ajv } from 'ajv';
import { InputError } from '../../../kernel/errors.js';
import type { JsonSchema } from '../../../kernel/plugins.js';

export type SplitMethod = 'time' | 'scene';

export const DEFAULTS = {
  split_method: 'time' as SplitMethod,
  interval: 10,
  scene_threshold: 0.3,
  min_scene_length: 1,
  max_segments: 1000,
  enable_ocr: true,
  thumbnail_size: 640,
};

export interface VideoExtractorParameters {
  split_method?: SplitMethod;
  interval?: number;
  scene_threshold?: number;
  min_scene_length?: number;
  max_segments?: number;
  enable_ocr?: boolean;
  thumbnail_size?: number;
}

export interface ResolvedVideoParameters {
  splitMethod: SplitMethod;
  interval: number;
  sceneThreshold: number;
  minSceneLength: number;
  maxSegments: number;
  enableOcr: boolean;
  thumbnailSize: number;
}

export const parametersSchema: JsonSchema = {
  type: 'object',
  additionalProperties: false,
  properties: {
    split_method: {
      type: 'string',
      enum: ['time', 'scene'],
      default: DEFAULTS.split_method,
      description: "time: segments of `interval` seconds; scene: a new segment wherever the picture changes (see scene_threshold).",
    },
    interval: {
      type: 'number',
      minimum: 0.1,
      maximum: 3600,
      default: DEFAULTS.interval,
      description: 'Segment length in seconds for split_method time.',
    },
    scene_threshold: {
      type: 'number',
      exclusiveMinimum: 0,
      exclusiveMaximum: 1,
      default: DEFAULTS.scene_threshold,
      description: "For split_method scene: ffmpeg's scene score (0..1) above which a frame starts a new scene; lower finds more cuts.",
    },
    min_scene_length: {
      type: 'number',
      minimum: 0,
      maximum: 3600,
      default: DEFAULTS.min_scene_length,
      description:
        'Shortest segment in seconds. scene: a cut closer than this to the previous one (or to the end) is ignored, so a ' +
        'short scene joins its neighbour; time: a final piece shorter than this joins the segment before it.',
    },
    max_segments: {
      type: 'integer',
      minimum: 1,
      maximum: 10000,
      default: DEFAULTS.max_segments,
      description:
        'Most segments per video. time: the interval is widened so the video fits; scene: only the strongest cuts are kept.',
    },
    enable_ocr: {
      type: 'boolean',
      default: DEFAULTS.enable_ocr,
      description: 'Read the text in each keyframe (paddle-ocr) into ocr_text.',
    },
    thumbnail_size: {
      type: 'integer',
      minimum: 32,
      maximum: 4096,
      default: DEFAULTS.thumbnail_size,
      description: 'Longest side of the stored keyframe JPEG in pixels (smaller videos keep their size).',
    },
  },
};

const validate = new Ajv({ strict: false, allErrors: true, useDefaults: true }).compile<VideoExtractorParameters>(parametersSchema as object);

/** Checks `raw` against the schema and fills the defaults. InputError on a bad value. */
export function resolveParameters(raw: Record<string, unknown>): ResolvedVideoParameters {
  const params: unknown = structuredClone(raw);
  if (!validate(params)) {
    const problems = (validate.errors ?? []).map((e) => `${e.instancePath || '/'} ${e.message ?? 'is invalid'}`);
    throw new InputError(`video_extractor: invalid parameters: ${problems.join('; ')}`, { problems });
  }
  return {
    splitMethod: params.split_method ?? DEFAULTS.split_method,
    interval: params.interval ?? DEFAULTS.interval,
    sceneThreshold: params.scene_threshold ?? DEFAULTS.scene_threshold,
    minSceneLength: params.min_scene_length ?? DEFAULTS.min_scene_length,
    maxSegments: params.max_segments ?? DEFAULTS.max_segments,
    enableOcr: params.enable_ocr ?? DEFAULTS.enable_ocr,
    thumbnailSize: params.thumbnail_size ?? DEFAULTS.thumbnail_size,
  };
}
