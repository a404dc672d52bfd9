import type { Migration } from '../../../kernel/db/migrations.js';

export const batchMigrations: Migration[] = [
  {
    name: '0001_batches',
    async up(db) {
      await db.schema.createTable('batches', (t) => {
        t.text('batch_id').primary();
        t.text('organization_id').notNullable();
        t.text('namespace_id').notNullable();
        t.text('bucket_id').notNullable();
        t.text('status').notNullable();
        t.text('type').notNullable();
        t.jsonb('object_ids').notNullable();
        t.jsonb('collection_ids');
        t.text('error');
        t.jsonb('error_summary');
        t.text('manifest_key');
        t.text('task_id');
        t.jsonb('loaded_object_ids');
        t.jsonb('internal_metadata').notNullable();
        t.jsonb('metadata').notNullable();
        t.jsonb('tier_tasks').notNullable();
        t.integer('current_tier');
        t.integer('total_tiers').notNullable().defaultTo(1);
        t.jsonb('dag_tiers');
        // Each retry starts a new generation: its chunks and tier tasks never collide with the last run's.
        t.integer('generation').notNullable().defaultTo(0);
        t.timestamp('started_at', { useTz: true });
        t.timestamp('completed_at', { useTz: true });
        t.timestamp('progress_at', { useTz: true });
        t.text('created_by');
        t.timestamp('created_at', { useTz: true }).notNullable();
        t.timestamp('updated_at', { useTz: true }).notNullable();
        t.index(['organization_id', 'bucket_id', 'created_at']);
        t.index(['status']);
      });
      // A tier's work, split into chunks of source records: one task each, its outcome kept for the tier's counters.
      await db.schema.createTable('batch_chunks', (t) => {
        t.text('batch_id').notNullable().references('batches.batch_id').onDelete('CASCADE');
        t.integer('generation').notNullable();
        t.integer('tier').notNullable();
        t.text('collection_id').notNullable();
        t.integer('chunk_index').notNullable();
        t.jsonb('record_ids').notNullable();
        t.text('status').notNullable();
        t.text('task_id');
        t.jsonb('outcome');
        t.timestamp('started_at', { useTz: true });
        t.timestamp('completed_at', { useTz: true });
        t.primary(['batch_id', 'generation', 'tier', 'collection_id', 'chunk_index']);
      });
    },
  },
];
