import type { Migration } from '../../../kernel/db/migrations.js';

export const webhookMigrations: Migration[] = [
  {
    name: '0001_webhooks',
    async up(db) {
      await db.schema.createTable('webhooks', (t) => {
        t.text('webhook_id').primary();
        t.text('organization_id').notNullable().references('organizations.organization_id');
        t.text('url').notNullable();
        t.text('description');
        t.jsonb('event_types').notNullable();
        t.boolean('enabled').notNullable();
        // The signing secret (`whsec_...`), sealed (kernel/secret-box.ts): HMAC needs it back, so it cannot be hashed like a key.
        t.text('secret').notNullable();
        // The secret before the last rotation, still signing beside the new one until `previous_secret_until`.
        t.text('previous_secret');
        t.timestamp('previous_secret_until', { useTz: true });
        t.integer('slow_query_threshold_ms').notNullable();
        t.double('low_hit_rate_threshold').notNullable();
        t.text('created_by');
        t.timestamp('created_at', { useTz: true }).notNullable();
        t.timestamp('updated_at', { useTz: true }).notNullable();
        t.index(['organization_id', 'created_at']);
      });
      await db.schema.createTable('webhook_deliveries', (t) => {
        t.text('delivery_id').primary();
        t.text('organization_id').notNullable();
        t.text('webhook_id').notNullable().references('webhooks.webhook_id').onDelete('CASCADE');
        t.text('event_id').notNullable();
        t.text('event_type').notNullable();
        // The exact body sent: every retry sends the same bytes.
        t.text('payload').notNullable();
        t.text('status').notNullable();
        t.integer('attempts').notNullable().defaultTo(0);
        t.integer('max_attempts').notNullable();
        t.integer('response_status');
        t.text('response_body');
        t.text('error');
        t.integer('duration_ms');
        t.timestamp('created_at', { useTz: true }).notNullable();
        t.timestamp('last_attempt_at', { useTz: true });
        t.timestamp('next_attempt_at', { useTz: true });
        // One delivery per event and webhook, however many processes (or threads) heard the event.
        t.unique(['webhook_id', 'event_id']);
        t.index(['webhook_id', 'created_at']);
        t.index(['created_at']);
      });
      // Rate limits of alerts that repeat (kernel/retrieval/alerts.ts claim): one row per key, when it last fired.
      await db.schema.createTable('webhook_alert_marks', (t) => {
        t.text('organization_id').notNullable();
        t.text('alert_key').notNullable();
        t.timestamp('fired_at', { useTz: true }).notNullable();
        t.primary(['organization_id', 'alert_key']);
      });
    },
  },
];
