/**
 * What a source namespace holds that an instantiation copies, read in one repeatable-read transaction so
 * its rows agree with each other (no document of a collection read before the collection was). Rows are read
 * whole (`select *`): a column another plugin adds later is copied as it is.
 */
import type { Knex } from 'knex';
import type { SourceSize } from './limits.js';

/** A row of another plugin's table: the columns this plugin reads by name, and whatever else it holds. */
export type Row<K extends string> = Record<string, unknown> & Record<K, string>;

export type BucketRow = Row<'bucket_id' | 'namespace_id'>;
export type CollectionRow = Row<'collection_id' | 'namespace_id' | 'collection_name'> & {
  source: Record<string, unknown>;
  feature_extractors: Array<{ feature_extractor_name: string; output_mapping?: Record<string, string> }>;
  output_schema: { properties: Record<string, unknown> };
};
export type DocumentRow = Row<'document_id' | 'collection_id' | 'namespace_id' | 'source_key'> & {
  source_collection_id: string | null;
  source_document_id: string | null;
  fields: Record<string, unknown>;
};
export type RetrieverRow = Row<'retriever_id' | 'namespace_id'>;

export type NamespaceRow = Row<'namespace_id' | 'namespace_name'>;

export interface SourceContents {
  /** Undefined when the namespace was deleted meanwhile. */
  namespace: NamespaceRow | undefined;
  buckets: BucketRow[];
  collections: CollectionRow[];
  documents: DocumentRow[];
  retrievers: RetrieverRow[];
}

const TABLES = { buckets: 'buckets', collections: 'collections', documents: 'documents', retrievers: 'retrievers' } as const;

/** How many rows of each kind the namespace holds (what the limits are checked against). */
export async function sourceSize(db: Knex, organizationId: string, namespaceId: string): Promise<SourceSize> {
  const counts = await Promise.all(
    Object.values(TABLES).map(async (table) => {
      const [row] = (await db(table).where({ organization_id: organizationId, namespace_id: namespaceId }).count('* as n')) as Array<{ n: string | number }>;
      return Number(row!.n);
    }),
  );
  return { buckets: counts[0]!, collections: counts[1]!, documents: counts[2]!, retrievers: counts[3]! };
}

export async function readSource(db: Knex, organizationId: string, namespaceId: string): Promise<SourceContents> {
  return db.transaction(
    async (trx) => {
      const rows = <T>(table: string, order: string) => trx(table).where({ organization_id: organizationId, namespace_id: namespaceId }).orderBy(order) as Promise<T[]>;
      return {
        namespace: (await trx('namespaces').where({ organization_id: organizationId, namespace_id: namespaceId }).first()) as NamespaceRow | undefined,
        buckets: await rows<BucketRow>(TABLES.buckets, 'bucket_id'),
        collections: await rows<CollectionRow>(TABLES.collections, 'collection_id'),
        documents: await rows<DocumentRow>(TABLES.documents, 'document_id'),
        retrievers: await rows<RetrieverRow>(TABLES.retrievers, 'retriever_id'),
      };
    },
    { isolationLevel: 'repeatable read', readOnly: true },
  );
}
