import type { Migration } from '../../../kernel/db/migrations.js';

export const collectionMigrations: Migration[] = [
  {
    name: '0001_collections',
    async up(db) {
      await db.schema.createTable('collections', (t) => {
        t.text('collection_id').primary();
        t.text('organization_id').notNullable();
        t.text('namespace_id').notNullable();
        t.text('collection_name').notNullable();
        t.text('description');
        t.jsonb('source').notNullable();
        t.jsonb('feature_extractors').notNullable();
        t.jsonb('taxonomy_applications').notNullable();
        t.boolean('enabled').notNullable();
        t.jsonb('metadata').notNullable();
        t.jsonb('document_handling').notNullable();
        t.jsonb('cache_config').notNullable();
        t.jsonb('source_lineage').notNullable();
        t.jsonb('output_schema').notNullable();
        t.text('status').notNullable();
        t.bigInteger('document_count').notNullable().defaultTo(0);
        t.text('created_by');
        t.timestamp('created_at', { useTz: true }).notNullable();
        t.timestamp('updated_at', { useTz: true }).notNullable();
      });
      await db.raw('create unique index collections_ns_name on collections (organization_id, namespace_id, lower(collection_name))');
      // Which collections read a bucket or another collection (delete guards, batch DAGs).
      await db.raw("create index collections_source_bucket on collections (organization_id, (source->>'bucket_id'))");
      await db.raw("create index collections_source_collection on collections (organization_id, (source->>'collection_id'))");
    },
  },
  {
    name: '0002_documents',
    async up(db) {
      await db.schema.createTable('documents', (t) => {
        t.text('document_id').primary();
        t.text('organization_id').notNullable();
        t.text('namespace_id').notNullable();
        t.text('collection_id').notNullable().references('collections.collection_id').onDelete('CASCADE');
        // What made the document (source record + extractor + draft key): writing it again updates, never duplicates.
        t.text('source_key').notNullable();
        t.text('root_object_id');
        t.text('source_collection_id');
        t.text('source_document_id');
        t.integer('processing_tier').notNullable().defaultTo(0);
        t.jsonb('fields').notNullable();
        t.jsonb('metadata').notNullable();
        t.text('owner_principal');
        t.jsonb('grants').notNullable();
        t.timestamp('created_at', { useTz: true }).notNullable();
        t.timestamp('updated_at', { useTz: true }).notNullable();
        t.unique(['collection_id', 'source_key']);
        t.index(['collection_id', 'created_at']);
        t.index(['organization_id', 'root_object_id']);
      });
    },
  },
  {
    // Grants follow derivation (document-grants.ts walks from a document to those made from it).
    name: '0003_documents_by_source_document',
    async up(db) {
      await db.raw('create index documents_source_document on documents (source_document_id) where source_document_id is not null');
    },
  },
];
