/**
 * text_extractor's parameters: the JSON Schema a collection's `parameters` are checked against, and the
 * resolution of the defaults that depend on one another (a chunk size's unit depends on `split_by`,
 * which JSON Schema `default` cannot express).
 */
import { Ajv } from 'ajv';
import { InputError } from '../../../kernel/errors.js';
import type { JsonSchema } from '../../../kernel/plugins.js';
import type { SplitBy } from './chunking.js';

export const DEFAULT_MODEL = 'hashed-ngram-text';
export const DEFAULT_SPLIT_BY: SplitBy = 'words';
export const DEFAULT_MAX_CHARS = 2_000_000;
export const DEFAULT_MIN_CHUNK_CHARS = 1;

/** Default `chunk_size` per unit: roughly 1,000–1,500 characters of prose whichever unit is chosen. */
export const DEFAULT_CHUNK_SIZE: Readonly<Record<SplitBy, number>> = {
  characters: 1000,
  words: 200,
  sentences: 5,
  paragraphs: 3,
};

/** Default overlap: a tenth of the chunk size, rounded down (words 20, characters 100, sentences and paragraphs 0). */
export function defaultOverlap(chunkSize: number): number {
  return Math.floor(chunkSize / 10);
}

export interface TextExtractorParameters {
  split_by?: SplitBy;
  chunk_size?: number;
  chunk_overlap?: number;
  model?: string;
  max_chars?: number;
  min_chunk_chars?: number;
}

export interface ResolvedParameters {
  splitBy: SplitBy;
  chunkSize: number;
  chunkOverlap: number;
  model: string;
  maxChars: number;
  minChunkChars: number;
}

export const parametersSchema: JsonSchema = {
  type: 'object',
  additionalProperties: false,
  properties: {
    split_by: {
      type: 'string',
      enum: ['characters', 'words', 'sentences', 'paragraphs'],
      default: DEFAULT_SPLIT_BY,
      description:
        'Unit of chunk_size and chunk_overlap. characters: user-perceived characters; words: whitespace-separated words ' +
        '(CJK and Thai split into dictionary words), never cut; sentences: ended by . ! ? … (abbreviations and initials ' +
        'do not end one); paragraphs: separated by blank lines.',
    },
    chunk_size: {
      type: 'integer',
      minimum: 1,
      maximum: 1_000_000,
      description: 'Units per chunk. Default by split_by: characters 1000, words 200, sentences 5, paragraphs 3.',
    },
    chunk_overlap: {
      type: 'integer',
      minimum: 0,
      maximum: 999_999,
      description: 'Units shared by consecutive chunks; must be less than chunk_size. Default: floor(chunk_size / 10).',
    },
    model: {
      type: 'string',
      minLength: 1,
      maxLength: 200,
      default: DEFAULT_MODEL,
      description: 'Text embedding model served by the inference workers (an embed_text model, e.g. an ONNX model from TESSERA_MODEL_DIR); the feature takes its dimensions.',
    },
    max_chars: {
      type: 'integer',
      minimum: 1,
      maximum: 100_000_000,
      default: DEFAULT_MAX_CHARS,
      description: 'Longest text processed (UTF-16 code units); longer texts are cut and their documents marked truncated.',
    },
    min_chunk_chars: {
      type: 'integer',
      minimum: 1,
      maximum: 1_000_000,
      default: DEFAULT_MIN_CHUNK_CHARS,
      description: 'Chunks with fewer non-whitespace characters are dropped (whitespace-only chunks always are).',
    },
  },
};

// Compiled once: the schema is a constant, and the extractor must reject bad parameters itself too,
// because it can be called by code that skipped the collection's validation.
const validate = new Ajv({ strict: false, allErrors: true, useDefaults: true }).compile<TextExtractorParameters>(parametersSchema as object);

/** Checks `raw` against the schema and fills every default. InputError on a bad value. */
export function resolveParameters(raw: Record<string, unknown>): ResolvedParameters {
  const params: unknown = structuredClone(raw);
  if (!validate(params)) {
    const problems = (validate.errors ?? []).map((e) => `${e.instancePath || '/'} ${e.message ?? 'is invalid'}`);
    throw new InputError(`text_extractor: invalid parameters: ${problems.join('; ')}`, { problems });
  }
  const splitBy = params.split_by ?? DEFAULT_SPLIT_BY;
  const chunkSize = params.chunk_size ?? DEFAULT_CHUNK_SIZE[splitBy];
  const chunkOverlap = params.chunk_overlap ?? defaultOverlap(chunkSize);
  if (chunkOverlap >= chunkSize) {
    throw new InputError(`text_extractor: chunk_overlap (${chunkOverlap}) must be less than chunk_size (${chunkSize})`, {
      chunk_size: chunkSize,
      chunk_overlap: chunkOverlap,
    });
  }
  return {
    splitBy,
    chunkSize,
    chunkOverlap,
    model: params.model ?? DEFAULT_MODEL,
    maxChars: params.max_chars ?? DEFAULT_MAX_CHARS,
    minChunkChars: params.min_chunk_chars ?? DEFAULT_MIN_CHUNK_CHARS,
  };
}
