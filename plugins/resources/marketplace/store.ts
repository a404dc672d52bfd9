/** Subscription rows, always within the subscriber's organization. */
import type { Knex } from 'knex';

export interface SubscriptionRow {
  subscription_id: string;
  organization_id: string;
  user_id: string;
  created_by: string;
  publisher_organization_id: string;
  retriever_id: string;
  public_name: string;
  title: string;
  key_id: string;
  status: 'active' | 'cancelled';
  created_at: Date;
  cancelled_at: Date | null;
  cancelled_by: string | null;
}

export class SubscriptionStore {
  constructor(private readonly db: Knex) {}

  async insert(db: Knex, row: SubscriptionRow): Promise<void> {
    await db('marketplace_subscriptions').insert(row);
  }

  find(organizationId: string, subscriptionId: string): Promise<SubscriptionRow | undefined> {
    return this.db<SubscriptionRow>('marketplace_subscriptions').where({ organization_id: organizationId, subscription_id: subscriptionId }).first();
  }

  active(organizationId: string, retrieverId: string): Promise<SubscriptionRow | undefined> {
    return this.db<SubscriptionRow>('marketplace_subscriptions').where({ organization_id: organizationId, retriever_id: retrieverId, status: 'active' }).first();
  }

  list(organizationId: string, includeCancelled: boolean): Promise<SubscriptionRow[]> {
    const q = this.db<SubscriptionRow>('marketplace_subscriptions')
      .where({ organization_id: organizationId })
      .orderBy([{ column: 'created_at', order: 'desc' }, { column: 'subscription_id', order: 'desc' }]);
    if (!includeCancelled) q.where({ status: 'active' });
    return q;
  }

  async cancel(db: Knex, subscriptionId: string, at: Date, by: string): Promise<void> {
    await db('marketplace_subscriptions').where({ subscription_id: subscriptionId }).update({ status: 'cancelled', cancelled_at: at, cancelled_by: by });
  }
}
