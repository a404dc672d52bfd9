import type { Migration } from '../../../kernel/db/migrations.js';

export const retrieverMigrations: Migration[] = [
  {
    name: '0001_retrievers',
    async up(db) {
      await db.schema.createTable('retrievers', (t) => {
        t.text('retriever_id').primary();
        t.text('organization_id').notNullable();
        t.text('namespace_id').notNullable();
        t.text('retriever_name').notNullable();
        t.text('description');
        t.jsonb('collection_identifiers').notNullable();
        t.jsonb('collection_ids').notNullable();
        t.jsonb('input_schema').notNullable();
        t.jsonb('stages').notNullable();
        t.jsonb('budget_limits').notNullable();
        t.jsonb('feature_dependencies').notNullable();
        t.jsonb('stage_versions').notNullable();
        t.jsonb('tags').notNullable();
        t.jsonb('display_config').notNullable();
        t.jsonb('cache_config').notNullable();
        t.jsonb('cache_stage_names').notNullable();
        t.integer('version').notNullable();
        t.text('created_by');
        t.text('updated_by');
        t.timestamp('created_at', { useTz: true }).notNullable();
        t.timestamp('updated_at', { useTz: true }).notNullable();
      });
      await db.raw('create unique index retrievers_ns_name on retrievers (organization_id, namespace_id, lower(retriever_name))');
    },
  },
  {
    name: '0002_retriever_executions',
    async up(db) {
      await db.schema.createTable('retriever_executions', (t) => {
        t.text('execution_id').primary();
        t.text('organization_id').notNullable();
        t.text('namespace_id').notNullable();
        t.text('retriever_id').notNullable().references('retrievers.retriever_id').onDelete('CASCADE');
        t.integer('retriever_version').notNullable();
        t.text('status').notNullable();
        t.jsonb('inputs').notNullable();
        t.jsonb('collection_ids').notNullable();
        t.jsonb('result_document_ids').notNullable();
        t.integer('total_results').notNullable();
        t.jsonb('stage_statistics').notNullable();
        t.jsonb('budget').notNullable();
        t.text('error');
        t.double('duration_ms').notNullable();
        t.timestamp('started_at', { useTz: true }).notNullable();
        t.text('created_by');
        // The principal of the user-scoped key that ran it: such keys see only their own executions.
        t.text('principal_id');
        t.index(['retriever_id', 'started_at']);
      });
    },
  },
  {
    name: '0003_retriever_interactions',
    async up(db) {
      await db.schema.createTable('retriever_interactions', (t) => {
        t.text('interaction_id').primary();
        t.text('organization_id').notNullable();
        t.text('namespace_id').notNullable();
        t.text('retriever_id').notNullable().references('retrievers.retriever_id').onDelete('CASCADE');
        t.text('execution_id');
        t.text('document_id').notNullable();
        t.jsonb('interaction_types').notNullable();
        t.integer('position');
        t.jsonb('query_snapshot');
        t.text('session_id');
        t.text('created_by');
        t.timestamp('created_at', { useTz: true }).notNullable();
        t.index(['retriever_id', 'created_at']);
      });
    },
  },
  {
    // Cursor pagination serves later pages from the recorded ranking: the scores come with the ids.
    name: '0004_retriever_execution_result_scores',
    async up(db) {
      await db.schema.alterTable('retriever_executions', (t) => {
        t.jsonb('result_scores');
      });
    },
  },
  {
    // Result cache (cache-store.ts): entries shared by every API process, and the data versions their keys hold.
    name: '0005_retriever_cache',
    async up(db) {
      await db.schema.createTable('retriever_cache_entries', (t) => {
        t.text('cache_key').primary();
        t.text('organization_id').notNullable();
        t.text('namespace_id').notNullable();
        t.text('retriever_id').notNullable();
        t.text('stage_name').notNullable();
        t.integer('stage_index').notNullable();
        t.jsonb('collection_ids').notNullable();
        // Text, not jsonb: a hit returns the documents exactly as they were stored (key order included).
        t.text('documents').notNullable();
        t.jsonb('statistics').notNullable();
        t.integer('size_bytes').notNullable();
        t.timestamp('created_at', { useTz: true }).notNullable();
        t.timestamp('expires_at', { useTz: true }).notNullable();
        t.index(['expires_at']);
        t.index(['organization_id', 'created_at']);
        t.index(['retriever_id']);
      });
      await db.schema.createTable('retriever_cache_versions', (t) => {
        // `collection:<id>`, `namespace:<id>` or `retriever:<id>` (kernel/retrieval/cache.ts versionScope).
        t.text('scope').primary();
        t.text('organization_id').notNullable();
        t.bigInteger('version').notNullable();
      });
      // Hit rate for analytics: null when the retriever did not cache, else whether a cached output was used.
      await db.schema.alterTable('retriever_executions', (t) => {
        t.boolean('cache_hit');
      });
    },
  },
  {
    // kernel/retrieval/history-inputs.ts: inputs are stored as text (query vectors packed as float64 bytes), kept in the row's
    // page when they fit (`main`: compressed if it helps, moved out of line only as a last resort).
    name: '0006_execution_inputs_packed',
    async up(db) {
      await db.raw('alter table retriever_executions alter column inputs type text using inputs::text');
      await db.raw('alter table retriever_executions alter column inputs set storage main');
    },
  },
  {
    // A row with a query vector (~2-4 KB) passes the default 2 KB toast threshold, and each insert then tried
    // to compress the packed vector (random bytes: it never shrinks). Rows up to a page stay as they are.
    name: '0007_execution_rows_inline',
    async up(db) {
      await db.raw('alter table retriever_executions set (toast_tuple_target = 8160)');
    },
  },
  {
    // Cache analytics: how many entries left the cache, when, and why (cache-store.ts recordEvictions).
    name: '0008_retriever_cache_evictions',
    async up(db) {
      await db.schema.createTable('retriever_cache_evictions', (t) => {
        t.bigIncrements('id').primary();
        t.text('organization_id').notNullable();
        t.text('namespace_id').notNullable();
        t.text('retriever_id').notNullable();
        t.text('reason').notNullable();
        t.integer('entries').notNullable();
        t.timestamp('occurred_at', { useTz: true }).notNullable();
        t.index(['organization_id', 'occurred_at']);
      });
    },
  },
];
