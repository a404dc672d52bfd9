import type { Migration } from '../../../kernel/db/migrations.js';

export const publishedRetrieverMigrations: Migration[] = [
  {
    name: '0001_published_retrievers',
    async up(db) {
      await db.schema.createTable('published_retrievers', (t) => {
        t.text('publication_id').primary();
        // Unique across the service: the public name is the whole address.
        t.text('public_name').notNullable().unique();
        t.text('organization_id').notNullable();
        t.text('namespace_id').notNullable();
        // A deleted retriever takes its publication with it.
        t.text('retriever_id').notNullable().references('retrievers.retriever_id').onDelete('CASCADE');
        t.text('title').notNullable();
        t.text('description');
        t.jsonb('display_config').notNullable();
        // scrypt$N$r$p$salt$hash (passwords.ts); null: no password.
        t.text('password_hash');
        // SHA-256 of the prk_ key (lookup) and the key sealed with the signing secret (returned by config and verify).
        t.text('api_key_hash').notNullable().unique();
        t.text('api_key_sealed').notNullable();
        t.boolean('marketplace_listed').notNullable();
        t.boolean('active').notNullable();
        t.jsonb('rate_limits').notNullable();
        t.text('created_by');
        t.timestamp('created_at', { useTz: true }).notNullable();
        t.timestamp('updated_at', { useTz: true }).notNullable();
        t.unique(['organization_id', 'retriever_id']);
        t.index(['active', 'created_at']);
      });
    },
  },
];
