/** Collection rows, always within one organization (and namespace, for names). */
import type { Knex } from 'knex';
import type { DatabaseNotices } from '../../../kernel/db/database.js';
import { deepFreeze, LocalReadCache } from '../../../kernel/db/local-read-cache.js';
import { CROSS_PROCESS_TTL_MS, type CrossProcessNotices } from '../../../kernel/db/pg-notices.js';
import type { components } from '../../../generated/openapi.js';

type Schemas = components['schemas'];

export interface CollectionRow {
  collection_id: string;
  organization_id: string;
  namespace_id: string;
  collection_name: string;
  description: string | null;
  /** Normalised: `bucket_id` / `collection_id` always hold ids, never names. */
  source: Schemas['CollectionSource'];
  feature_extractors: Array<Schemas['FeatureExtractorConfig'] & { version: string }>;
  taxonomy_applications: Array<Schemas['TaxonomyApplication']>;
  enabled: boolean;
  metadata: Record<string, unknown>;
  document_handling: Schemas['DocumentHandling'];
  cache_config: Schemas['CollectionCacheConfig'];
  source_lineage: Array<Schemas['SourceLineageEntry']>;
  output_schema: { properties: Record<string, unknown> };
  status: 'DONE' | 'PROCESSING' | 'FAILED';
  document_count: number;
  created_by: string | null;
  created_at: Date;
  updated_at: Date;
}

const JSON_COLUMNS = [
  'source', 'feature_extractors', 'taxonomy_applications', 'metadata', 'document_handling', 'cache_config',
  'source_lineage', 'output_schema',
] as const;

function toColumns(row: Partial<CollectionRow>): Record<string, unknown> {
  const out: Record<string, unknown> = { ...row };
  for (const column of JSON_COLUMNS) if (column in out) out[column] = JSON.stringify(out[column]);
  return out;
}

export class CollectionStore {
  /** Rows by (organization, namespace, name or id) for `findDefinition`, kept while this process is the only writer. */
  private readonly definitions: LocalReadCache<CollectionRow>;

  constructor(private readonly db: Knex, options: { onlyWriter: boolean; notices?: DatabaseNotices; crossProcess?: CrossProcessNotices } = { onlyWriter: false }) {
    this.definitions = new LocalReadCache({
      enabled: options.onlyWriter, maxEntries: 10_000, shared: { name: 'collections', notices: options.notices },
      ...(options.crossProcess ? { crossProcess: { name: 'collections', notices: options.crossProcess, ttlMs: CROSS_PROCESS_TTL_MS } } : {}),
    });
  }

  /**
   * `find` for what defines a collection (id, name, namespace, extractors, settings), from memory when it
   * can be: `document_count` and `status` may be behind (they change without going through this store).
   * The row is shared: never change it.
   */
  findDefinition(organizationId: string, namespaceId: string, nameOrId: string): Promise<CollectionRow | undefined> {
    return this.definitions.read(`${organizationId}\u0000${namespaceId}\u0000${nameOrId}`, async () => {
      const row = await this.find(organizationId, namespaceId, nameOrId);
      return row && deepFreeze(row);
    });
  }

  /** By `col_` id or by name (case-insensitive) within a namespace. */
  find(organizationId: string, namespaceId: string, nameOrId: string): Promise<CollectionRow | undefined> {
    return this.db<CollectionRow>('collections')
      .where({ organization_id: organizationId, namespace_id: namespaceId })
      .where((q) => q.where({ collection_id: nameOrId }).orWhereRaw('lower(collection_name) = lower(?)', [nameOrId]))
      .orderByRaw('collection_id = ? desc', [nameOrId])
      .first();
  }

  findById(organizationId: string, collectionId: string): Promise<CollectionRow | undefined> {
    return this.db<CollectionRow>('collections').where({ organization_id: organizationId, collection_id: collectionId }).first();
  }

  list(organizationId: string, namespaceId: string): Promise<CollectionRow[]> {
    return this.db<CollectionRow>('collections')
      .where({ organization_id: organizationId, namespace_id: namespaceId })
      .orderByRaw('lower(collection_name)');
  }

  /** Collections whose source is this bucket or collection. */
  readersOf(organizationId: string, kind: 'bucket_id' | 'collection_id', id: string): Promise<CollectionRow[]> {
    return this.db<CollectionRow>('collections').where({ organization_id: organizationId }).whereRaw(`source->>'${kind}' = ?`, [id]);
  }

  // Every write forgets every cached definition: they are rare, and a rename changes which name finds which row.
  async insert(row: CollectionRow): Promise<void> {
    try {
      await this.db('collections').insert(toColumns(row));
    } finally {
      this.definitions.forgetAll();
    }
  }

  async update(collectionId: string, changes: Partial<CollectionRow>): Promise<void> {
    try {
      await this.db('collections').where({ collection_id: collectionId }).update(toColumns(changes));
    } finally {
      this.definitions.forgetAll();
    }
  }

  async delete(collectionId: string): Promise<void> {
    try {
      await this.db('collections').where({ collection_id: collectionId }).delete();
    } finally {
      this.definitions.forgetAll();
    }
  }
}
