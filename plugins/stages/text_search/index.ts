/**
 * text_search: BM25 over the retriever's collections' text fields (see kernel/text). Each collection's
 * own statistics give idf and the average field length; the query language has words (any of them),
 * "phrases", prefixes (`pre*`) and +must / -must-not. A user-scoped key only ever gets documents its
 * principal owns or was granted: the text index checks that inside its query, before top_k.
 *
 * Documents come back as `{document_id, collection_id, score, payload}`, their payload read through the
 * DocumentSource (which applies the principal rule again).
 */
import { defineStage, type StageContext, type StageDocument } from '../../../kernel/plugins.js';
import { bm25Search, DEFAULT_BM25, MAX_QUERY_CHARS } from '../../../kernel/text/index.js';
import { DocumentSource, resolve } from '../../../kernel/tokens.js';

export interface TextSearchParameters {
  query: string;
  fields?: string[];
  field_weights?: Record<string, number>;
  k1?: number;
  b?: number;
  top_k?: number;
  min_score?: number;
}

export const MAX_TOP_K = 1000;

export default defineStage<TextSearchParameters>({
  id: 'text_search',
  version: '1.0.0',
  type: 'filter',
  description:
    'Full-text search with BM25 (k1, b) over chosen text fields, with "phrases", prefix* queries and +must / -must-not; ' +
    "idf comes from each collection's own statistics. Returns the top_k documents by score; as a later stage it ranks " +
    'only the documents the previous stage passed on.',
  parameters: {
    type: 'object',
    additionalProperties: false,
    required: ['query'],
    properties: {
      query: {
        type: 'string',
        minLength: 1,
        maxLength: MAX_QUERY_CHARS,
        description: 'Words (any of them), "quoted phrases", prefix* and +must / -mustnot clauses; e.g. `{{inputs.q}}`.',
      },
      fields: {
        type: 'array',
        items: { type: 'string', minLength: 1, maxLength: 128 },
        minItems: 1,
        maxItems: 32,
        uniqueItems: true,
        description: "Text fields to search (e.g. text, ocr_text). Default: every text field of the collections' documents.",
      },
      field_weights: {
        type: 'object',
        additionalProperties: { type: 'number', minimum: 0, maximum: 100 },
        description: 'Multiplies the BM25 score of a field (1 when absent); scores of the fields are summed.',
      },
      k1: { type: 'number', minimum: 0, maximum: 10, default: DEFAULT_BM25.k1, description: 'Term-frequency saturation.' },
      b: { type: 'number', minimum: 0, maximum: 1, default: DEFAULT_BM25.b, description: 'Length normalization (0 none, 1 full).' },
      top_k: { type: 'integer', minimum: 1, maximum: MAX_TOP_K, default: 10, description: 'Documents returned at most.' },
      min_score: { type: 'number', minimum: 0, description: 'Drop documents scoring below this.' },
    },
  },
  // BM25 hits come best first, equal scores by document_id: sort_relevance (desc) after it changes nothing.
  optimizer: { outputOrder: () => 'relevance:desc' },
  estimateOutput: (params, input, at) => Math.min(params.top_k ?? 10, at.first ? at.source : input),
  async run(ctx: StageContext, docs: StageDocument[], params: TextSearchParameters): Promise<StageDocument[]> {
    // Like feature_search: the first stage searches the collections, a later one ranks what it was given.
    const withinInput = ctx.stageIndex > 0;
    if (withinInput && docs.length === 0) return [];
    const hits = await bm25Search(ctx, {
      collectionIds: ctx.collections.map((c) => c.collection_id),
      query: params.query,
      ...(params.fields ? { fields: params.fields } : {}),
      ...(params.field_weights ? { fieldWeights: params.field_weights } : {}),
      k1: params.k1 ?? DEFAULT_BM25.k1,
      b: params.b ?? DEFAULT_BM25.b,
      limit: params.top_k ?? 10,
      ...(params.min_score !== undefined ? { minScore: params.min_score } : {}),
      principalId: ctx.principalId,
      ...(withinInput ? { documentIds: docs.map((d) => d.document_id) } : {}),
    });
    if (hits.length === 0) return [];
    const documents = await resolve(ctx.container, DocumentSource).getByIds(
      ctx.organizationId,
      [...new Set(hits.map((hit) => hit.collection_id))],
      hits.map((hit) => hit.document_id),
      ctx.principalId,
    );
    const byId = new Map(documents.map((doc) => [doc.document_id, doc]));
    // Score order is BM25's; a document deleted between the index read and this one is simply gone.
    return hits
      .filter((hit) => byId.has(hit.document_id))
      .map((hit) => ({ ...byId.get(hit.document_id)!, collection_id: hit.collection_id, score: hit.score }));
  },
});
