/**
 * The lexical search of a hybrid feature_search: `{text_search: {query, fields, field_weights, k1, b},
 * top_k, min_score, weight}`. The inner object takes the text_search stage's own parameters (same names,
 * same meaning), so a text_search stage moves into a feature_search unchanged. It runs BM25 over the
 * retriever's collections through kernel/text, with pre_filters, the caller's principal and the earlier
 * stage's documents applied inside the text index before top_k is cut, and gives one ranked list to fuse.
 */
import type { ParsedFilter } from '../../../kernel/filters/filter.js';
import type { StageContext, StageDocument } from '../../../kernel/plugins.js';
import { bm25Search, DEFAULT_BM25, MAX_QUERY_CHARS } from '../../../kernel/text/index.js';
import { DocumentSource, resolve } from '../../../kernel/tokens.js';

export interface LexicalQuery {
  query: string;
  fields?: string[];
  field_weights?: Record<string, number>;
  k1?: number;
  b?: number;
}

export const lexicalQuerySchema = {
  type: 'object',
  required: ['query'],
  additionalProperties: false,
  description: 'A BM25 search (the text_search stage\'s parameters): fused with the vector searches by rank (rrf) or normalized score (dbsf).',
  properties: {
    query: { type: 'string', minLength: 1, maxLength: MAX_QUERY_CHARS, description: 'Words (any of them), "quoted phrases", prefix* and +must / -mustnot clauses.' },
    fields: { type: 'array', items: { type: 'string', minLength: 1, maxLength: 128 }, minItems: 1, maxItems: 32, uniqueItems: true, description: 'Text fields to search; default every text field.' },
    field_weights: { type: 'object', additionalProperties: { type: 'number', minimum: 0, maximum: 100 } },
    k1: { type: 'number', minimum: 0, maximum: 10, default: DEFAULT_BM25.k1 },
    b: { type: 'number', minimum: 0, maximum: 1, default: DEFAULT_BM25.b },
  },
} as const;

export interface LexicalScope {
  collectionIds: readonly string[];
  filter: ParsedFilter | undefined;
  /** Set after an earlier stage: only these documents may match. */
  candidateIds: readonly string[] | undefined;
}

/** The best `topK` documents by BM25 the caller may see, hydrated, best first (score: BM25, ≥ 0). */
export async function lexicalHits(
  ctx: StageContext,
  lexical: LexicalQuery,
  topK: number,
  minScore: number | undefined,
  scope: LexicalScope,
): Promise<Array<{ id: string; score: number; doc: StageDocument }>> {
  const hits = await bm25Search(ctx, {
    collectionIds: scope.collectionIds,
    query: lexical.query,
    ...(lexical.fields ? { fields: lexical.fields } : {}),
    ...(lexical.field_weights ? { fieldWeights: lexical.field_weights } : {}),
    k1: lexical.k1 ?? DEFAULT_BM25.k1,
    b: lexical.b ?? DEFAULT_BM25.b,
    limit: topK,
    ...(minScore !== undefined ? { minScore } : {}),
    principalId: ctx.principalId,
    ...(scope.filter ? { filter: scope.filter } : {}),
    ...(scope.candidateIds ? { documentIds: scope.candidateIds } : {}),
  });
  if (hits.length === 0) return [];
  // Read through the DocumentSource, which applies the principal rule again (defense in depth).
  const docs = await resolve(ctx.container, DocumentSource).getByIds(
    ctx.organizationId,
    [...new Set(hits.map((h) => h.collection_id))],
    hits.map((h) => h.document_id),
    ctx.principalId,
  );
  const byId = new Map(docs.map((d) => [d.document_id, d]));
  return hits.filter((h) => byId.has(h.document_id)).map((h) => ({ id: h.document_id, score: h.score, doc: byId.get(h.document_id)! }));
}
