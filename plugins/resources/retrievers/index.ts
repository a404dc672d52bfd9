/**
 * Retrievers: saved pipelines of stages over collections, their execution (saved with history, or ad hoc
 * with nothing kept), and the catalogue of registered stages. The pipeline engine is the kernel's
 * (kernel/retrieval); stages are plugins found through the registry.
 */
import { crossProcessOf } from '../../../kernel/db/pg-notices.js';
import type { components } from '../../../generated/openapi.js';
import type { RequestContext } from '../../../kernel/http/context.js';
import { callerOf } from '../../../kernel/http/handlers.js';
import { iso } from '../../../kernel/http/values.js';
import { PURGE_ORDER } from '../../../kernel/namespace-purge.js';
import { defineResource } from '../../../kernel/plugins.js';
import { RetrievalEngine, type ExecutionObserver, type ExecutionOutcome } from '../../../kernel/retrieval/engine.js';
import { PageCursors } from '../../../kernel/retrieval/page-cursors.js';
import type { PaginationRequest } from '../../../kernel/retrieval/pagination.js';
import {
  AuditLog,
  BlobSigningSecret,
  BlobStore,
  Clock,
  DatabaseHandle,
  Announcer,
  KeyStore,
  Lifecycle,
  NamespacePurges,
  PluginRegistry,
  ReferenceRegistry,
  ResourceIdentifiers,
  NamespaceResolver,
  RetrievalCacheInvalidation,
  RetrieverExecutor,
  RetrieverRemovals,
  SavedRetrievers,
  RetrieverAlertPolicy,
  RootLogger,
  TaskQueue,
  TenantStore,
  createToken,
} from '../../../kernel/tokens.js';
import { NotFoundError } from '../../../kernel/errors.js';
import type { SavedRetrievers as SavedRetrieverReader } from '../../../kernel/retrieval/saved.js';
import { CACHE_INVALIDATE_TASK, CACHE_SWEEP_TASK, NO_EXECUTIONS, RetrieverCacheStore, type CacheHitRate, type CacheInvalidationPayload } from './cache-store.js';
import { RetrieverKeyService, toRetrieverApiKey } from './api-keys.js';
import { ExecutionAlerts } from './alerts.js';
import { ExecutionHistory } from './execution-history.js';
import { retrieverExecutor } from './executor-binding.js';
import { retrieverMigrations } from './migrations.js';
import { RetrieverService, type Caller, type ExecuteOptions } from './service.js';
import { RetrieverStore, type ExecutionRow, type RetrieverRow } from './store.js';
import { streamExecution, wantsEventStream } from './streaming.js';

type Schemas = components['schemas'];

const Retrievers = createToken<RetrieverService>('retrievers.RetrieverService');
const Store = createToken<RetrieverStore>('retrievers.RetrieverStore');
const Cache = createToken<RetrieverCacheStore>('retrievers.RetrieverCacheStore');
const History = createToken<ExecutionHistory>('retrievers.ExecutionHistory');
const RetrieverKeys = createToken<RetrieverKeyService>('retrievers.RetrieverKeyService');
/** Expired cache rows are swept this often (and after every few hundred stored entries). */
const CACHE_SWEEP_INTERVAL_MS = 10 * 60 * 1000;

/** A retriever as every answer shows it, its cache statistics included (a new one has no executions yet). */
function toRetriever(row: RetrieverRow, cacheStatistics: CacheHitRate): Schemas['RetrieverConfig'] {
  return {
    cache_statistics: cacheStatistics,
    retriever_id: row.retriever_id,
    retriever_name: row.retriever_name,
    namespace_id: row.namespace_id,
    description: row.description,
    collection_identifiers: row.collection_identifiers,
    collection_ids: row.collection_ids,
    input_schema: row.input_schema,
    stages: row.stages,
    budget_limits: row.budget_limits,
    feature_dependencies: row.feature_dependencies,
    stage_versions: row.stage_versions,
    tags: row.tags,
    display_config: row.display_config,
    cache_config: row.cache_config,
    cache_stage_names: row.cache_stage_names,
    version: Number(row.version),
    created_at: iso(row.created_at),
    updated_at: iso(row.updated_at),
    created_by: row.created_by,
    updated_by: row.updated_by,
  };
}

function toExecution(row: ExecutionRow): Schemas['RetrieverExecutionRecord'] {
  return {
    execution_id: row.execution_id,
    retriever_id: row.retriever_id,
    retriever_version: Number(row.retriever_version),
    status: row.status,
    inputs: row.inputs,
    collection_ids: row.collection_ids,
    result_document_ids: row.result_document_ids,
    total_results: Number(row.total_results),
    stage_statistics: row.stage_statistics,
    budget: row.budget,
    error: row.error,
    duration_ms: Number(row.duration_ms),
    started_at: iso(row.started_at),
    created_by: row.created_by,
    cache_hit: row.cache_hit ?? null,
  };
}

function toResult(outcome: ExecutionOutcome, retriever: RetrieverRow | null): Schemas['RetrieverExecutionResult'] {
  return {
    execution_id: outcome.execution_id,
    status: outcome.status,
    documents: outcome.documents,
    pagination: outcome.pagination,
    stage_statistics: outcome.stage_statistics,
    budget: outcome.budget as Schemas['RetrieverBudgetUse'],
    error: outcome.error,
    optimization_applied: outcome.optimization !== null,
    ...(outcome.optimization ? { optimization_summary: outcome.optimization } : {}),
    execution_metadata: {
      retriever_persisted: retriever !== null,
      retriever_id: retriever?.retriever_id ?? null,
      retriever_version: retriever ? Number(retriever.version) : null,
      collection_ids: outcome.collection_ids,
    },
  };
}

type ExecuteBody = Pick<Schemas['RetrieverExecuteRequest'], 'inputs' | 'pagination' | 'settings' | 'return_presigned_urls' | 'return_vectors' | 'optimize'>;

/** The page asked for: `settings.limit` is the page size when `pagination` names none. */
function paginationOf(body: ExecuteBody | undefined): PaginationRequest | undefined {
  const limit = body?.settings?.limit;
  const pagination = body?.pagination;
  if (limit === undefined || pagination?.limit !== undefined || pagination?.page_size !== undefined) return pagination;
  return { ...pagination, limit };
}

function presignOf(body: ExecuteBody | undefined, query: { return_presigned_urls?: boolean }): boolean {
  return body?.return_presigned_urls === true || query.return_presigned_urls === true;
}

/** How one execute request (saved or ad hoc) asks to be run and answered. */
function executeOptions(
  body: ExecuteBody | undefined,
  query: { return_presigned_urls?: boolean },
  log: RequestContext['log'],
  streaming?: { observer: ExecutionObserver; signal: AbortSignal },
): ExecuteOptions {
  return {
    inputs: body?.inputs ?? {},
    ...optional('pagination', paginationOf(body)),
    presignUrls: presignOf(body, query),
    returnVectors: body?.return_vectors === true,
    ...optional('optimize', body?.optimize),
    ...streaming,
    log,
  };
}

function optional<K extends string, V>(key: K, value: V | undefined): { [P in K]?: V } {
  return (value === undefined ? {} : { [key]: value }) as { [P in K]?: V };
}

function namespaceOf(ctx: RequestContext) {
  if (!ctx.namespace) throw new Error('retriever routes declare X-Namespace as required');
  return ctx.namespace;
}

function callerFrom(ctx: RequestContext): Caller {
  const auth = callerOf(ctx);
  return { organizationId: auth.organizationId, principalId: auth.principalId, scopes: auth.scopes, userEmail: auth.userEmail };
}

export default defineResource({
  name: 'retrievers',
  migrations: retrieverMigrations,
  services: (container, services) => {
    // PGlite serves this process alone: its definitions can be kept in memory (kernel/db/local-read-cache.ts).
    const store = new RetrieverStore(services.get(DatabaseHandle).db, {
      onlyWriter: services.get(DatabaseHandle).kind === 'pglite',
      ...(services.get(DatabaseHandle).notices ? { notices: services.get(DatabaseHandle).notices } : {}),
      ...crossProcessOf(services),
    });
    container.bind(Store).toConstantValue(store);
    const cache = new RetrieverCacheStore(services.get(DatabaseHandle).db, services.get(Clock), () => services.get(TaskQueue), (organizationId, namespaceId, nameOrId) =>
      store.find(organizationId, namespaceId, nameOrId),
    );
    container.bind(Cache).toConstantValue(cache);
    container.bind(RetrievalCacheInvalidation).toConstantValue(cache);
    const engine = new RetrievalEngine(services.get(PluginRegistry), container, cache);
    const clock = services.get(Clock);
    const cursors = new PageCursors(services.get(BlobSigningSecret), clock);
    const history = new ExecutionHistory(store, services.get(RootLogger).child({ component: 'retriever-executions' }));
    container.bind(History).toConstantValue(history);
    const alerts = new ExecutionAlerts(services.get(DatabaseHandle).db, () => services.tryGet(RetrieverAlertPolicy), history, services.get(Announcer), services.get(RootLogger).child({ component: 'retriever-alerts' }));
    const retrievers = new RetrieverService(store, engine, clock, { cursors, blobs: () => services.get(BlobStore), history, alerts });
    container.bind(Retrievers).toConstantValue(retrievers);
    container.bind(RetrieverKeys).toConstantValue(
      new RetrieverKeyService({
        db: services.get(DatabaseHandle).db,
        keys: services.get(KeyStore),
        tenants: services.get(TenantStore),
        audit: services.get(AuditLog),
        announcer: services.get(Announcer),
        clock,
        retriever: (organizationId, namespace, nameOrId) => retrievers.get(organizationId, namespace, nameOrId),
      }),
    );
    container.bind(RetrieverExecutor).toConstantValue(retrieverExecutor(retrievers, store, () => services.get(NamespaceResolver)));
    const saved: SavedRetrieverReader = { find: (organizationId, namespaceId, nameOrId) => store.find(organizationId, namespaceId, nameOrId), flushHistory: () => history.flush() };
    container.bind(SavedRetrievers).toConstantValue(saved);
  },
  setup: ({ services, log }) => {
    const store = services.get(Store);
    const identifiers = services.get(ResourceIdentifiers);
    identifiers.register('retriever', async ({ organizationId, namespace, identifier }) => {
      if (!namespace) return undefined;
      const row = await store.find(organizationId, namespace.id, identifier);
      return row ? [row.retriever_id, row.retriever_name] : undefined;
    });
    identifiers.registerLocator('retriever', async (organizationId, id) => (await store.findById(organizationId, id))?.namespace_id);
    // A collection saved retrievers run over is not deleted from under them (force does not override this).
    services.get(ReferenceRegistry).register('collection', async (organizationId, collectionId) =>
      (await store.readersOf(organizationId, collectionId)).map((r) => ({
        resource_type: 'retriever' as const,
        resource_id: r.retriever_id,
        resource_name: r.retriever_name,
        relation: 'retrieves',
        blocking: true,
      })),
    );

    const cache = services.get(Cache);
    const tasks = services.get(TaskQueue);
    tasks.register(CACHE_INVALIDATE_TASK, async ({ task }) => cache.invalidate(task.payload as unknown as CacheInvalidationPayload));
    tasks.register(CACHE_SWEEP_TASK, async () => cache.sweep());
    const timer = setInterval(() => {
      cache.scheduleSweep().catch((err: unknown) => log.error({ err }, 'could not schedule the retriever cache sweep'));
    }, CACHE_SWEEP_INTERVAL_MS);
    timer.unref();
    services.get(Lifecycle).onShutdown('retrievers: cache sweep timer', () => clearInterval(timer));
    services.get(Lifecycle).onShutdown('retrievers: execution history', () => services.get(History).flush());

    // A deleted namespace's retrievers go first: with them their publications (the public names are free
    // again), executions and interactions (foreign keys), and their keys are revoked.
    services.get(NamespacePurges).register('retrievers', PURGE_ORDER.retrievers, async ({ organizationId, namespaceId, deletedBy }) => {
      await services.get(History).flush();
      const ids = await store.idsInNamespace(organizationId, namespaceId);
      for (const id of ids) await store.delete(id);
      const keys = await services.get(RetrieverKeys).revokeAllOf(organizationId, ids, { keyId: null, userEmail: deletedBy }, 'namespace deleted');
      const ended = await services.get(RetrieverRemovals).removed(ids.map((retrieverId) => ({ organizationId, retrieverId, deletedBy })));
      return { retrievers: ids.length, keys_revoked: keys, ...Object.fromEntries(Object.entries(ended).map(([hook, n]) => [`${hook}_ended`, n])) };
    });
  },
  handlers: {
    createRetrieverApiKey: async ({ params, body, ctx, services }) => {
      const { key, plaintext } = await services
        .get(RetrieverKeys)
        .create({ auth: callerOf(ctx), requestId: ctx.requestId }, namespaceOf(ctx), params.retriever_id, body);
      return { status: 201, body: { ...toRetrieverApiKey(key, services.get(Clock).now()), key: plaintext } };
    },
    listRetrieverApiKeys: async ({ params, query, ctx, services }) => {
      const keys = await services.get(RetrieverKeys).list(callerOf(ctx), namespaceOf(ctx), params.retriever_id, query.include_revoked ?? false);
      const now = services.get(Clock).now();
      return { status: 200, body: { results: keys.map((k) => toRetrieverApiKey(k, now)), total: keys.length } };
    },
    revokeRetrieverApiKey: async ({ params, ctx, services }) => {
      const key = await services
        .get(RetrieverKeys)
        .revoke({ auth: callerOf(ctx), requestId: ctx.requestId }, namespaceOf(ctx), params.retriever_id, params.key_id);
      return { status: 200, body: toRetrieverApiKey(key, services.get(Clock).now()) };
    },
    createRetriever: async ({ body, ctx, services }) => {
      const row = await services.get(Retrievers).create(callerFrom(ctx), namespaceOf(ctx), body);
      return { status: 201, body: { retriever: toRetriever(row, NO_EXECUTIONS) } };
    },
    listRetrievers: async ({ query, ctx, services }) => {
      const limit = query.limit ?? 100;
      const offset = query.offset ?? 0;
      const tags = query.tags?.split(',').map((t) => t.trim()).filter((t) => t.length > 0);
      const { rows, total } = await services.get(Store).list({
        organizationId: callerOf(ctx).organizationId,
        namespaceId: namespaceOf(ctx).id,
        ...(query.search ? { search: query.search } : {}),
        ...(tags && tags.length > 0 ? { tags } : {}),
        limit,
        offset,
      });
      await services.get(History).flush();
      const rates = await services.get(Cache).hitRates(rows.map((r) => r.retriever_id));
      const results = rows.map((r) => toRetriever(r, rates.get(r.retriever_id)!));
      return { status: 200, body: { results, total, limit, offset, has_next: offset + rows.length < total } };
    },
    listRetrieverStages: async ({ services }) => {
      const stages = [...services.get(PluginRegistry).stages.values()].sort((a, b) => a.id.localeCompare(b.id));
      return {
        status: 200,
        body: {
          total: stages.length,
          results: stages.map((s) => ({
            stage_id: s.id,
            stage_type: s.type,
            version: s.version,
            description: s.description,
            parameters: s.parameters as Record<string, unknown>,
          })),
        },
      };
    },
    getRetriever: async ({ params, ctx, services }) => {
      const row = await services.get(Retrievers).get(callerOf(ctx).organizationId, namespaceOf(ctx), params.retriever_id);
      await services.get(History).flush();
      return { status: 200, body: { retriever: toRetriever(row, await services.get(Cache).hitRate(row.retriever_id)) } };
    },
    updateRetriever: async ({ params, body, ctx, services }) => {
      const row = await services.get(Retrievers).update(callerFrom(ctx), namespaceOf(ctx), params.retriever_id, body);
      await services.get(History).flush();
      return { status: 200, body: { retriever: toRetriever(row, await services.get(Cache).hitRate(row.retriever_id)) } };
    },
    cloneRetriever: async ({ params, body, ctx, services }) => {
      const row = await services.get(Retrievers).clone(callerFrom(ctx), namespaceOf(ctx), params.retriever_id, body ?? {});
      return { status: 201, body: { retriever: toRetriever(row, NO_EXECUTIONS) } };
    },
    deleteRetriever: async ({ params, ctx, services }) => {
      const caller = callerOf(ctx);
      const row = await services.get(Retrievers).delete(caller.organizationId, namespaceOf(ctx), params.retriever_id);
      // Its publication, executions and interactions went with it (foreign keys); its keys are revoked, and
      // other plugins end what they hold for it (e.g. other organizations' marketplace subscriptions).
      await services
        .get(RetrieverKeys)
        .revokeAllOf(caller.organizationId, [row.retriever_id], { keyId: caller.keyId, userEmail: caller.userEmail, requestId: ctx.requestId }, 'retriever deleted');
      await services.get(RetrieverRemovals).removed([{ organizationId: caller.organizationId, retrieverId: row.retriever_id, deletedBy: caller.userEmail, requestId: ctx.requestId }]);
      return { status: 200, body: { retriever_id: row.retriever_id, retriever_name: row.retriever_name, deleted: true } };
    },
    executeRetriever: async ({ params, query, body, ctx, services, req, res }) => {
      const retrievers = services.get(Retrievers);
      const run = async (streaming?: { observer: ExecutionObserver; signal: AbortSignal }) => {
        const { row, outcome } = await retrievers.execute(callerFrom(ctx), namespaceOf(ctx), params.retriever_id, executeOptions(body, query, ctx.log, streaming));
        ctx.credits += outcome.budget.credits_used;
        return toResult(outcome, row);
      };
      if (wantsEventStream(req, body?.stream)) return streamExecution(res, ctx.log, {}, (observer, signal) => run({ observer, signal }));
      return { status: 200, body: await run() };
    },
    executeAdHocRetriever: async ({ query, body, ctx, services, req, res }) => {
      const retrievers = services.get(Retrievers);
      const run = async (streaming?: { observer: ExecutionObserver; signal: AbortSignal }) => {
        const outcome = await retrievers.executeAdHoc(callerFrom(ctx), namespaceOf(ctx), body, executeOptions(body, query, ctx.log, streaming));
        ctx.credits += outcome.budget.credits_used;
        return toResult(outcome, null);
      };
      const headers = { 'X-Execution-Mode': 'anonymous' };
      if (wantsEventStream(req, body.stream)) return streamExecution(res, ctx.log, headers, (observer, signal) => run({ observer, signal }));
      return { status: 200, body: await run(), headers };
    },
    explainRetriever: async ({ params, body, ctx, services }) => {
      const { row, explanation } = await services.get(Retrievers).explain(callerFrom(ctx), namespaceOf(ctx), params.retriever_id, body?.inputs ?? {}, body?.optimize);
      return { status: 200, body: { retriever_id: row.retriever_id, ...explanation } };
    },
    explainAdHocRetriever: async ({ body, ctx, services }) => {
      const explanation = await services.get(Retrievers).explainAdHoc(callerFrom(ctx), namespaceOf(ctx), body);
      return { status: 200, body: { retriever_id: null, ...explanation } };
    },
    recordRetrieverInteractions: async ({ params, body, ctx, services, req }) => {
      const given = 'interactions' in body ? body.interactions : [body];
      // X-Session-ID is the session of every interaction that names none, as on the public endpoints.
      const session = req.get('x-session-id');
      const interactions = session === undefined ? given : given.map((i) => ({ session_id: session, ...i }));
      const ids = await services.get(Retrievers).recordInteractions(callerFrom(ctx), namespaceOf(ctx), params.retriever_id, interactions);
      return { status: 200, body: { recorded: ids.length, interaction_ids: ids } };
    },
    listRetrieverExecutions: async ({ params, query, ctx, services }) => {
      const retriever = await services.get(Retrievers).get(callerOf(ctx).organizationId, namespaceOf(ctx), params.retriever_id);
      await services.get(History).flush();
      const limit = query.limit ?? 100;
      const offset = query.offset ?? 0;
      const { rows, total } = await services.get(Store).listExecutions(retriever.retriever_id, callerOf(ctx).principalId, limit, offset);
      return { status: 200, body: { results: rows.map(toExecution), total, limit, offset, has_next: offset + rows.length < total } };
    },
    getRetrieverExecution: async ({ params, ctx, services }) => {
      const retriever = await services.get(Retrievers).get(callerOf(ctx).organizationId, namespaceOf(ctx), params.retriever_id);
      await services.get(History).flush();
      const row = await services.get(Store).findExecution(retriever.retriever_id, params.execution_id, callerOf(ctx).principalId);
      if (!row) throw new NotFoundError(`Execution '${params.execution_id}' of retriever '${retriever.retriever_name}' not found`, { execution_id: params.execution_id });
      return { status: 200, body: toExecution(row) };
    },
  },
});
