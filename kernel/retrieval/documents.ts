/**
 * The seam between retrieval and the documents it reads. Plugins never import each other, so the
 * collections plugin publishes its documents and feature indexes through `DocumentSource` (bound as the
 * kernel token of the same name), and retriever stages read them only through it. Every read takes the
 * caller's principal: a user-scoped key's filter is applied in the query itself, never afterwards.
 */
import { readDotted, type ParsedFilter } from '../filters/filter.js';
import type { RetrievalCollection, StageDocument } from '../plugins.js';
import type { Distance } from '../vectors/vector-index.js';

/** One feature a collection's documents carry a vector for, and where those vectors are indexed. */
export interface RetrievalFeature {
  collection_id: string;
  /** The output field holding the vector (after the extractor's output_mapping). */
  feature: string;
  /** `tessera://<extractor>@<version>/<output>`, as the extractor catalogue lists it. */
  feature_uri: string;
  extractor: string;
  extractor_version: string;
  /** The vector index the collection's processing writes this feature to. */
  index: string;
  dims: number;
  distance: Distance;
  /** The model that computed the vectors (queries must be embedded by the same one). */
  model: string;
  /** What the model embeds (`embed_text` for text features), when the registry knows the model. */
  task: string | null;
}

export interface DocumentSort {
  /** A document field path (`fields.x`, a bare field name, `metadata.x`, `created_at`, ...). */
  field: string;
  direction: 'asc' | 'desc';
}

export interface DocumentListQuery {
  organizationId: string;
  collectionIds: readonly string[];
  /** Set for user-scoped keys: only documents this principal owns or was granted. */
  principalId: string | null;
  filter?: ParsedFilter;
  sort?: readonly DocumentSort[];
  limit: number;
}

export interface DocumentVectorQuery {
  organizationId: string;
  /** The collections whose features a `feature_uri` is looked up in (a RetrievalFeature names its own). */
  collectionIds: readonly string[];
  /** A `feature_uri` (each of the collections indexing it is read) or one collection's feature. */
  feature: string | RetrievalFeature;
  documentIds: readonly string[];
  /** Set for user-scoped keys: documents this principal may not read give no vector. */
  principalId: string | null;
}

/**
 * The key of a vector payload listing the document's fields it leaves out (too large to hold beside every
 * vector). A filter evaluated in the index lets such a document through on those fields; the exact filter
 * then runs on the document itself.
 */
export const INDEX_PAYLOAD_OMITTED_FIELDS = 'omitted_fields';
/**
 * A payload key every payload written since payloads name what they leave out has. One without it (an
 * index written before) may lack any field: a filter in the index lets it through, and the exact filter decides.
 */
export const INDEX_PAYLOAD_CURRENT_MARK = 'updated_at';

export interface DocumentSource {
  /**
   * The collections named by id or name, in the namespace, in the order given (duplicates removed). A name
   * that matches nothing is a NotFoundError naming it.
   */
  resolveCollections(organizationId: string, namespaceId: string, identifiers: readonly string[]): Promise<RetrievalCollection[]>;
  /** Documents of the collections matching the filter (pushed into the query), sorted, at most `limit`. */
  list(query: DocumentListQuery): Promise<StageDocument[]>;
  /** How many documents `list` would give without a limit, counted up to `limit` (no rows read out). */
  count(query: Omit<DocumentListQuery, 'sort'>): Promise<number>;
  /**
   * These documents (unknown, foreign or invisible ones are absent), in the order of `documentIds`.
   * `indexPayloads`: the payloads a feature index returned with these ids, which the source may answer
   * from instead of reading the documents, when `answersFromIndexPayloads` says they are current.
   */
  getByIds(
    organizationId: string, collectionIds: readonly string[], documentIds: readonly string[], principalId: string | null,
    indexPayloads?: ReadonlyMap<string, Record<string, unknown>>,
  ): Promise<StageDocument[]>;
  /**
   * True when the payloads feature indexes return with their hits are the documents as last written (this
   * process writes every document): a search then asks the index for them and passes them to `getByIds`.
   */
  readonly answersFromIndexPayloads?: boolean;
  /**
   * The stored vectors of these documents for one feature, by document id. Documents without a vector
   * for it, unknown ones and ones the principal may not read are absent; a feature no collection indexes
   * gives an empty map.
   */
  vectors(query: DocumentVectorQuery): Promise<Map<string, number[]>>;
  /** The features the collections' own extractors write vectors for. */
  features(organizationId: string, collectionIds: readonly string[]): Promise<RetrievalFeature[]>;
}

/**
 * The record a document is filtered and sorted on in process, with the same field paths the SQL filter
 * reads: a bare name is a field (`category` = `fields.category`), `fields.x` and `metadata.x` address those
 * objects, and the lineage columns and timestamps are top level.
 */
export function filterView(doc: StageDocument): Record<string, unknown> {
  const payload = doc.payload ?? {};
  const fields = (payload.fields ?? {}) as Record<string, unknown>;
  return {
    ...fields,
    ...payload,
    fields,
    metadata: payload.metadata ?? {},
    document_id: doc.document_id,
    collection_id: doc.collection_id ?? payload.collection_id,
    score: doc.score,
  };
}

/**
 * The value at a dotted path of a document's filter view (`price`, `fields.price`, `metadata.a.b`, `score`),
 * or undefined when any step is missing. Every in-process stage reads fields through this one function, so
 * a path means the same thing in a filter, a sort, a group key and a deduplication key.
 */
export function readPath(doc: StageDocument, path: string): unknown {
  return readDotted(filterView(doc), path);
}

/**
 * A string equal for equal JSON values (object keys in any order) and different for different ones
 * (`1` is not `"1"`): the key documents are grouped or deduplicated by. Missing and null are both `null`.
 */
export function valueKey(value: unknown): string {
  return JSON.stringify(canonical(value)) ?? 'null';
}

function canonical(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(canonical);
  if (value && typeof value === 'object') {
    const record = value as Record<string, unknown>;
    return Object.fromEntries(Object.keys(record).sort().map((k) => [k, canonical(record[k])]));
  }
  return value === undefined ? null : value;
}
