import type { Migration } from '../db/migrations.js';

/** Tenancy and credentials: organizations, their users, API keys (hash only) and the audit log. */
export const authMigrations: Migration[] = [
  {
    name: '0001_tenancy_and_keys',
    async up(db) {
      await db.schema.createTable('organizations', (t) => {
        t.text('organization_id').primary();
        t.text('name').notNullable();
        t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(db.fn.now());
      });
      await db.schema.createTable('users', (t) => {
        t.text('user_id').primary();
        t.text('organization_id').notNullable().references('organizations.organization_id');
        t.text('email').notNullable();
        t.text('name');
        t.text('role').notNullable().defaultTo('member');
        t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(db.fn.now());
        t.timestamp('deleted_at', { useTz: true });
      });
      await db.raw(
        'create unique index users_org_email_live on users (organization_id, lower(email)) where deleted_at is null',
      );
      await db.schema.createTable('api_keys', (t) => {
        t.text('key_id').primary();
        t.text('organization_id').notNullable().references('organizations.organization_id');
        t.text('user_id').notNullable().references('users.user_id');
        t.text('name').notNullable();
        t.text('description');
        t.text('key_hash').notNullable().unique();
        t.text('key_prefix').notNullable();
        t.text('key_type').notNullable();
        t.jsonb('permissions').notNullable();
        t.jsonb('scopes').notNullable();
        t.integer('rate_limit_override');
        t.timestamp('expires_at', { useTz: true });
        t.text('principal_id');
        t.jsonb('allowed_origins').notNullable();
        t.text('status').notNullable().defaultTo('active');
        t.boolean('is_protected').notNullable().defaultTo(false);
        t.timestamp('last_used_at', { useTz: true });
        t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(db.fn.now());
        t.text('created_by').notNullable();
        t.timestamp('updated_at', { useTz: true });
        t.timestamp('revoked_at', { useTz: true });
        t.text('revoked_by');
      });
      await db.raw(
        "create unique index api_keys_active_name on api_keys (organization_id, user_id, name) where status = 'active'",
      );
      await db.schema.createTable('audit_log', (t) => {
        t.bigIncrements('seq').primary();
        t.text('event_id').notNullable().unique();
        t.text('organization_id').notNullable().references('organizations.organization_id');
        t.text('action').notNullable();
        t.text('actor_key_id');
        t.text('actor_email');
        t.text('resource_type').notNullable();
        t.text('resource_id').notNullable();
        t.text('resource_name');
        t.jsonb('changes').notNullable();
        t.text('request_id');
        t.timestamp('created_at', { useTz: true }).notNullable();
        t.index(['organization_id', 'seq']);
      });
    },
  },
  {
    // Fixed-window request counters shared by every API process on one PostgreSQL (SharedRateLimiter).
    // Times are the application clock's epoch milliseconds, so tests can move them with the clock;
    // `last_grant` is what the last claim got, so one statement both claims and reports it.
    name: '0002_rate_limit_counters',
    async up(db) {
      // Unlogged: counters live for one window, so losing them in a crash costs nothing, and no WAL is written.
      await db.raw(`
        create unlogged table rate_limit_counters (
          subject text not null,
          window_ms integer not null,
          window_start bigint not null,
          window_end bigint not null,
          count integer not null,
          last_grant integer not null,
          primary key (subject, window_ms, window_start)
        )`);
      await db.raw('create index rate_limit_counters_window_end on rate_limit_counters (window_end)');
    },
  },
  {
    // ret_sk_ and sk_marketplace_ keys are bound to one retriever. Their names are unique per retriever (two
    // retrievers may each have a "website" key), apart from the names of the user's own keys.
    name: '0003_keys_bound_to_a_retriever',
    async up(db) {
      await db.schema.alterTable('api_keys', (t) => {
        t.text('bound_retriever_id');
        // The retriever's organization: the key's own for ret_sk_, the publisher's for sk_marketplace_.
        t.text('bound_organization_id');
      });
      await db.raw('drop index api_keys_active_name');
      await db.raw(
        "create unique index api_keys_active_name on api_keys (organization_id, user_id, name) where status = 'active' and bound_retriever_id is null",
      );
      await db.raw(
        "create unique index api_keys_bound_active_name on api_keys (organization_id, bound_retriever_id, name) where status = 'active' and bound_retriever_id is not null",
      );
    },
  },
];
