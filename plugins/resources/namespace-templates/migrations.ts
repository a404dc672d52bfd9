import type { Migration } from '../../../kernel/db/migrations.js';

export const templateMigrations: Migration[] = [
  {
    name: '0001_namespace_templates',
    async up(db) {
      await db.schema.createTable('namespace_templates', (t) => {
        t.text('template_id').primary();
        t.text('organization_id').notNullable();
        t.text('template_name').notNullable();
        t.text('description');
        // No foreign key: a deleted source namespace leaves the template behind, inactive (store.ts).
        t.text('source_namespace_id').notNullable();
        t.text('created_by');
        t.timestamp('created_at', { useTz: true }).notNullable();
        t.timestamp('updated_at', { useTz: true }).notNullable();
      });
      await db.raw('create unique index namespace_templates_org_name on namespace_templates (organization_id, lower(template_name))');
    },
  },
];
