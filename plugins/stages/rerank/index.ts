/**
 * rerank: reorders the incoming documents by a `rerank` model that scores each (query, passage) pair in the
 * inference workers (gRPC): the offline `lexical-reranker` by default, or an ONNX cross-encoder from
 * TESSERA_MODEL_DIR. The passage is the document's `text_fields` joined by new lines (default: every
 * string field of the document, by name).
 *
 * - Only the first `max_candidates` documents are scored; the rest follow unscored, in their incoming order.
 * - A document without text in those fields is not sent to the model: `missing_text: last` (default)
 *   keeps it after the scored ones, without a score; `drop` removes it.
 * - The rerank score becomes `score`; the incoming one is kept in the payload under
 *   `original_score_field` (null: not kept). Equal scores keep their incoming order.
 * - `top_k` cuts the result.
 * - Each model call of up to `batch_size` passages counts as one inference call: when the calls needed
 *   would pass `max_inference_calls` (or the deadline has passed) the stage makes none and the execution
 *   stops as budget_exceeded with the documents found before it.
 *
 * It never adds a document: it reorders and cuts what it is given, so another principal's documents
 * cannot appear. As the first stage of a pipeline it has nothing to rerank and returns nothing.
 */
import { InputError } from '../../../kernel/errors.js';
import { defineStage, type StageDocument } from '../../../kernel/plugins.js';
import { spendInference } from '../../../kernel/retrieval/budget.js';
import { readPath } from '../../../kernel/retrieval/documents.js';
import { Inference, resolve } from '../../../kernel/tokens.js';

export interface RerankParameters {
  query: string;
  model?: string;
  text_fields?: string[];
  top_k?: number;
  max_candidates?: number;
  batch_size?: number;
  missing_text?: 'last' | 'drop';
  original_score_field?: string | null;
}

export const DEFAULT_RERANK_MODEL = 'lexical-reranker';
const DEFAULTS = { max_candidates: 100, batch_size: 32 } as const;
/** Longest passage sent to a model (characters): cross-encoders truncate far earlier; bounds the messages. */
export const MAX_PASSAGE_CHARS = 16_000;
/** Batches in flight at once (the client spreads them over the workers). */
const CONCURRENCY = 4;

function textOf(value: unknown): string | undefined {
  if (typeof value === 'string') return value;
  if (Array.isArray(value)) {
    const parts = value.filter((v): v is string => typeof v === 'string' && v.trim().length > 0);
    return parts.length > 0 ? parts.join('\n') : undefined;
  }
  return undefined;
}

/** The passage a document gives the model, or undefined when its fields hold no text. */
export function passageOf(doc: StageDocument, textFields: readonly string[] | undefined): string | undefined {
  let parts: string[];
  if (textFields) {
    parts = textFields.map((path) => textOf(readPath(doc, path))).filter((t): t is string => t !== undefined);
  } else {
    const fields = (doc.payload?.fields ?? {}) as Record<string, unknown>;
    parts = Object.keys(fields)
      .sort()
      .map((name) => fields[name])
      .filter((v): v is string => typeof v === 'string');
  }
  const passage = parts.map((p) => p.trim()).filter((p) => p.length > 0).join('\n');
  if (passage.length === 0) return undefined;
  if (passage.length <= MAX_PASSAGE_CHARS) return passage;
  const cut = passage.slice(0, MAX_PASSAGE_CHARS);
  // Never end on half a surrogate pair.
  return /[\uD800-\uDBFF]$/.test(cut) ? cut.slice(0, -1) : cut;
}

const callsFor = (count: number, batchSize: number) => Math.ceil(count / batchSize);

export default defineStage<RerankParameters>({
  id: 'rerank',
  version: '1.0',
  type: 'sort',
  description:
    'Reorders the incoming documents by a rerank model scoring each (query, passage) pair in the inference workers: ' +
    '`lexical-reranker` (offline: term weighting, phrase and proximity) by default, or an ONNX cross-encoder from TESSERA_MODEL_DIR. ' +
    'The passage is the document\'s text_fields joined (default every string field). The first max_candidates documents are scored ' +
    '(batch_size per model call, each one inference call); documents without text come last (or are dropped); top_k cuts the result.',
  parameters: {
    type: 'object',
    additionalProperties: false,
    required: ['query'],
    properties: {
      query: { type: 'string', minLength: 1, maxLength: 4096, description: 'The text documents are ranked against, usually {{inputs.query}}.' },
      model: { type: 'string', pattern: '^[a-z][a-z0-9_-]{1,63}$', default: DEFAULT_RERANK_MODEL, description: 'A model with task rerank.' },
      text_fields: {
        type: 'array',
        minItems: 1,
        maxItems: 16,
        uniqueItems: true,
        items: { type: 'string', minLength: 1, maxLength: 200 },
        description: 'Document field paths forming the passage (text, fields.title, metadata.summary); default every string field.',
      },
      top_k: { type: 'integer', minimum: 1, maximum: 10_000, description: 'Documents returned (default all).' },
      max_candidates: { type: 'integer', minimum: 1, maximum: 1000, default: DEFAULTS.max_candidates, description: 'Incoming documents scored; later ones follow unscored.' },
      batch_size: { type: 'integer', minimum: 1, maximum: 64, default: DEFAULTS.batch_size, description: 'Passages per model call (one inference call each).' },
      missing_text: { enum: ['last', 'drop'], default: 'last', description: 'Documents without text: after the scored ones (no score), or dropped.' },
      original_score_field: {
        type: ['string', 'null'],
        pattern: '^[A-Za-z_][A-Za-z0-9_]{0,63}$',
        default: 'original_score',
        description: 'Payload field keeping the incoming score (null: not kept).',
      },
    },
  },
  // Credits: at most one per model call.
  cost: (params) => callsFor(params.max_candidates ?? DEFAULTS.max_candidates, params.batch_size ?? DEFAULTS.batch_size),
  async run(ctx, docs, params) {
    if (docs.length === 0) return [];
    const batchSize = params.batch_size ?? DEFAULTS.batch_size;
    const window = docs.slice(0, params.max_candidates ?? DEFAULTS.max_candidates);
    const rest = docs.slice(window.length);
    const scorable: Array<{ doc: StageDocument; passage: string; rank: number }> = [];
    const textless: StageDocument[] = [];
    window.forEach((doc, rank) => {
      const passage = passageOf(doc, params.text_fields);
      if (passage === undefined) textless.push(doc);
      else scorable.push({ doc, passage, rank });
    });

    const scores: number[] = new Array<number>(scorable.length);
    if (scorable.length > 0) {
      const batches: Array<{ start: number; passages: string[] }> = [];
      for (let start = 0; start < scorable.length; start += batchSize) {
        batches.push({ start, passages: scorable.slice(start, start + batchSize).map((s) => s.passage) });
      }
      // All or nothing: a rerank that would pass the budget makes no call at all.
      spendInference(ctx.budget, batches.length);
      const inference = resolve(ctx.container, Inference);
      const model = params.model ?? DEFAULT_RERANK_MODEL;
      let next = 0;
      const lanes = Array.from({ length: Math.min(CONCURRENCY, batches.length) }, async () => {
        while (next < batches.length) {
          const batch = batches[next++]!;
          const got = await inference.rerank(model, params.query, batch.passages);
          if (got.length !== batch.passages.length) throw new InputError(`rerank model '${model}' returned ${got.length} scores for ${batch.passages.length} passages`);
          got.forEach((score, i) => (scores[batch.start + i] = score));
        }
      });
      await Promise.all(lanes);
    }

    const keep = params.original_score_field === undefined ? 'original_score' : params.original_score_field;
    const rescored = scorable
      .map((s, i) => ({ ...s, score: scores[i]! }))
      .sort((a, b) => b.score - a.score || a.rank - b.rank)
      .map(({ doc, score }) => withScore(doc, score, keep));
    const unscored = [...(params.missing_text === 'drop' ? [] : textless), ...rest].map((doc) => withScore(doc, undefined, keep));
    const out = [...rescored, ...unscored];
    return params.top_k === undefined ? out : out.slice(0, params.top_k);
  },
});

/** The document with its new score (none: unscored), the incoming one kept in the payload when asked. */
function withScore(doc: StageDocument, score: number | undefined, keepAs: string | null): StageDocument {
  const { score: original, ...rest } = doc;
  const payload = keepAs && original !== undefined ? { ...(doc.payload ?? {}), [keepAs]: original } : doc.payload;
  return { ...rest, ...(payload !== undefined ? { payload } : {}), ...(score !== undefined ? { score } : {}) };
}
