/** Subscription rows, within the subscriber's organization (but for ending those to a deleted retriever). */
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
  cancel_reason: CancelReason | null;
}

/** `unsubscribed`: the subscriber's organization cancelled it; `retriever_deleted`: the publisher deleted the retriever. */
export type CancelReason = 'unsubscribed' | 'retriever_deleted';

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

  /** Active subscriptions, in any organization, to these retrievers of the publisher's organization. */
  activeTo(publisherOrganizationId: string, retrieverIds: readonly string[]): Promise<SubscriptionRow[]> {
    return this.db<SubscriptionRow>('marketplace_subscriptions')
      .where({ publisher_organization_id: publisherOrganizationId, status: 'active' })
      .whereIn('retriever_id', [...retrieverIds]);
  }

  /** Ends the subscription; false when it was no longer active (ended meanwhile by another caller). */
  async cancel(db: Knex, subscriptionId: string, at: Date, by: string | null, reason: CancelReason): Promise<boolean> {
    const changed = (await db('marketplace_subscriptions')
      .where({ subscription_id: subscriptionId, status: 'active' })
      .update({ status: 'cancelled', cancelled_at: at, cancelled_by: by, cancel_reason: reason })
      .returning('subscription_id')) as unknown[];
    return changed.length > 0;
  }
}
