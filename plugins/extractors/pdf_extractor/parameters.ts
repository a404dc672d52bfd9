/** pdf_extractor's parameters: the JSON Schema collections are checked against, and their resolution. */
import { Ajv } from 'ajv';
import { InputError } from '../../../kernel/errors.js';
import type { JsonSchema } from '../../../kernel/plugins.js';

export const DEFAULT_MAX_PAGES = 500;

export interface ResolvedParameters {
  ocrScannedPages: boolean;
  maxPages: number;
}

export const parametersSchema: JsonSchema = {
  type: 'object',
  additionalProperties: false,
  properties: {
    ocr_scanned_pages: {
      type: 'boolean',
      default: true,
      description: 'Pages without a text layer (scans) are read by OCR (paddle-ocr) from the pictures painted on them.',
    },
    max_pages: {
      type: 'integer',
      minimum: 1,
      maximum: 100_000,
      default: DEFAULT_MAX_PAGES,
      description: 'Only the first max_pages pages are processed; page_count still gives the whole document.',
    },
  },
};

// The extractor checks parameters itself too: it can be called by code that skipped the collection's validation.
const validate = new Ajv({ strict: false, allErrors: true, useDefaults: true }).compile<{
  ocr_scanned_pages?: boolean;
  max_pages?: number;
}>(parametersSchema as object);

export function resolveParameters(raw: Record<string, unknown>): ResolvedParameters {
  const params: unknown = structuredClone(raw);
  if (!validate(params)) {
    const problems = (validate.errors ?? []).map((e) => `${e.instancePath || '/'} ${e.message ?? 'is invalid'}`);
    throw new InputError(`pdf_extractor: invalid parameters: ${problems.join('; ')}`, { problems });
  }
  return {
    ocrScannedPages: params.ocr_scanned_pages ?? true,
    maxPages: params.max_pages ?? DEFAULT_MAX_PAGES,
  };
}
