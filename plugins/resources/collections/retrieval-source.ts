/**
 * The collections plugin's side of the retrieval seam (kernel/retrieval/documents.ts): documents of the
 * collections a retriever runs over, read with the caller's principal filter in the SQL itself, and the
 * features those collections index (the same index names processing writes to).
 */
import type { Knex } from 'knex';
import { withDates, type DatabaseHandle, type JsonRead } from '../../../kernel/db/database.js';
import { deepFreeze } from '../../../kernel/db/local-read-cache.js';
import { rowsById, rowsByIdSql } from '../../../kernel/db/rows-by-id.js';
import { NotFoundError } from '../../../kernel/errors.js';
import { whereFilter } from '../../../kernel/filters/sql.js';
import type { PluginRegistry, RetrievalCollection, StageDocument } from '../../../kernel/plugins.js';
import type { DocumentListQuery, DocumentSource, DocumentVectorQuery, RetrievalFeature } from '../../../kernel/retrieval/documents.js';
import { featureIndexName } from '../../../kernel/vectors/naming.js';
import type { Distance, VectorIndex } from '../../../kernel/vectors/vector-index.js';
import { resolveDocumentField, type DocumentRow } from './document-store.js';
import type { DocumentReadCache } from './document-cache.js';
import { documentView } from './document-view.js';
import type { CollectionRow, CollectionStore } from './store.js';
import { documentFromPayload } from './vector-payload.js';

const FIELD = /^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z0-9_]+)*$/;
/** Ids per `IN (...)` list: keeps statements small whatever a stage asks for. */
const ID_CHUNK = 1000;

/** The document as a read by this caller returns it, as the payload stages see. */
function toStageDocument(row: DocumentRow, viewer: string | null): StageDocument {
  return { document_id: row.document_id, collection_id: row.collection_id, payload: documentView(row, viewer) };
}

// Through the primary key first (kernel/db/rows-by-id.ts), then the organization and collections.
const BY_IDS = `${rowsByIdSql('documents', 'document_id', '$3::text[]')} where organization_id = $1 and collection_id = any($2::text[])`;
/** Documents by id (a search's hits): prepared once on the embedded database, see JsonRead. */
const DOCUMENTS_BY_IDS: JsonRead = { name: 'documents_by_ids', parameterTypes: ['text', 'text[]', 'text[]'], sql: BY_IDS };
/** The same for a user-scoped key: only documents the principal owns or was granted. */
const VISIBLE_DOCUMENTS_BY_IDS: JsonRead = {
  name: 'visible_documents_by_ids',
  parameterTypes: ['text', 'text[]', 'text[]', 'text', 'text'],
  sql: `${BY_IDS} and (owner_principal = $4 or grants @> $5::jsonb)`,
};

/** `visible()`'s condition for a row in memory: the principal owns the document or was granted it. */
function visibleTo(row: DocumentRow, principalId: string | null): boolean {
  return principalId === null || row.owner_principal === principalId || (Array.isArray(row.grants) && row.grants.includes(principalId));
}

export class CollectionDocumentSource implements DocumentSource {
  private readonly db: Knex;

  constructor(
    private readonly database: DatabaseHandle,
    private readonly collections: CollectionStore,
    private readonly plugins: PluginRegistry,
    private readonly vectorIndex: VectorIndex,
    private readonly cache: DocumentReadCache,
  ) {
    this.db = database.db;
  }

  private readonly featuresByRow = new WeakMap<CollectionRow, RetrievalFeature[]>();

  async resolveCollections(organizationId: string, namespaceId: string, identifiers: readonly string[]): Promise<RetrievalCollection[]> {
    const out = new Map<string, RetrievalCollection>();
    for (const identifier of identifiers) {
      const row = await this.collections.findDefinition(organizationId, namespaceId, identifier);
      if (!row) throw new NotFoundError(`Collection '${identifier}' not found in this namespace`, { collection: identifier });
      out.set(row.collection_id, { collection_id: row.collection_id, collection_name: row.collection_name, namespace_id: row.namespace_id, features: this.featuresOf(row) });
    }
    return [...out.values()];
  }

  private visible(q: Knex.QueryBuilder, principalId: string | null): void {
    if (principalId) q.where((w) => w.where({ owner_principal: principalId }).orWhereRaw('grants @> ?::jsonb', [JSON.stringify([principalId])]));
  }

  async list(query: DocumentListQuery): Promise<StageDocument[]> {
    if (query.collectionIds.length === 0 || query.limit < 1) return [];
    const q = this.db<DocumentRow>('documents').where({ organization_id: query.organizationId }).whereIn('collection_id', [...query.collectionIds]);
    whereFilter(q, query.filter, resolveDocumentField);
    this.visible(q, query.principalId);
    for (const sort of query.sort ?? []) {
      if (!FIELD.test(sort.field)) throw new Error(`unsafe sort field '${sort.field}' reached the document source`);
      const resolved = resolveDocumentField(sort.field)!;
      q.orderByRaw(`${resolved.expr} ${sort.direction === 'desc' ? 'desc nulls last' : 'asc nulls last'}`);
    }
    // Ties (and unsorted reads) in a stable order, so the same request gives the same documents.
    q.orderBy('document_id', 'asc').limit(query.limit);
    return ((await q) as DocumentRow[]).map((row) => toStageDocument(row, query.principalId));
  }

  async count(query: Omit<DocumentListQuery, 'sort'>): Promise<number> {
    if (query.collectionIds.length === 0 || query.limit < 1) return 0;
    const matching = this.db('documents').select(this.db.raw('1')).where({ organization_id: query.organizationId }).whereIn('collection_id', [...query.collectionIds]);
    whereFilter(matching, query.filter, resolveDocumentField);
    this.visible(matching, query.principalId);
    const [row] = (await this.db.count({ n: '*' }).from(matching.limit(query.limit).as('matching'))) as Array<{ n: number | string }>;
    return Number(row?.n ?? 0);
  }

  /** The payloads of vector hits are the documents as last written when this process writes them all (the read cache's condition). */
  get answersFromIndexPayloads(): boolean {
    return this.cache.enabled;
  }

  async getByIds(
    organizationId: string, collectionIds: readonly string[], documentIds: readonly string[], principalId: string | null,
    indexPayloads?: ReadonlyMap<string, Record<string, unknown>>,
  ): Promise<StageDocument[]> {
    if (collectionIds.length === 0 || documentIds.length === 0) return [];
    const byId = new Map<string, StageDocument>();
    const wanted = new Set(collectionIds);
    const missing: string[] = [];
    const fromPayloads = indexPayloads !== undefined && this.cache.enabled;
    for (const id of new Set(documentIds)) {
      // A payload is not kept in the cache: it was read before the cache's generation could be noted.
      const row = this.cache.get(id) ?? (fromPayloads ? documentFromPayload(indexPayloads.get(id)) : undefined);
      if (row === undefined || row.document_id !== id) missing.push(id);
      // The same conditions as the query below, on the row in memory.
      else if (row.organization_id === organizationId && wanted.has(row.collection_id) && visibleTo(row, principalId)) byId.set(id, toStageDocument(row, principalId));
    }
    const generation = this.cache.mark();
    for (let i = 0; i < missing.length; i += ID_CHUNK) {
      // Arrays as parameters (not IN lists): one statement whatever the count, prepared once.
      const ids = missing.slice(i, i + ID_CHUNK);
      const rows = principalId
        ? await this.database.readJson(VISIBLE_DOCUMENTS_BY_IDS, [organizationId, [...collectionIds], ids, principalId, JSON.stringify([principalId])])
        : await this.database.readJson(DOCUMENTS_BY_IDS, [organizationId, [...collectionIds], ids]);
      for (const json of rows) {
        const row = withDates<DocumentRow>(json);
        byId.set(row.document_id, toStageDocument(row, principalId));
        if (this.cache.enabled) this.cache.keep(generation, row);
      }
    }
    return documentIds.flatMap((id) => (byId.has(id) ? [byId.get(id)!] : []));
  }

  async vectors(query: DocumentVectorQuery): Promise<Map<string, number[]>> {
    const out = new Map<string, number[]>();
    if (query.documentIds.length === 0) return out;
    const features =
      typeof query.feature === 'string'
        ? (await this.features(query.organizationId, query.collectionIds)).filter((f) => f.feature_uri === query.feature)
        : [query.feature];
    if (features.length === 0) return out;
    const unique = [...new Set(query.documentIds)];
    for (let i = 0; i < unique.length; i += ID_CHUNK) {
      // Which of these documents the caller may read, and in which collection: the principal rule in SQL.
      const q = rowsById<DocumentRow>(this.db, 'documents', 'document_id', unique.slice(i, i + ID_CHUNK))
        .select('document_id', 'collection_id')
        .where({ organization_id: query.organizationId })
        .whereIn('collection_id', [...new Set(features.map((f) => f.collection_id))]);
      this.visible(q, query.principalId);
      const visible = (await q) as Array<Pick<DocumentRow, 'document_id' | 'collection_id'>>;
      for (const feature of features) {
        const ids = visible.filter((row) => row.collection_id === feature.collection_id).map((row) => row.document_id);
        if (ids.length === 0) continue;
        const records = await this.vectorIndex.get(feature.index, ids).catch((err: unknown) => {
          // A feature nothing was written to yet has no index: no vectors.
          if (err instanceof NotFoundError) return [];
          throw err;
        });
        for (const record of records) out.set(record.id, Array.from(record.vector));
      }
    }
    return out;
  }

  async features(organizationId: string, collectionIds: readonly string[]): Promise<RetrievalFeature[]> {
    const out: RetrievalFeature[] = [];
    for (const collectionId of collectionIds) {
      const row = await this.collections.findById(organizationId, collectionId);
      if (row) out.push(...this.featuresOf(row));
    }
    return out;
  }

  /** The collection's own extractors' features (a chained collection's parent features are the parent's). */
  private featuresOf(row: CollectionRow): RetrievalFeature[] {
    // A row kept in memory (frozen) is asked for its features by every execute: work them out once.
    if (!Object.isFrozen(row)) return this.computeFeatures(row);
    let features = this.featuresByRow.get(row);
    if (!features) this.featuresByRow.set(row, (features = deepFreeze(this.computeFeatures(row))));
    return features;
  }

  private computeFeatures(row: CollectionRow): RetrievalFeature[] {
    return row.feature_extractors.flatMap((config) => {
      const extractor = this.plugins.extractors.get(config.feature_extractor_name);
      if (!extractor) return [];
      const mapping = config.output_mapping as Record<string, string> | undefined;
      return extractor.features.map((feature): RetrievalFeature => {
        const output = mapping?.[feature.name] ?? feature.name;
        // The output schema recorded, at creation, the model and dims the collection was built with.
        const recorded = (row.output_schema.properties?.[output] as { 'x-feature'?: { dims?: number; distance?: Distance; model?: string } } | undefined)?.['x-feature'];
        const model = recorded?.model ?? feature.model;
        return {
          collection_id: row.collection_id,
          feature: output,
          feature_uri: `tessera://${extractor.name}@${config.version}/${feature.name}`,
          extractor: extractor.name,
          extractor_version: config.version,
          index: featureIndexName(row.collection_id, output),
          dims: recorded?.dims ?? feature.dims,
          distance: recorded?.distance ?? feature.distance,
          model,
          task: this.plugins.models.get(model)?.task ?? null,
        };
      });
    });
  }
}
