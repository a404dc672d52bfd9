/**
 * feature_search: vector search over the features the retriever's collections index. Each search names a
 * feature by URI (`tessera://text_extractor@1.0/text_embedding`, as the extractor catalogue lists it) and a
 * query: `text` (embedded by the feature's own model in the inference workers), `content` (an image or
 * audio clip as base64 or an http(s) URL, embedded the same way; see content.ts), `vector`, or `document`
 * (the stored vector of a document the caller can read: "more like this"). Results of one search across
 * collections are merged by score (same model, comparable scores); several searches are fused with
 * `rrf | dbsf | weighted | max`. A search may instead be lexical (`{text_search: {query, ...}}`, see
 * lexical.ts): BM25 over the collections' text fields, fused with the vector searches (hybrid search).
 * `pre_filters` run inside the index scan where the index holds the field (lineage columns and fields);
 * filters on metadata or timestamps are applied to the hydrated documents (the text index takes them all).
 * A field too large for the index's payload lets its document through the scan and is checked on the
 * document itself, so a filter never loses a document to the payload's size limit. With no searches it is a
 * pure filter.
 *
 * The caller's principal: the index payload carries the owner and the grants, so a user-scoped key's rule
 * (owner is p, or grants contain p) is part of the index filter and a selective principal still gets
 * `top_k` hits in one round. Hits are hydrated through the document source, which applies the principal rule
 * again (in SQL, or on the row in memory: its read cache, or the hit's payload where payloads are the
 * documents as last written) — defense in depth: a payload written before grants were stored, or a
 * case-insensitive pre-filter folding the principal's case, only ever over-includes — and the search is
 * widened until `top_k` visible documents are found (or the index has no more): another principal's
 * documents never come back.
 */
import { NotFoundError, InputError } from '../../../kernel/errors.js';
import { matchesFilter, parseFilter, type FilterNode, type Group, type ParsedFilter } from '../../../kernel/filters/filter.js';
import type { InferenceClient } from '../../../kernel/inference/client.js';
import { defineStage, type StageContext, type StageDocument } from '../../../kernel/plugins.js';
import { spendInference } from '../../../kernel/retrieval/budget.js';
import { conjoinFilters } from '../../../kernel/retrieval/optimizer.js';
import { filterView, INDEX_PAYLOAD_CURRENT_MARK, INDEX_PAYLOAD_OMITTED_FIELDS, type DocumentSource as DocumentSourceShape, type RetrievalFeature } from '../../../kernel/retrieval/documents.js';
import { filterDefs, filterRef } from '../../../kernel/retrieval/schemas.js';
import { DocumentSource, Inference, VectorIndex, resolve } from '../../../kernel/tokens.js';
import type { VectorHit } from '../../../kernel/vectors/vector-index.js';
import { embedQueryContent, MAX_CONTENT_CHARS, readQueryContent, type QueryMedia } from './content.js';
import { fuse, type Fusion, type RankedList } from './fusion.js';
import { lexicalHits, lexicalQuerySchema, type LexicalQuery } from './lexical.js';

export interface SearchQuery {
  text?: string;
  /** An image or audio clip: base64 (or a data: URL) or an http(s) URL (see content.ts). */
  content?: string;
  vector?: number[];
  document?: string;
}

interface SearchCommon {
  top_k?: number;
  min_score?: number;
  weight?: number;
}

/** Nearest neighbours in one feature's vector index. */
export interface VectorSearch extends SearchCommon {
  feature_uri: string;
  query: SearchQuery;
  text_search?: never;
}

/** BM25 over the collections' text fields (hybrid search when fused with vector searches). */
export interface LexicalSearch extends SearchCommon {
  text_search: LexicalQuery;
  feature_uri?: never;
  query?: never;
}

export type Search = VectorSearch | LexicalSearch;

/** The features of the stage's collections: as resolved with them, else read from the document source. */
async function featuresOf(ctx: StageContext, documents: DocumentSourceShape): Promise<RetrievalFeature[]> {
  if (ctx.collections.every((c) => c.features)) return ctx.collections.flatMap((c) => [...c.features!]);
  return documents.features(ctx.organizationId, ctx.collections.map((c) => c.collection_id));
}

function isLexical(search: Search): search is LexicalSearch {
  return search.text_search !== undefined;
}

export interface FeatureSearchParameters {
  searches?: Search[];
  fusion?: Fusion;
  rrf_k?: number;
  final_top_k?: number;
  pre_filters?: Record<string, unknown>;
}

const MAX_FETCH = 10_000;
/** Payload paths the vector index holds (processing writes them): filters on these run inside the scan. */
const INDEXED_COLUMNS = new Set(['document_id', 'collection_id', 'root_object_id', 'source_document_id', 'processing_tier', 'owner_principal']);

interface IndexFilters {
  /** What the index evaluates over its payloads. */
  index: ParsedFilter;
  /** The same filter on the hydrated document, when the index's answer can be a superset (fields it may lack). */
  exact: ParsedFilter | undefined;
}

/**
 * The filter with its fields as index payload paths, or undefined when a field is not in the payload. A
 * payload leaves out fields too large to hold beside every vector and names them
 * (INDEX_PAYLOAD_OMITTED_FIELDS): in the index, a condition on a field lets a document that lacks it through,
 * whether the condition is asserted or negated, and `exact` decides on the document itself.
 */
function toIndexFilter(filter: ParsedFilter): IndexFilters | undefined {
  let pushable = true;
  let onFields = false;
  const mapNode = (n: FilterNode): FilterNode => {
    if (n.kind === 'group') return mapGroup(n);
    const [root, ...rest] = n.field.split('.');
    if (INDEXED_COLUMNS.has(n.field)) return n;
    onFields = true;
    if (root === 'fields' && rest.length > 0) return n;
    if (root === 'metadata' || root === 'created_at' || root === 'updated_at' || root === 'source_collection_id' || root === 'namespace_id') {
      pushable = false;
      return n;
    }
    return { ...n, field: `fields.${n.field}` };
  };
  const mapGroup = (g: Group): Group => ({ kind: 'group', and: g.and.map(mapNode), or: g.or.map(mapNode), not: g.not.map(mapNode) });
  const exact = mapGroup(filter.root);
  if (!pushable) return undefined;
  if (!onFields) return { index: { root: exact, caseSensitive: filter.caseSensitive }, exact: undefined };
  // The payload left the field out, or is older than payloads that say so.
  const lacks = (field: string): FilterNode => ({
    kind: 'group', and: [], not: [],
    or: [
      { kind: 'condition', field: INDEX_PAYLOAD_OMITTED_FIELDS, operator: 'contains', value: field.split('.')[1]! },
      { kind: 'condition', field: INDEX_PAYLOAD_CURRENT_MARK, operator: 'exists', value: false },
    ],
  });
  // Under an odd number of NOTs a condition is negated: `c and not lacks` negates to `not c or lacks`.
  const widen = (n: FilterNode, negated: boolean): FilterNode => {
    if (n.kind === 'group') return { kind: 'group', and: n.and.map((x) => widen(x, negated)), or: n.or.map((x) => widen(x, negated)), not: n.not.map((x) => widen(x, !negated)) };
    if (!n.field.startsWith('fields.')) return n;
    return negated ? { kind: 'group', and: [n], or: [], not: [lacks(n.field)] } : { kind: 'group', and: [], or: [n, lacks(n.field)], not: [] };
  };
  return { index: { root: widen(exact, false) as Group, caseSensitive: filter.caseSensitive }, exact: { root: exact, caseSensitive: filter.caseSensitive } };
}

function andFilters(a: ParsedFilter | undefined, b: ParsedFilter | undefined): ParsedFilter | undefined {
  if (!a) return b;
  if (!b) return a;
  return { root: { kind: 'group', and: [a.root, b.root], or: [], not: [] }, caseSensitive: a.caseSensitive && b.caseSensitive };
}

/** What a user-scoped key may read, as an index filter over the payload's `owner_principal` and `grants`. */
function visibleTo(principalId: string): ParsedFilter {
  return {
    root: {
      kind: 'group',
      and: [],
      or: [
        { kind: 'condition', field: 'owner_principal', operator: 'eq', value: principalId },
        { kind: 'condition', field: 'grants', operator: 'contains', value: principalId },
      ],
      not: [],
    },
    caseSensitive: true,
  };
}

function restrictTo(ids: readonly string[]): ParsedFilter {
  return { root: { kind: 'group', and: [{ kind: 'condition', field: 'document_id', operator: 'in', value: [...ids] }], or: [], not: [] }, caseSensitive: true };
}

/** A vector search's filters: in the index, and on the hydrated documents after it. */
interface SearchFilters {
  index: ParsedFilter | undefined;
  /** The pre-filter on the document's payload paths, where the index's answer may be a superset. */
  exact: ParsedFilter | undefined;
  /** A pre-filter the index cannot evaluate, on the document's filter view. */
  after: ParsedFilter | undefined;
}

class Searcher {
  private readonly documents: DocumentSourceShape;
  private readonly embedded = new Map<string, number[]>();
  /** Each search's content, read (fetched, decoded) once however many collections it runs over. */
  private readonly contents = new Map<number, QueryMedia>();

  constructor(private readonly ctx: StageContext) {
    this.documents = resolve(ctx.container, DocumentSource);
  }

  private inference(): InferenceClient {
    return resolve(this.ctx.container, Inference);
  }

  /** The query's vector for one feature (text is embedded once per model). */
  async vectorFor(search: VectorSearch, feature: RetrievalFeature, index: number): Promise<number[] | undefined> {
    const q = search.query;
    if (q.vector) {
      if (q.vector.length !== feature.dims) {
        throw new InputError(`searches[${index}]: the vector has ${q.vector.length} dimensions, feature '${search.feature_uri}' has ${feature.dims}`);
      }
      return q.vector;
    }
    if (q.text !== undefined) {
      if (feature.task !== null && feature.task !== 'embed_text') {
        throw new InputError(`searches[${index}]: feature '${search.feature_uri}' is computed by '${feature.model}' (${feature.task}), which does not embed text`);
      }
      const cached = this.embedded.get(feature.model);
      if (cached) return cached;
      // Refused before the call when it would pass max_inference_calls (or max_credits, or the deadline).
      spendInference(this.ctx.budget, 1);
      const [vector] = await this.inference().embedText(feature.model, [q.text]);
      if (!vector) throw new InputError(`model '${feature.model}' returned no vector`);
      this.embedded.set(feature.model, vector);
      return vector;
    }
    if (q.content !== undefined) {
      const where = `searches[${index}].query.content`;
      const key = `content:${index}:${feature.model}`;
      const cached = this.embedded.get(key);
      if (cached) return cached;
      let media = this.contents.get(index);
      if (!media) {
        media = await readQueryContent(this.ctx, q.content, where);
        this.contents.set(index, media);
      }
      spendInference(this.ctx.budget, 1);
      const vector = await embedQueryContent(this.inference(), feature, media, where);
      this.embedded.set(key, vector);
      return vector;
    }
    // `document`: its stored vector in this feature's index (when it is in this collection).
    const [record] = await resolve(this.ctx.container, VectorIndex).get(feature.index, [q.document!]).catch((err: unknown) => {
      if (err instanceof NotFoundError) return [];
      throw err;
    });
    return record ? Array.from(record.vector) : undefined;
  }

  /** Top hits of one feature index, visible to the caller and passing the filters, best first. */
  async searchIndex(
    feature: RetrievalFeature, vector: number[], topK: number, minScore: number | undefined, filters: SearchFilters, candidateIds: ReadonlySet<string> | undefined,
  ) {
    const vectors = resolve(this.ctx.container, VectorIndex);
    // The hits' payloads when the document source can answer from them (else it reads the documents).
    const payloads = this.documents.answersFromIndexPayloads === true;
    const { index: indexFilter, exact, after } = filters;
    let fetch = topK;
    for (;;) {
      let hits: VectorHit[];
      try {
        hits = await vectors.search(feature.index, { vector, limit: fetch, payloads, ...(indexFilter ? { filter: indexFilter } : {}) });
      } catch (err) {
        // A collection without documents yet has no index: nothing to find there.
        if (err instanceof NotFoundError) return [];
        throw err;
      }
      const scored = minScore === undefined ? hits : hits.filter((h) => h.score >= minScore);
      const indexPayloads = payloads ? new Map(scored.flatMap((h) => (h.payload ? [[h.id, h.payload] as const] : []))) : undefined;
      const docs = await this.documents.getByIds(this.ctx.organizationId, [feature.collection_id], scored.map((h) => h.id), this.ctx.principalId, indexPayloads);
      const byId = new Map(docs.map((d) => [d.document_id, d]));
      const passes = (doc: StageDocument) => (!after || matchesFilter(after, filterView(doc))) && (!exact || matchesFilter(exact, doc.payload ?? {}));
      const kept = scored
        // Candidates too many to restrict in the index are checked here, inside the widening: top_k is still exact.
        .filter((h) => byId.has(h.id) && (!candidateIds || candidateIds.has(h.id)) && passes(byId.get(h.id)!))
        .map((h) => ({ id: h.id, score: h.score, doc: byId.get(h.id)! }));
      const exhausted = hits.length < fetch || scored.length < hits.length || fetch >= MAX_FETCH;
      if (kept.length >= topK || exhausted) return kept.slice(0, topK);
      fetch = Math.min(MAX_FETCH, fetch * 4);
    }
  }
}

export default defineStage<FeatureSearchParameters>({
  id: 'feature_search',
  version: '1.0',
  type: 'filter',
  description:
    'Vector and hybrid search over the collections: each search is either a vector search (feature_uri and a query: text, ' +
    'content (an image or audio clip as base64 or an http(s) URL), vector, or a document id) or a lexical one (text_search: BM25 with the text_search stage\'s query, fields, k1, b), with top_k, ' +
    'min_score and weight; several searches are fused (rrf, dbsf, weighted, max) into final_top_k documents. ' +
    'pre_filters (the attribute filter language) and a user-scoped key\'s principal restrict every search inside its index. ' +
    'Without searches it only filters.',
  parameters: {
    type: 'object',
    additionalProperties: false,
    $defs: filterDefs,
    properties: {
      searches: {
        type: 'array',
        maxItems: 16,
        items: {
          type: 'object',
          additionalProperties: false,
          description: 'A vector search (feature_uri + query) or a lexical search (text_search), never both.',
          // Exactly one kind; a vector search needs both its feature and its query.
          oneOf: [{ required: ['feature_uri'] }, { required: ['text_search'] }],
          dependencies: { feature_uri: ['query'], query: ['feature_uri'] },
          properties: {
            feature_uri: { type: 'string', pattern: '^[a-z][a-z0-9+.-]*://[^@/\\s]+@[^/\\s]+/.+$', maxLength: 300 },
            query: {
              type: 'object',
              minProperties: 1,
              maxProperties: 1,
              additionalProperties: false,
              properties: {
                text: { type: 'string', minLength: 1, maxLength: 10_000 },
                content: {
                  type: 'string',
                  minLength: 1,
                  maxLength: MAX_CONTENT_CHARS,
                  description: 'An image or audio clip, as base64 (or a data: URL) or an http(s) URL, embedded by the feature\'s own model.',
                },
                vector: { type: 'array', minItems: 1, maxItems: 16_000, items: { type: 'number' } },
                document: { type: 'string', minLength: 1, maxLength: 100 },
              },
            },
            text_search: lexicalQuerySchema,
            top_k: { type: 'integer', minimum: 1, maximum: 1000, default: 10 },
            min_score: { type: 'number' },
            weight: { type: 'number', minimum: 0, default: 1 },
          },
        },
      },
      fusion: { enum: ['rrf', 'dbsf', 'weighted', 'max'], default: 'rrf' },
      rrf_k: { type: 'integer', minimum: 1, maximum: 10_000, default: 60 },
      final_top_k: { type: 'integer', minimum: 1, maximum: 10_000 },
      pre_filters: filterRef,
    },
  },
  cost: (params) => params.searches?.length ?? 0,
  optimizer: {
    // Without searches it is a pure filter: a filter after it may join pre_filters, unless final_top_k cuts
    // the first stage's read before that filter would have run.
    absorbFollowingFilter: (params, filter, at) => {
      if ((params.searches?.length ?? 0) > 0 || (at.first && params.final_top_k !== undefined)) return undefined;
      const pre = conjoinFilters(params.pre_filters, filter);
      return pre ? { ...params, pre_filters: pre as Record<string, unknown> } : undefined;
    },
    // After a reading filter, searches rank exactly the filter's matches (restricted in the index, or checked
    // while widening): the same as searching the collections with the filter as a pre-filter.
    absorbSourceFilter: (params, filter) => {
      if ((params.searches?.length ?? 0) === 0) return undefined;
      const pre = conjoinFilters(params.pre_filters, filter);
      return pre ? { ...params, pre_filters: pre as Record<string, unknown> } : undefined;
    },
    // Hits (and fused hits) come best first, equal scores by document_id: what sort_relevance (desc) does.
    outputOrder: (params) => ((params.searches?.length ?? 0) > 0 ? 'relevance:desc' : undefined),
  },
  estimateOutput: (params, input, at) => {
    const searches = params.searches ?? [];
    const available = at.first ? at.source : input;
    if (searches.length === 0) return params.final_top_k !== undefined && at.first ? Math.min(available, params.final_top_k) : available;
    const perSearch = Math.max(...searches.map((s) => s.top_k ?? 10));
    return Math.min(available, params.final_top_k ?? perSearch, searches.reduce((n, s) => n + (s.top_k ?? 10), 0));
  },
  async run(ctx, docs, params) {
    const documents = resolve(ctx.container, DocumentSource);
    const filter = params.pre_filters ? parseFilter(params.pre_filters, ['parameters', 'pre_filters']) : undefined;
    const searches = params.searches ?? [];
    const collectionIds = ctx.collections.map((c) => c.collection_id);
    const candidates = ctx.stageIndex === 0 ? undefined : docs;

    if (searches.length === 0) {
      if (candidates) return filter ? candidates.filter((d) => matchesFilter(filter, filterView(d))) : candidates;
      // `final_top_k` asks for a cut; without it, more matches than can be returned is an error, never a silent cut.
      const limit = params.final_top_k ?? MAX_FETCH;
      const found = await documents.list({ organizationId: ctx.organizationId, collectionIds, principalId: ctx.principalId, ...(filter ? { filter } : {}), limit: params.final_top_k ?? MAX_FETCH + 1 });
      if (found.length > limit) throw new InputError(`more than ${MAX_FETCH} documents match pre_filters; narrow them or set final_top_k`);
      return found;
    }
    if (candidates && candidates.length === 0) return [];

    const features = searches.some((s) => !isLexical(s)) ? await featuresOf(ctx, documents) : [];
    const pushed = filter ? toIndexFilter(filter) : undefined;
    const afterFilter = filter && !pushed ? filter : undefined;
    // After an earlier stage, only its documents are ranked (in the index when the list is small).
    const within = candidates && candidates.length <= 1000 ? restrictTo(candidates.map((d) => d.document_id)) : undefined;
    const candidateIds = candidates ? new Set(candidates.map((d) => d.document_id)) : undefined;
    const indexFilter = andFilters(andFilters(pushed?.index, within), ctx.principalId ? visibleTo(ctx.principalId) : undefined);
    const filters: SearchFilters = { index: indexFilter, exact: pushed?.exact, after: afterFilter };

    const searcher = new Searcher(ctx);
    const hydrated = new Map<string, StageDocument>();
    const lists: RankedList[] = [];
    for (const [i, search] of searches.entries()) {
      const topK = search.top_k ?? 10;
      if (isLexical(search)) {
        // The text index takes the whole filter language, so every pre_filter applies before top_k.
        const hits = await lexicalHits(ctx, search.text_search, topK, search.min_score, { collectionIds, filter, candidateIds: candidates?.map((d) => d.document_id) });
        for (const h of hits) hydrated.set(h.id, h.doc);
        lists.push({ weight: search.weight ?? 1, hits });
        continue;
      }
      const matching = features.filter((f) => f.feature_uri === search.feature_uri);
      if (matching.length === 0) {
        const known = [...new Set(features.map((f) => f.feature_uri))].join(', ') || 'none';
        throw new InputError(`searches[${i}]: no collection of this retriever indexes '${search.feature_uri}' (they index: ${known})`);
      }
      if (search.query.document !== undefined) {
        const [visible] = await documents.getByIds(ctx.organizationId, collectionIds, [search.query.document], ctx.principalId);
        if (!visible) throw new InputError(`searches[${i}]: document '${search.query.document}' is not in the retriever's collections`);
      }
      const merged: Array<{ id: string; score: number; doc: StageDocument }> = [];
      for (const feature of matching) {
        const vector = await searcher.vectorFor(search, feature, i);
        if (!vector) continue;
        const hits = await searcher.searchIndex(feature, vector, topK, search.min_score, filters, within ? undefined : candidateIds);
        merged.push(...hits);
      }
      merged.sort((a, b) => b.score - a.score || (a.id < b.id ? -1 : 1));
      const top = merged.slice(0, topK);
      for (const h of top) hydrated.set(h.id, h.doc);
      lists.push({ weight: search.weight ?? 1, hits: top });
    }

    const finalTopK = params.final_top_k ?? Math.max(...searches.map((s) => s.top_k ?? 10));
    // One search: its own similarity is the score; several: the fused score.
    const ranked = lists.length === 1 ? lists[0]!.hits : fuse(lists, params.fusion ?? 'rrf', params.rrf_k ?? 60);
    return ranked.slice(0, finalTopK).map((h) => {
      const doc = hydrated.get(h.id)!;
      return { ...doc, score: h.score };
    });
  },
});
