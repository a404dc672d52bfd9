/**
 * Namespaces: the isolation boundary for buckets, collections and retrievers. Provides the kernel's
 * NamespaceResolver, which every namespace-scoped route uses to resolve `X-Namespace`.
 */
import type { components } from '../../../generated/openapi.js';
import { scopesAllow } from '../../../kernel/auth/scopes.js';
import { callerOf } from '../../../kernel/http/handlers.js';
import type { RequestContext } from '../../../kernel/http/context.js';
import { iso } from '../../../kernel/http/values.js';
import { defineResource } from '../../../kernel/plugins.js';
import {
  AuditLog,
  Clock,
  Config,
  DatabaseHandle,
  Announcer,
  EventBus,
  Lifecycle,
  NamespacePurges,
  NamespaceResolver,
  PluginRegistry,
  ResourceIdentifiers,
  TaskQueue,
  createToken,
} from '../../../kernel/tokens.js';
import { namespaceMigrations } from './migrations.js';
import { NamespaceService, PURGE_TASK } from './service.js';
import { CachedNamespaceResolver, NamespaceStore, type NamespaceRow } from './store.js';

const Namespaces = createToken<NamespaceService>('namespaces.NamespaceService');
const Resolver = createToken<CachedNamespaceResolver>('namespaces.CachedNamespaceResolver');

type Namespace = components['schemas']['Namespace'];

function toNamespace(row: NamespaceRow): Namespace {
  return {
    namespace_id: row.namespace_id,
    namespace_name: row.namespace_name,
    description: row.description,
    metadata: row.metadata,
    feature_extractors: row.feature_extractors,
    created_by: row.created_by,
    created_at: iso(row.created_at),
    updated_at: iso(row.updated_at),
  };
}

function actorOf(ctx: RequestContext) {
  const caller = callerOf(ctx);
  return { keyId: caller.keyId, userEmail: caller.userEmail, requestId: ctx.requestId };
}

export default defineResource({
  name: 'namespaces',
  migrations: namespaceMigrations,
  services: (container, services) => {
    const db = services.get(DatabaseHandle).db;
    const store = new NamespaceStore(db);
    const resolver = new CachedNamespaceResolver(store, services.get(Config).keyCacheTtlMs);
    container.bind(Resolver).toConstantValue(resolver);
    container.bind(NamespaceResolver).toConstantValue(resolver);
    container.bind(Namespaces).toConstantValue(
      new NamespaceService(db, store, resolver, services.get(AuditLog), services.get(Announcer), services.get(Clock), services.get(TaskQueue), () => services.get(PluginRegistry).extractors),
    );
  },
  setup: ({ services }) => {
    const resolver = services.get(Resolver);
    const unsubscribe = resolver.listen(services.get(EventBus));
    services.get(Lifecycle).onShutdown('namespace cache subscription', unsubscribe);
    // A deleted namespace's contents: every plugin's purger, in order (kernel/namespace-purge.ts).
    const purges = services.get(NamespacePurges);
    services.get(TaskQueue).register(PURGE_TASK, async ({ task, log }) => {
      const payload = task.payload as { organization_id: string; namespace_id: string; deleted_by?: string | null };
      return purges.purge({ organizationId: payload.organization_id, namespaceId: payload.namespace_id, deletedBy: payload.deleted_by ?? null }, log);
    });
    services.get(ResourceIdentifiers).register('namespace', async ({ organizationId, identifier }) => {
      const found = await resolver.resolve(organizationId, identifier);
      return found ? [found.id, found.name] : undefined;
    });
  },
  handlers: {
    createNamespace: async ({ body, ctx, services }) => {
      const row = await services.get(Namespaces).create(callerOf(ctx).organizationId, actorOf(ctx), body);
      return { status: 201, body: toNamespace(row) };
    },

    listNamespaces: async ({ query, ctx, services }) => {
      const caller = callerOf(ctx);
      const limit = query.limit ?? 100;
      const offset = query.offset ?? 0;
      const namespaces = services.get(Namespaces);
      const names = await namespaces.listNames(caller.organizationId, query.search);
      // A scoped key sees only the namespaces its scopes name; only the page is read whole (metadata and all).
      const visible = names.filter((row) =>
        scopesAllow(caller.scopes, {
          organizationId: caller.organizationId,
          resource: { type: 'namespace', identifiers: [row.namespace_id, row.namespace_name] },
          namespace: { id: row.namespace_id, name: row.namespace_name },
          operation: 'read_data',
        }),
      );
      const page = await namespaces.rows(caller.organizationId, visible.slice(offset, offset + limit).map((row) => row.namespace_id));
      return {
        status: 200,
        body: { results: page.map(toNamespace), total: visible.length, limit, offset, has_next: offset + limit < visible.length },
      };
    },

    getNamespace: async ({ params, ctx, services }) => {
      const row = await services.get(Namespaces).get(callerOf(ctx).organizationId, params.name);
      return { status: 200, body: toNamespace(row) };
    },

    updateNamespace: async ({ params, body, ctx, services }) => {
      const row = await services.get(Namespaces).update(callerOf(ctx).organizationId, actorOf(ctx), params.name, body);
      return { status: 200, body: toNamespace(row) };
    },

    deleteNamespace: async ({ params, ctx, services }) => {
      const row = await services.get(Namespaces).delete(callerOf(ctx).organizationId, actorOf(ctx), params.name);
      return { status: 200, body: { namespace_id: row.namespace_id, namespace_name: row.namespace_name, deleted: true } };
    },
  },
});
