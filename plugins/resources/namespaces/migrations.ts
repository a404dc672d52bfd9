import type { Migration } from '../../../kernel/db/migrations.js';

export const namespaceMigrations: Migration[] = [
  {
    name: '0001_namespaces',
    async up(db) {
      await db.schema.createTable('namespaces', (t) => {
        t.text('namespace_id').primary();
        t.text('organization_id').notNullable().references('organizations.organization_id');
        t.text('namespace_name').notNullable();
        t.text('description');
        t.jsonb('metadata').notNullable();
        t.jsonb('feature_extractors').notNullable();
        t.text('created_by');
        t.timestamp('created_at', { useTz: true }).notNullable();
        t.timestamp('updated_at', { useTz: true }).notNullable();
      });
      await db.raw(
        'create unique index namespaces_org_name on namespaces (organization_id, lower(namespace_name))',
      );
    },
  },
];
