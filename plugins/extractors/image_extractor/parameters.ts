/** image_extractor's parameters: the JSON Schema collections are checked against, and their resolution. */
import { Ajv } from 'ajv';
import { InputError } from '../../../kernel/errors.js';
import type { JsonSchema } from '../../../kernel/plugins.js';

export const DEFAULT_THUMBNAIL_SIZE = 256;

export interface ResolvedParameters {
  thumbnailSize: number;
  enableOcr: boolean;
}

export const parametersSchema: JsonSchema = {
  type: 'object',
  additionalProperties: false,
  properties: {
    thumbnail_size: {
      type: 'integer',
      minimum: 16,
      maximum: 2048,
      default: DEFAULT_THUMBNAIL_SIZE,
      description: 'Longest side of the JPEG thumbnail in pixels (smaller images are not enlarged).',
    },
    enable_ocr: {
      type: 'boolean',
      default: true,
      description: 'Read text in the image with the paddle-ocr model into ocr_text.',
    },
  },
};

// The extractor checks parameters itself too: it can be called by code that skipped the collection's validation.
const validate = new Ajv({ strict: false, allErrors: true, useDefaults: true }).compile<{
  thumbnail_size?: number;
  enable_ocr?: boolean;
}>(parametersSchema as object);

export function resolveParameters(raw: Record<string, unknown>): ResolvedParameters {
  const params: unknown = structuredClone(raw);
  if (!validate(params)) {
    const problems = (validate.errors ?? []).map((e) => `${e.instancePath || '/'} ${e.message ?? 'is invalid'}`);
    throw new InputError(`image_extractor: invalid parameters: ${problems.join('; ')}`, { problems });
  }
  return {
    thumbnailSize: params.thumbnail_size ?? DEFAULT_THUMBNAIL_SIZE,
    enableOcr: params.enable_ocr ?? true,
  };
}
