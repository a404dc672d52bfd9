/**
 * The marketplace (service.ts): a public catalog of the published retrievers their owners listed, beside the
 * catalog config the published-retrievers plugin serves, and subscriptions giving another organization a
 * `sk_marketplace_` key that executes one listed retriever through the public execute endpoints.
 */
import { callerOf } from '../../../kernel/http/handlers.js';
import { defineResource } from '../../../kernel/plugins.js';
import { Announcer, AuditLog, Clock, DatabaseHandle, KeyStore, PublishedRetrievers, RetrieverRemovals, createToken } from '../../../kernel/tokens.js';
import { marketplaceMigrations } from './migrations.js';
import { MarketplaceService, toListing } from './service.js';
import { SubscriptionStore } from './store.js';

const Marketplace = createToken<MarketplaceService>('marketplace.MarketplaceService');

export default defineResource({
  name: 'marketplace',
  migrations: marketplaceMigrations,
  services: (container, services) => {
    const db = services.get(DatabaseHandle).db;
    container.bind(Marketplace).toConstantValue(
      new MarketplaceService({
        db,
        subscriptions: new SubscriptionStore(db),
        published: () => services.get(PublishedRetrievers),
        keys: services.get(KeyStore),
        audit: services.get(AuditLog),
        announcer: services.get(Announcer),
        clock: services.get(Clock),
      }),
    );
  },
  setup: ({ services }) => {
    const marketplace = services.get(Marketplace);
    services.get(RetrieverRemovals).register('marketplace_subscriptions', (removed) => marketplace.endSubscriptionsTo(removed));
  },
  handlers: {
    listMarketplaceCatalog: async ({ query, services }) => {
      const page = query.page ?? 1;
      const pageSize = query.page_size ?? 20;
      const { records, total } = await services.get(Marketplace).catalog(page, pageSize, query.search);
      return {
        status: 200,
        body: { results: records.map(toListing), page, page_size: pageSize, total_count: total, total_pages: Math.ceil(total / pageSize) },
      };
    },
    getMarketplaceListing: async ({ params, services }) => {
      return { status: 200, body: toListing(await services.get(Marketplace).listing(params.public_name)) };
    },
    subscribeToMarketplaceRetriever: async ({ params, body, ctx, services }) => {
      const { subscription, plaintext } = await services
        .get(Marketplace)
        .subscribe({ auth: callerOf(ctx), requestId: ctx.requestId }, params.public_name, body?.allowed_origins ?? []);
      return { status: 201, body: { ...subscription, key: plaintext } };
    },
    listMarketplaceSubscriptions: async ({ query, ctx, services }) => {
      const results = await services.get(Marketplace).list(callerOf(ctx).organizationId, query.include_cancelled ?? false);
      return { status: 200, body: { results, total: results.length } };
    },
    unsubscribeFromMarketplaceRetriever: async ({ params, ctx, services }) => {
      const subscription = await services.get(Marketplace).unsubscribe({ auth: callerOf(ctx), requestId: ctx.requestId }, params.subscription_id);
      return { status: 200, body: subscription };
    },
  },
});
