import type { Migration } from '../../../kernel/db/migrations.js';

export const marketplaceMigrations: Migration[] = [
  {
    name: '0001_marketplace_subscriptions',
    async up(db) {
      await db.schema.createTable('marketplace_subscriptions', (t) => {
        t.text('subscription_id').primary();
        // The subscriber.
        t.text('organization_id').notNullable();
        t.text('user_id').notNullable();
        t.text('created_by').notNullable();
        // The publisher's retriever, as its organization knows it; never shown to the subscriber.
        t.text('publisher_organization_id').notNullable();
        t.text('retriever_id').notNullable();
        // The public name and title when subscribed (what the list shows once the retriever is unpublished).
        t.text('public_name').notNullable();
        t.text('title').notNullable();
        t.text('key_id').notNullable();
        t.text('status').notNullable();
        t.timestamp('created_at', { useTz: true }).notNullable();
        t.timestamp('cancelled_at', { useTz: true });
        t.text('cancelled_by');
        t.index(['organization_id', 'created_at']);
      });
      await db.raw(
        "create unique index marketplace_subscriptions_one_active on marketplace_subscriptions (organization_id, retriever_id) where status = 'active'",
      );
    },
  },
  {
    // Why a subscription ended: its organization cancelled it, or the publisher deleted the retriever.
    name: '0002_marketplace_subscriptions_cancel_reason',
    async up(db) {
      await db.schema.alterTable('marketplace_subscriptions', (t) => {
        t.text('cancel_reason');
      });
      await db('marketplace_subscriptions').where({ status: 'cancelled' }).update({ cancel_reason: 'unsubscribed' });
      // Ending the subscriptions to a deleted retriever finds them by the retriever, across subscribers.
      await db.raw("create index marketplace_subscriptions_active_by_retriever on marketplace_subscriptions (retriever_id) where status = 'active'");
    },
  },
];
