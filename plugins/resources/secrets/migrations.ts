import type { Migration } from '../../../kernel/db/migrations.js';

export const secretMigrations: Migration[] = [
  {
    name: '0001_organization_secrets',
    async up(db) {
      await db.schema.createTable('organization_secrets', (t) => {
        t.text('organization_id').notNullable().references('organizations.organization_id');
        t.text('name').notNullable();
        // Sealed (kernel/secret-box.ts, purpose `organization-secrets`): manifests need the value back, so it cannot be hashed.
        t.text('value').notNullable();
        t.text('description');
        t.text('created_by');
        t.timestamp('created_at', { useTz: true }).notNullable();
        t.timestamp('updated_at', { useTz: true }).notNullable();
        t.primary(['organization_id', 'name']);
      });
    },
  },
];
