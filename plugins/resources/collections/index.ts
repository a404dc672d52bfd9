/**
 * Collections: documents made from a bucket (or another collection) by feature extractors. This module is
 * the collection resource itself and the extractor catalogue; documents and batches build on it.
 */
import type { components } from '../../../generated/openapi.js';
import type { RequestContext } from '../../../kernel/http/context.js';
import { callerOf } from '../../../kernel/http/handlers.js';
import { iso } from '../../../kernel/http/values.js';
import { defineResource } from '../../../kernel/plugins.js';
import {
  Clock,
  DatabaseHandle,
  EventBus,
  PluginRegistry,
  ReferenceRegistry,
  ResourceIdentifiers,
  createToken,
} from '../../../kernel/tokens.js';
import { collectionMigrations } from './migrations.js';
import { CollectionService, featureUri } from './service.js';
import { CollectionStore, type CollectionRow } from './store.js';

const Collections = createToken<CollectionService>('collections.CollectionService');
const Store = createToken<CollectionStore>('collections.CollectionStore');

function toCollection(row: CollectionRow): components['schemas']['Collection'] {
  return {
    collection_id: row.collection_id,
    collection_name: row.collection_name,
    namespace_id: row.namespace_id,
    description: row.description,
    source: row.source,
    feature_extractors: row.feature_extractors,
    taxonomy_applications: row.taxonomy_applications,
    enabled: row.enabled,
    metadata: row.metadata,
    document_handling: row.document_handling,
    cache_config: row.cache_config,
    source_lineage: row.source_lineage,
    output_schema: row.output_schema,
    status: row.status,
    document_count: Number(row.document_count),
    created_by: row.created_by,
    created_at: iso(row.created_at),
    updated_at: iso(row.updated_at),
  };
}

function namespaceOf(ctx: RequestContext) {
  if (!ctx.namespace) throw new Error('collection routes declare X-Namespace as required');
  return ctx.namespace;
}

export default defineResource({
  name: 'collections',
  migrations: collectionMigrations,
  services: (container, services) => {
    const store = new CollectionStore(services.get(DatabaseHandle).db);
    container.bind(Store).toConstantValue(store);
    container.bind(Collections).toConstantValue(
      new CollectionService(
        store,
        services.get(PluginRegistry),
        services.get(ResourceIdentifiers),
        services.get(ReferenceRegistry),
        services.get(EventBus),
        services.get(Clock),
      ),
    );
  },
  setup: ({ services }) => {
    const store = services.get(Store);
    const identifiers = services.get(ResourceIdentifiers);
    identifiers.register('collection', async ({ organizationId, namespace, identifier }) => {
      if (!namespace) return undefined;
      const row = await store.find(organizationId, namespace.id, identifier);
      return row ? [row.collection_id, row.collection_name] : undefined;
    });
    identifiers.registerLocator('collection', async (organizationId, id) => (await store.findById(organizationId, id))?.namespace_id);
    // A bucket or collection that collections read from is not deleted without force.
    const references = services.get(ReferenceRegistry);
    for (const [target, kind] of [['bucket', 'bucket_id'], ['collection', 'collection_id']] as const) {
      references.register(target, async (organizationId, id) =>
        (await store.readersOf(organizationId, kind, id)).map((reader) => ({
          resource_type: 'collection' as const,
          resource_id: reader.collection_id,
          resource_name: reader.collection_name,
          relation: 'source',
        })),
      );
    }
  },
  handlers: {
    createCollection: async ({ body, ctx, services }) => {
      const caller = callerOf(ctx);
      const row = await services.get(Collections).create(caller.organizationId, ctx.namespace, caller.userEmail, body);
      return { status: 201, body: toCollection(row) };
    },
    listCollections: async ({ query, ctx, services }) => {
      const limit = query.limit ?? 100;
      const offset = query.offset ?? 0;
      const rows = await services.get(Collections).list(callerOf(ctx).organizationId, namespaceOf(ctx));
      const page = rows.slice(offset, offset + limit);
      return { status: 200, body: { results: page.map(toCollection), total: rows.length, limit, offset, has_next: offset + limit < rows.length } };
    },
    getCollection: async ({ params, ctx, services }) => {
      const row = await services.get(Collections).get(callerOf(ctx).organizationId, namespaceOf(ctx), params.collection_identifier);
      return { status: 200, body: toCollection(row) };
    },
    updateCollection: async ({ params, body, ctx, services }) => {
      const row = await services.get(Collections).update(callerOf(ctx).organizationId, namespaceOf(ctx), params.collection_identifier, body);
      return { status: 200, body: toCollection(row) };
    },
    deleteCollection: async ({ params, query, ctx, services }) => {
      const row = await services
        .get(Collections)
        .delete(callerOf(ctx).organizationId, namespaceOf(ctx), params.collection_identifier, query.force ?? false);
      return { status: 200, body: { collection_id: row.collection_id, collection_name: row.collection_name, deleted: true } };
    },
    listFeatureExtractors: async ({ services }) => {
      const extractors = [...services.get(PluginRegistry).extractors.values()].sort((a, b) => a.name.localeCompare(b.name));
      return {
        status: 200,
        body: {
          total: extractors.length,
          results: extractors.map((e) => ({
            name: e.name,
            version: e.version,
            description: e.description,
            accepts: [...e.accepts],
            inputs: e.inputs.map((input) => ({ ...input })),
            parameters: e.parameters as Record<string, unknown>,
            outputs: {
              fields: e.fields as Record<string, unknown>,
              features: e.features.map((f) => ({ ...f, uri: featureUri(e, f.name) })),
            },
          })),
        },
      };
    },
  },
});
