import type { Migration } from '../../../kernel/db/migrations.js';

/** Buckets, their objects, and uploads waiting for (or past) confirmation. */
export const bucketMigrations: Migration[] = [
  {
    name: '0001_buckets_objects_uploads',
    async up(db) {
      await db.schema.createTable('buckets', (t) => {
        t.text('bucket_id').primary();
        t.text('organization_id').notNullable();
        t.text('namespace_id').notNullable();
        t.text('bucket_name').notNullable();
        t.text('description');
        t.jsonb('schema').notNullable();
        t.jsonb('metadata').notNullable();
        t.bigInteger('object_count').notNullable().defaultTo(0);
        t.bigInteger('total_size_bytes').notNullable().defaultTo(0);
        t.text('created_by');
        t.timestamp('created_at', { useTz: true }).notNullable();
        t.timestamp('updated_at', { useTz: true }).notNullable();
      });
      await db.raw('create unique index buckets_ns_name on buckets (organization_id, namespace_id, lower(bucket_name))');
      await db.schema.createTable('objects', (t) => {
        t.text('object_id').primary();
        t.text('organization_id').notNullable();
        t.text('namespace_id').notNullable();
        t.text('bucket_id').notNullable().references('buckets.bucket_id').onDelete('CASCADE');
        t.text('key').notNullable();
        t.jsonb('metadata').notNullable();
        t.jsonb('blobs').notNullable();
        t.bigInteger('size_bytes').notNullable();
        t.text('created_by');
        t.timestamp('created_at', { useTz: true }).notNullable();
        t.timestamp('updated_at', { useTz: true }).notNullable();
        t.unique(['bucket_id', 'key']);
        t.index(['bucket_id', 'created_at']);
      });
      await db.schema.createTable('uploads', (t) => {
        t.text('upload_id').primary();
        t.text('organization_id').notNullable();
        t.text('namespace_id').notNullable();
        t.text('bucket_id').notNullable().references('buckets.bucket_id').onDelete('CASCADE');
        t.text('status').notNullable();
        t.text('filename').notNullable();
        t.text('content_type');
        t.bigInteger('file_size_bytes');
        t.bigInteger('max_size_bytes').notNullable();
        t.text('property').notNullable();
        t.text('object_key');
        t.jsonb('metadata').notNullable();
        t.boolean('create_object').notNullable();
        t.text('storage_key').notNullable();
        t.timestamp('expires_at', { useTz: true }).notNullable();
        t.text('expected_etag');
        t.bigInteger('expected_size');
        t.text('etag');
        t.text('file_hash');
        t.bigInteger('stored_size');
        t.text('object_id');
        t.text('task_id');
        t.text('error');
        t.text('created_by');
        t.timestamp('verified_at', { useTz: true });
        t.timestamp('completed_at', { useTz: true });
        t.timestamp('created_at', { useTz: true }).notNullable();
        t.index(['bucket_id', 'created_at']);
        t.index(['status', 'expires_at']);
      });
    },
  },
  {
    // A presigned PUT finds its upload by the key it writes (the upload gate).
    name: '0002_uploads_storage_key',
    async up(db) {
      await db.schema.alterTable('uploads', (t) => {
        t.index(['storage_key']);
      });
    },
  },
  {
    // Objects (and the uploads that make them) belong to a principal, as documents do: usr_sk_ keys see their own.
    name: '0003_owner_principal',
    async up(db) {
      await db.schema.alterTable('objects', (t) => {
        t.text('owner_principal');
        t.index(['bucket_id', 'owner_principal']);
      });
      await db.schema.alterTable('uploads', (t) => {
        t.text('owner_principal');
      });
    },
  },
];
