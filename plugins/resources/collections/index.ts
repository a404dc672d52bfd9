/**
 * Collections: documents made from a bucket (or another collection) by feature extractors. This module is
 * the collection resource itself and the extractor catalogue; documents and batches build on it.
 */
import { crossProcessOf } from '../../../kernel/db/pg-notices.js';
import type { components } from '../../../generated/openapi.js';
import type { RequestContext } from '../../../kernel/http/context.js';
import { callerOf } from '../../../kernel/http/handlers.js';
import { iso } from '../../../kernel/http/values.js';
import { PURGE_ORDER } from '../../../kernel/namespace-purge.js';
import { defineResource } from '../../../kernel/plugins.js';
import {
  BlobStore,
  Clock,
  CollectionProcessor,
  Config,
  DatabaseHandle,
  Inference,
  NamespacePurges,
  ObjectCatalog,
  RootLogger,
  VectorIndex,
  TextIndex,
  Announcer,
  PluginRegistry,
  ReferenceRegistry,
  ResourceIdentifiers,
  createToken,
  DocumentSource,
  RetrievalCacheInvalidation,
} from '../../../kernel/tokens.js';
import { DocumentReadCache } from './document-cache.js';
import { DocumentChanges } from './document-changes.js';
import { collectionMigrations } from './migrations.js';
import { CollectionDocumentSource } from './retrieval-source.js';
import { DocumentProcessor } from './processing/processor.js';
import { CollectionService, featureUri } from './service.js';
import { CollectionStore, type CollectionRow } from './store.js';
import { DocumentStore, type DocumentRow, type DocumentSortField } from './document-store.js';
import { DocumentGrants, type GrantChange } from './document-grants.js';
import { DirectDocumentWriter } from './document-writes.js';
import { documentView } from './document-view.js';
import { DocumentReads, type DocumentReadOptions } from './document-reads.js';
import { refreshVectorPayloads } from './features.js';
import { parseFilter } from '../../../kernel/filters/filter.js';
import { InputError, NotFoundError } from '../../../kernel/errors.js';
import type { Services } from '../../../kernel/tokens.js';

const Collections = createToken<CollectionService>('collections.CollectionService');
const Store = createToken<CollectionStore>('collections.CollectionStore');
/** Where processing writes documents (batches) and the documents API reads them. */
export const Documents = createToken<DocumentStore>('collections.DocumentStore');
/** Documents retrieval keeps in memory on the embedded database: code that writes around `DocumentChanges` (tests) forgets them here. */
export const DocumentCache = createToken<DocumentReadCache>('collections.DocumentReadCache');
const Processor = createToken<DocumentProcessor>('collections.DocumentProcessor');
const DirectWriter = createToken<DirectDocumentWriter>('collections.DirectDocumentWriter');
const Grants = createToken<DocumentGrants>('collections.DocumentGrants');
const Changes = createToken<DocumentChanges>('collections.DocumentChanges');
const Reads = createToken<DocumentReads>('collections.DocumentReads');

function toGrants(change: GrantChange): components['schemas']['DocumentGrants'] {
  return {
    document_id: change.document.document_id,
    owner_principal: change.document.owner_principal,
    grants: change.document.grants,
    derived_documents: change.derived,
  };
}

/** The collection a documents route names, in the request's namespace (404 otherwise). */
async function collectionOf(ctx: RequestContext, services: Services, identifier: string): Promise<CollectionRow> {
  return services.get(Collections).get(callerOf(ctx).organizationId, namespaceOf(ctx), identifier);
}

async function documentOf(ctx: RequestContext, services: Services, collection: CollectionRow, documentId: string): Promise<DocumentRow> {
  const caller = callerOf(ctx);
  const row = await services.get(Documents).get(caller.organizationId, collection.collection_id, documentId, caller.principalId);
  if (!row) throw new NotFoundError(`Document '${documentId}' not found in collection '${collection.collection_name}'`, { document_id: documentId });
  return row;
}

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

/** `return_presigned_urls` / `return_vectors` of a document read (query or body), both off unless asked for. */
function readOptions(asked: { return_presigned_urls?: boolean; return_vectors?: boolean }): DocumentReadOptions {
  return { presignedUrls: asked.return_presigned_urls === true, vectors: asked.return_vectors === true };
}

function namespaceOf(ctx: RequestContext) {
  if (!ctx.namespace) throw new Error('collection routes declare X-Namespace as required');
  return ctx.namespace;
}

export default defineResource({
  name: 'collections',
  migrations: collectionMigrations,
  services: (container, services) => {
    // PGlite serves this process alone: definitions and documents retrieval reads can be kept in memory.
    const { kind, notices } = services.get(DatabaseHandle);
    const onlyWriter = kind === 'pglite';
    const store = new CollectionStore(services.get(DatabaseHandle).db, { onlyWriter, ...(notices ? { notices } : {}), ...crossProcessOf(services) });
    container.bind(Store).toConstantValue(store);
    const documents = new DocumentStore(services.get(DatabaseHandle).db, services.get(TextIndex), { singleConnection: onlyWriter });
    container.bind(Documents).toConstantValue(documents);
    const documentCache = new DocumentReadCache(onlyWriter, notices);
    container.bind(DocumentCache).toConstantValue(documentCache);
    const changes = new DocumentChanges(services.get(DatabaseHandle).db, services.get(Announcer), () => services.tryGet(RetrievalCacheInvalidation), documentCache);
    container.bind(Changes).toConstantValue(changes);
    const processor = new DocumentProcessor({
        db: services.get(DatabaseHandle).db,
        collections: store,
        documents,
        plugins: services.get(PluginRegistry),
        blobs: services.get(BlobStore),
        vectors: services.get(VectorIndex),
        announcer: services.get(Announcer),
        changes,
        log: services.get(RootLogger).child({ component: 'processing' }),
        objects: () => services.get(ObjectCatalog),
        inference: () => services.get(Inference),
        mediaProcesses: services.get(Config).mediaProcesses,
    });
    container.bind(Processor).toConstantValue(processor);
    container.bind(CollectionProcessor).toConstantValue(processor);
    const direct = { db: services.get(DatabaseHandle).db, vectors: services.get(VectorIndex), plugins: services.get(PluginRegistry) };
    container.bind(DirectWriter).toConstantValue(new DirectDocumentWriter({ ...direct, documents }));
    container.bind(Grants).toConstantValue(new DocumentGrants({ ...direct, collections: store }));
    container.bind(Reads).toConstantValue(new DocumentReads(() => services.get(BlobStore), () => services.get(DocumentSource)));
    container.bind(DocumentSource).toConstantValue(new CollectionDocumentSource(services.get(DatabaseHandle), store, services.get(PluginRegistry), services.get(VectorIndex), documentCache));
    container.bind(Collections).toConstantValue(
      new CollectionService(
        store,
        services.get(PluginRegistry),
        services.get(ResourceIdentifiers),
        services.get(ReferenceRegistry),
        services.get(Announcer),
        services.get(Clock),
        () => services.get(ObjectCatalog),
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
    // A deleted namespace's collections: vectors, stored artifacts and text index first, then the row (its
    // documents go with it), so a retried purge finds whatever is left. Derived collections before their sources.
    services.get(NamespacePurges).register('collections', PURGE_ORDER.collections, async ({ organizationId, namespaceId }) => {
      const rows = await store.list(organizationId, namespaceId);
      rows.sort((a, b) => Number(b.source.type === 'collection') - Number(a.source.type === 'collection'));
      for (const row of rows) {
        await services.get(Processor).forgetCollection(row);
        await store.delete(row.collection_id);
        await services.get(Changes).changed(row, 'collection.deleted', []);
      }
      return { collections: rows.length };
    });
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
      await services.get(Processor).forgetCollection(row);
      await services.get(Changes).changed(row, 'collection.deleted', []);
      return { status: 200, body: { collection_id: row.collection_id, collection_name: row.collection_name, deleted: true } };
    },
    listDocuments: async ({ params, query, ctx, services }) => {
      const collection = await collectionOf(ctx, services, params.collection_identifier);
      const { rows, nextCursor } = await services.get(Documents).list({
        organizationId: collection.organization_id,
        collectionId: collection.collection_id,
        principalId: callerOf(ctx).principalId,
        sort: 'created_at',
        direction: 'desc',
        limit: query.limit ?? 100,
        ...(query.cursor ? { cursor: query.cursor } : {}),
      });
      const results = await services.get(Reads).views(callerOf(ctx), collection, rows, readOptions(query));
      return { status: 200, body: { results, has_next: nextCursor !== null, next_cursor: nextCursor } };
    },
    searchDocuments: async ({ params, body, ctx, services }) => {
      const collection = await collectionOf(ctx, services, params.collection_identifier);
      const { rows, nextCursor } = await services.get(Documents).list({
        organizationId: collection.organization_id,
        collectionId: collection.collection_id,
        principalId: callerOf(ctx).principalId,
        sort: (body.sort?.field ?? 'created_at') as DocumentSortField,
        direction: body.sort?.direction ?? 'desc',
        limit: body.limit ?? 100,
        ...(body.filters ? { filter: parseFilter(body.filters) } : {}),
        ...(body.cursor ? { cursor: body.cursor } : {}),
      });
      const results = await services.get(Reads).views(callerOf(ctx), collection, rows, readOptions(body));
      return { status: 200, body: { results, has_next: nextCursor !== null, next_cursor: nextCursor } };
    },
    getDocument: async ({ params, query, ctx, services }) => {
      const collection = await collectionOf(ctx, services, params.collection_identifier);
      const row = await documentOf(ctx, services, collection, params.document_id);
      const [view] = await services.get(Reads).views(callerOf(ctx), collection, [row], readOptions(query));
      return { status: 200, body: view! };
    },
    updateDocument: async ({ params, body, ctx, services }) => {
      const collection = await collectionOf(ctx, services, params.collection_identifier);
      const row = await documentOf(ctx, services, collection, params.document_id);
      // One timestamp for the row and the vector payloads (searches may answer from either).
      const updated = { ...row, metadata: body.metadata, updated_at: new Date() };
      await services.get(Documents).updateMetadata(row.document_id, body.metadata, updated.updated_at);
      // Vector payloads carry metadata (search filters read them there).
      await refreshVectorPayloads(services.get(VectorIndex), services.get(PluginRegistry), new Map([[collection.collection_id, collection]]), [updated]);
      await services.get(Changes).changed(collection, 'document.updated', [row.document_id]);
      return { status: 200, body: documentView(updated, callerOf(ctx).principalId) };
    },
    createDocument: async ({ params, body, ctx, services }) => {
      const collection = await collectionOf(ctx, services, params.collection_identifier);
      const viewer = callerOf(ctx).principalId;
      const [result] = await services.get(DirectWriter).write(collection, [body], viewer, () => ['body']);
      await services.get(Changes).changed(collection, result!.created ? 'document.created' : 'document.updated', [result!.row.document_id]);
      return { status: result!.created ? 201 : 200, body: documentView(result!.row, viewer) };
    },
    upsertDocuments: async ({ params, body, ctx, services }) => {
      const collection = await collectionOf(ctx, services, params.collection_identifier);
      const results = await services.get(DirectWriter).write(collection, body.documents, callerOf(ctx).principalId, (i) => ['body', 'documents', i]);
      const created = results.filter((r) => r.created).length;
      const changes = services.get(Changes);
      await changes.changed(collection, 'document.created', results.filter((r) => r.created).map((r) => r.row.document_id));
      await changes.changed(collection, 'document.updated', results.filter((r) => !r.created).map((r) => r.row.document_id));
      return {
        status: 200,
        body: {
          results: results.map((r) => ({ document_id: r.row.document_id, key: r.key, created: r.created })),
          created,
          replaced: results.length - created,
        },
      };
    },
    grantDocument: async ({ params, body, ctx, services }) => {
      const collection = await collectionOf(ctx, services, params.collection_identifier);
      const change = await services.get(Grants).grant(collection, params.document_id, body.principal_ids, callerOf(ctx).principalId);
      for (const c of change.changed) await services.get(Changes).changed(c.collection, 'document.updated', c.documentIds, { change: 'grants' });
      return { status: 200, body: toGrants(change) };
    },
    revokeDocument: async ({ params, ctx, services }) => {
      const collection = await collectionOf(ctx, services, params.collection_identifier);
      const change = await services.get(Grants).revoke(collection, params.document_id, params.principal_id, callerOf(ctx).principalId);
      for (const c of change.changed) await services.get(Changes).changed(c.collection, 'document.updated', c.documentIds, { change: 'grants' });
      return { status: 200, body: toGrants(change) };
    },
    deleteDocument: async ({ params, ctx, services }) => {
      const collection = await collectionOf(ctx, services, params.collection_identifier);
      const row = await documentOf(ctx, services, collection, params.document_id);
      await services.get(Documents).delete(collection.collection_id, [row.document_id]);
      await services.get(Processor).forgetDocuments(collection, [row.document_id]);
      await services.get(Changes).changed(collection, 'document.deleted', [row.document_id]);
      return { status: 200, body: { document_id: row.document_id, deleted: true } };
    },
    deleteDocumentsByFilter: async ({ params, body, ctx, services }) => {
      const collection = await collectionOf(ctx, services, params.collection_identifier);
      const filter = parseFilter(body.filters);
      const hasCondition = (g: typeof filter.root): boolean =>
        [...g.and, ...g.or, ...g.not].some((n) => n.kind === 'condition' || hasCondition(n));
      // An empty filter would delete everything: that is what deleting the collection is for.
      if (!hasCondition(filter.root)) throw new InputError('filters must hold at least one condition');
      const documents = services.get(Documents);
      const ids = await documents.idsMatching(collection.organization_id, collection.collection_id, filter, callerOf(ctx).principalId);
      const deleted = await documents.delete(collection.collection_id, ids);
      await services.get(Processor).forgetDocuments(collection, ids);
      await services.get(Changes).changed(collection, 'document.deleted', ids);
      return { status: 200, body: { deleted } };
    },
    getDecompositionTree: async ({ params, ctx, services }) => {
      const caller = callerOf(ctx);
      const rows = await services.get(Documents).tree(caller.organizationId, namespaceOf(ctx).id, params.object_id, caller.principalId);
      type Node = components['schemas']['DecompositionNode'];
      const nodes = new Map<string, Node>(
        rows.map((r) => [
          r.document_id,
          { document_id: r.document_id, collection_id: r.collection_id, processing_tier: Number(r.processing_tier), source_document_id: r.source_document_id, children: [] },
        ]),
      );
      const roots: Node[] = [];
      for (const node of nodes.values()) {
        const parent = node.source_document_id ? nodes.get(node.source_document_id) : undefined;
        if (parent) parent.children.push(node);
        else roots.push(node);
      }
      return { status: 200, body: { object_id: params.object_id, total_documents: rows.length, roots } };
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
