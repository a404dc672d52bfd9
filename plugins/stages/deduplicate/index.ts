/**
 * deduplicate, in one of two modes (the input is in rank order, so "first" is the highest ranked):
 *
 * - by fields (`fields`): keeps the first document of each combination of values of `fields`. A document
 *   with none of the fields (each missing or null) has no key and is always kept; otherwise a missing field
 *   counts as null. Values compare as JSON (`1` is not `"1"`, strings are case-sensitive, objects equal
 *   whatever their key order).
 * - by embedding (`feature_uri`, `threshold`): walks the documents in rank order and drops each one whose
 *   stored vector for the feature has cosine similarity ≥ `threshold` with a document already kept. A
 *   document without a vector for the feature cannot be compared and is kept. Each document is compared with
 *   the kept ones only, so the work is at most n²/2 similarities: the mode refuses more than
 *   MAX_EMBEDDING_INPUT documents (put a `limit` before it) rather than silently skip some.
 */
import { InputError } from '../../../kernel/errors.js';
import { defineStage, type StageContext, type StageDocument } from '../../../kernel/plugins.js';
import { readPath, valueKey } from '../../../kernel/retrieval/documents.js';
import { fieldPathSchema } from '../../../kernel/retrieval/schemas.js';
import { cosineOfUnits, pause, SIMILARITY_SLICE, unitVectorsOf } from '../../../kernel/retrieval/similarity.js';

export interface DeduplicateByFields {
  fields: string[];
  feature_uri?: never;
  threshold?: never;
}

export interface DeduplicateByEmbedding {
  feature_uri: string;
  /** Default 0.95. */
  threshold?: number;
  fields?: never;
}

export type DeduplicateParameters = DeduplicateByFields | DeduplicateByEmbedding;

export const MAX_EMBEDDING_INPUT = 2000;
export const DEFAULT_THRESHOLD = 0.95;

function byFields(docs: StageDocument[], fields: readonly string[]): StageDocument[] {
  const seen = new Set<string>();
  return docs.filter((doc) => {
    const values = fields.map((field) => readPath(doc, field));
    if (values.every((v) => v === undefined || v === null)) return true;
    const key = valueKey(values);
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
}

async function byEmbedding(ctx: StageContext, docs: StageDocument[], params: DeduplicateByEmbedding): Promise<StageDocument[]> {
  if (docs.length === 0) return [];
  if (docs.length > MAX_EMBEDDING_INPUT) {
    throw new InputError(
      `deduplicate by embedding compares every pair of documents: it takes at most ${MAX_EMBEDDING_INPUT}, got ${docs.length} (put a limit stage before it)`,
      { documents: docs.length, max: MAX_EMBEDDING_INPUT },
    );
  }
  const threshold = params.threshold ?? DEFAULT_THRESHOLD;
  const vectors = await unitVectorsOf(ctx, params.feature_uri, docs);
  const kept: Float64Array[] = [];
  let work = 0;
  const out: StageDocument[] = [];
  for (const doc of docs) {
    const vector = vectors.get(doc.document_id);
    if (!vector) {
      out.push(doc);
      continue;
    }
    work += kept.length;
    if (work >= SIMILARITY_SLICE) {
      work = 0;
      await pause();
    }
    if (kept.some((other) => cosineOfUnits(vector, other) >= threshold)) continue;
    kept.push(vector);
    out.push(doc);
  }
  return out;
}

export default defineStage<DeduplicateParameters>({
  id: 'deduplicate',
  version: '1.0',
  type: 'filter',
  description:
    'Removes duplicates, keeping the first (highest ranked) of each. Either by `fields` (field paths): documents with the same values ' +
    'are duplicates, documents with none of the fields (missing or null) are kept. Or by embedding (`feature_uri`, `threshold`, default 0.95): ' +
    `a document whose vector has cosine similarity ≥ threshold with a kept document is a duplicate; documents without a vector are kept; at most ${MAX_EMBEDDING_INPUT} input documents.`,
  parameters: {
    type: 'object',
    additionalProperties: false,
    description: 'Exactly one mode: `fields`, or `feature_uri` (with an optional `threshold`).',
    oneOf: [
      { title: 'by fields', required: ['fields'], not: { anyOf: [{ required: ['feature_uri'] }, { required: ['threshold'] }] } },
      { title: 'by embedding', required: ['feature_uri'], not: { required: ['fields'] } },
    ],
    properties: {
      fields: { type: 'array', minItems: 1, maxItems: 20, uniqueItems: true, items: fieldPathSchema, description: 'By fields: the field paths whose values make the key.' },
      feature_uri: {
        type: 'string',
        pattern: '^[a-z][a-z0-9+.-]*://[^@/\\s]+@[^/\\s]+/.+$',
        maxLength: 300,
        description: 'By embedding: the feature whose stored vectors are compared (tessera://extractor@version/output).',
      },
      threshold: {
        type: 'number',
        minimum: -1,
        maximum: 1,
        description: `By embedding: cosine similarity at or above which two documents are duplicates (default ${DEFAULT_THRESHOLD}).`,
      },
    },
  },
  async run(ctx, docs, params) {
    if (params.fields) return byFields(docs, params.fields);
    return byEmbedding(ctx, docs, params as DeduplicateByEmbedding);
  },
});
