/**
 * `/v1/analytics/*`: figures computed from what the service records — retriever executions and
 * interactions, the request log and the result cache. Read-only; every query filters by the caller's
 * organization, and retriever reports by the retriever the namespace and scopes let the key reach.
 */
import type { components } from '../../../generated/openapi.js';
import { operationTable } from '../../../generated/operations.js';
import type { AuthContext } from '../../../kernel/auth/authenticator.js';
import { scopesAllow } from '../../../kernel/auth/scopes.js';
import type { RequestContext } from '../../../kernel/http/context.js';
import { callerOf } from '../../../kernel/http/handlers.js';
import { iso } from '../../../kernel/http/values.js';
import { defineResource } from '../../../kernel/plugins.js';
import { cacheRequestOf } from '../../../kernel/retrieval/cache.js';
import { NotFoundError } from '../../../kernel/errors.js';
import { unpackInputs } from '../../../kernel/retrieval/history-inputs.js';
import { liveTaskWorkers } from '../../../kernel/tasks/worker-heartbeat.js';
import { Clock, DatabaseHandle, InferenceCallStats, PluginRegistry, RequestLog, SavedRetrievers, createToken, type Services } from '../../../kernel/tokens.js';
import { analyze } from './analyze.js';
import { PlatformAnalyticsQueries, type NamespaceFilter } from './platform-queries.js';
import { InferenceAnalyticsQueries, inferenceFigures, sumGroups } from './inference-queries.js';
import { ProcessingAnalyticsQueries, type ExtractorRow, type TaskFiguresRow } from './processing-queries.js';
import { RetrieverAnalyticsQueries, type ExecutionTotals, type SignalGrouping } from './retriever-queries.js';
import { figure, latencyOf, rate, windowFields, windowOf, type Window } from './window.js';

type Schemas = components['schemas'];

const RetrieverQueries = createToken<RetrieverAnalyticsQueries>('analytics.RetrieverAnalyticsQueries');
const PlatformQueries = createToken<PlatformAnalyticsQueries>('analytics.PlatformAnalyticsQueries');
const ProcessingQueries = createToken<ProcessingAnalyticsQueries>('analytics.ProcessingAnalyticsQueries');
const InferenceQueries = createToken<InferenceAnalyticsQueries>('analytics.InferenceAnalyticsQueries');

/** Rows an API performance report lists at most. */
const MAX_API_ROWS = 500;
/** Retrievers a cache report lists at most. */
const MAX_CACHE_RETRIEVERS = 100;

function windowFrom(services: Services, query: { start_time?: string; end_time?: string }): Window {
  return windowOf(services.get(Clock).now(), query);
}

/**
 * What every retriever report starts from: its window, the saved retriever the path names in the request's
 * namespace (its history written out first), the principal a user-scoped key counts for, and the queries.
 */
async function retrieverReport(services: Services, ctx: RequestContext, identifier: string, query: { start_time?: string; end_time?: string }) {
  const window = windowFrom(services, query);
  if (!ctx.namespace) throw new Error('retriever analytics declare X-Namespace as required');
  const saved = services.get(SavedRetrievers);
  const retriever = await saved.find(callerOf(ctx).organizationId, ctx.namespace.id, identifier);
  if (!retriever) throw new NotFoundError(`Retriever '${identifier}' not found in namespace '${ctx.namespace.name}'`, { retriever: identifier });
  await saved.flushHistory();
  return { window, retriever, principal: callerOf(ctx).principalId, queries: services.get(RetrieverQueries) };
}

function performanceFigures(totals: ExecutionTotals) {
  const latency = latencyOf(totals);
  return {
    executions: totals.executions,
    failed: totals.failed,
    error_rate: rate(totals.failed + totals.budget_exceeded, totals.executions),
    cache_hit_rate: rate(totals.cache_hits, totals.cached_executions),
    p50_latency_ms: latency.p50_ms,
    p95_latency_ms: latency.p95_ms,
    p99_latency_ms: latency.p99_ms,
  };
}

/** Namespaces a report covers: the request's, or every one the key's scopes let it read (null: all). */
async function namespacesInReach(services: Services, ctx: RequestContext, caller: AuthContext): Promise<NamespaceFilter> {
  if (ctx.namespace) return [ctx.namespace.id];
  if (caller.scopes.length === 0) return null;
  const all = await services.get(PlatformQueries).namespaces(caller.organizationId);
  return all
    .filter((ns) =>
      scopesAllow(caller.scopes, {
        organizationId: caller.organizationId,
        resource: { type: 'namespace', identifiers: [ns.namespace_id, ns.namespace_name] },
        namespace: { id: ns.namespace_id, name: ns.namespace_name },
        operation: 'read_data',
      }),
    )
    .map((ns) => ns.namespace_id);
}

function ttlOf(retrieverId: string, cacheConfig: unknown): number | null {
  return cacheRequestOf(retrieverId, cacheConfig as Schemas['RetrieverCacheConfig'], null)?.ttlSeconds ?? null;
}

function resourceTypeOf(operationId: string | null): string {
  const operation = operationId ? (operationTable as Record<string, { scope: { resource_type: string } | null }>)[operationId] : undefined;
  return operation?.scope?.resource_type ?? 'other';
}

/** A task figures row as the report shows it. */
function taskFigures(row: TaskFiguresRow) {
  return {
    tasks: row.tasks,
    completed: row.completed,
    failed: row.failed,
    waiting: row.waiting,
    running: row.running,
    retries: row.retries,
    run_ms: latencyOf(row, 'run_'),
    wait_ms: latencyOf(row, 'wait_'),
    busy_ms: figure(row.busy_ms) ?? 0,
  };
}

function extractorFigures(row: ExtractorRow) {
  return {
    chunks: row.chunks,
    objects: row.objects,
    documents_written: row.documents_written,
    documents_skipped: row.documents_skipped,
    failed_objects: row.failed_objects,
    failure_rate: rate(row.failed_objects, row.objects),
    total_ms: figure(row.total_ms) ?? 0,
    avg_ms_per_object: row.objects > 0 ? figure(Number(row.total_ms) / row.objects) : null,
    retries: row.retries,
  };
}

/** Collections an extractor report lists at most. */
const MAX_EXTRACTOR_COLLECTIONS = 100;

export default defineResource({
  name: 'analytics',
  services: (container, services) => {
    const db = services.get(DatabaseHandle).db;
    container.bind(RetrieverQueries).toConstantValue(new RetrieverAnalyticsQueries(db));
    container.bind(PlatformQueries).toConstantValue(new PlatformAnalyticsQueries(db));
    container.bind(ProcessingQueries).toConstantValue(new ProcessingAnalyticsQueries(db));
    container.bind(InferenceQueries).toConstantValue(new InferenceAnalyticsQueries(db));
  },
  handlers: {
    getRetrieverPerformance: async ({ params, query, ctx, services }) => {
      const { window, retriever, principal, queries } = await retrieverReport(services, ctx, params.retriever_id, query);
      const totals = await queries.totals(retriever.retriever_id, principal, window);
      const periods = query.group_by ? await queries.periods(retriever.retriever_id, principal, window, query.group_by) : [];
      const figures = performanceFigures(totals);
      return {
        status: 200,
        body: {
          retriever_id: retriever.retriever_id,
          retriever_name: retriever.retriever_name,
          ...windowFields(window),
          ...figures,
          completed: totals.completed,
          budget_exceeded: totals.budget_exceeded,
          cached_executions: totals.cached_executions,
          latency: latencyOf(totals),
          avg_results: figure(totals.avg_results),
          credits_used: figure(totals.credits) ?? 0,
          group_by: query.group_by ?? null,
          series: periods.map((p) => ({ period_start: iso(p.period_start), ...performanceFigures(p) })),
        },
      };
    },

    getRetrieverStagePerformance: async ({ params, query, ctx, services }) => {
      const { window, retriever, principal, queries } = await retrieverReport(services, ctx, params.retriever_id, query);
      const totals = await queries.totals(retriever.retriever_id, principal, window);
      const stages = await queries.stages(retriever.retriever_id, principal, window);
      const allTime = stages.reduce((sum, s) => sum + Number(s.total_ms), 0);
      const position = new Map(retriever.stages.map((s, i) => [s.stage_name, i]));
      const ordered = [...stages].sort((a, b) => (position.get(a.stage_name) ?? Infinity) - (position.get(b.stage_name) ?? Infinity));
      return {
        status: 200,
        body: {
          retriever_id: retriever.retriever_id,
          ...windowFields(window),
          executions: totals.executions,
          stages: ordered.map((s) => ({
            stage_name: s.stage_name,
            stage_id: s.stage_id,
            stage_index: position.get(s.stage_name) ?? null,
            in_current_definition: position.has(s.stage_name),
            executions: s.executions,
            completed: s.completed,
            failed: s.failed,
            skipped: s.skipped,
            optimized_away: s.optimized_away,
            cache_hits: s.cache_hits,
            avg_ms: figure(s.avg_ms),
            p50_ms: figure(s.p50_ms),
            p95_ms: figure(s.p95_ms),
            max_ms: figure(s.max_ms),
            total_ms: figure(s.total_ms) ?? 0,
            time_share: rate(Number(s.total_ms), allTime),
            avg_input_count: figure(s.avg_input_count),
            avg_output_count: figure(s.avg_output_count),
          })),
        },
      };
    },

    getRetrieverSignals: async ({ params, query, ctx, services }) => {
      const { window, retriever, principal, queries } = await retrieverReport(services, ctx, params.retriever_id, query);
      const by: SignalGrouping = query.group_by ?? 'position';
      const limit = query.limit ?? 100;
      const totals = await queries.signalTotals(retriever.retriever_id, principal, window);
      const groups = await queries.signalGroups(retriever.retriever_id, principal, window, by, limit);
      const page = groups.slice(0, limit);
      const counts = await queries.signalCounts(retriever.retriever_id, principal, window, by, page.map((g) => g.key));
      const countsOf = new Map<string, Record<string, number>>();
      for (const c of counts) {
        const key = String(c.key);
        countsOf.set(key, { ...countsOf.get(key), [c.type]: Number(c.n) });
      }
      const ctr = (types: Record<string, number>) => rate(types.CLICK ?? 0, types.VIEW ?? 0);
      return {
        status: 200,
        body: {
          retriever_id: retriever.retriever_id,
          ...windowFields(window),
          group_by: by,
          total_interactions: totals.interactions,
          sessions: totals.sessions,
          documents: totals.documents,
          counts: totals.counts,
          click_through_rate: ctr(totals.counts),
          results: page.map((g) => {
            const types = countsOf.get(String(g.key)) ?? {};
            return {
              position: by === 'position' && g.key !== null ? Number(g.key) : null,
              document_id: by === 'document' ? (g.key as string) : null,
              session_id: by === 'session' ? (g.key as string | null) : null,
              interactions: g.interactions,
              counts: types,
              click_through_rate: ctr(types),
              first_at: iso(g.first_at),
              last_at: iso(g.last_at),
            };
          }),
          has_more: groups.length > limit,
        },
      };
    },

    listRetrieverSlowestExecutions: async ({ params, query, ctx, services }) => {
      const { window, retriever, principal, queries } = await retrieverReport(services, ctx, params.retriever_id, query);
      const rows = await queries.slowest(retriever.retriever_id, principal, window, query.limit ?? 10);
      return {
        status: 200,
        body: {
          retriever_id: retriever.retriever_id,
          ...windowFields(window),
          results: rows.map((row) => {
            const statistics = typeof row.stage_statistics === 'string' ? (JSON.parse(row.stage_statistics) as typeof row.stage_statistics) : row.stage_statistics;
            const stages = typeof statistics === 'string' ? {} : (statistics.stages ?? {});
            return {
              execution_id: row.execution_id,
              retriever_version: row.retriever_version,
              status: row.status,
              duration_ms: figure(row.duration_ms) ?? 0,
              started_at: iso(row.started_at),
              inputs: unpackInputs(row.inputs),
              total_results: row.total_results,
              cache_hit: row.cache_hit,
              error: row.error,
              stages: Object.entries(stages)
                .map(([name, s]) => ({ stage_name: name, stage_id: s.stage_id ?? '', status: s.status ?? 'completed', duration_ms: figure(s.duration_ms) ?? 0 }))
                .sort((a, b) => b.duration_ms - a.duration_ms),
            };
          }),
        },
      };
    },

    analyzeRetriever: async ({ params, query, ctx, services }) => {
      const { window, retriever, principal, queries } = await retrieverReport(services, ctx, params.retriever_id, query);
      const totals = await queries.totals(retriever.retriever_id, principal, window);
      const stages = await queries.stages(retriever.retriever_id, principal, window);
      return {
        status: 200,
        body: {
          retriever_id: retriever.retriever_id,
          ...windowFields(window),
          executions: totals.executions,
          p95_latency_ms: figure(totals.p95_ms),
          cache_hit_rate: rate(totals.cache_hits, totals.cached_executions),
          suggestions: analyze({ retriever, totals, stages }),
        },
      };
    },

    getApiPerformance: async ({ query, ctx, services }) => {
      const window = windowFrom(services, query);
      const organizationId = callerOf(ctx).organizationId;
      const by = query.group_by ?? 'endpoint';
      await services.get(RequestLog).flush();
      const queries = services.get(PlatformQueries);
      const totals = await queries.apiTotals(organizationId, window);
      const rows = await queries.apiRows(organizationId, window, by, MAX_API_ROWS);
      return {
        status: 200,
        body: {
          ...windowFields(window),
          group_by: by,
          total_requests: totals.requests,
          errors: totals.errors,
          error_rate: rate(totals.errors, totals.requests),
          latency: latencyOf(totals),
          results: rows.slice(0, MAX_API_ROWS).map((row) => ({
            operation_id: by === 'endpoint' ? row.operation_id : null,
            method: by === 'endpoint' ? row.method : null,
            path: by === 'endpoint' ? row.path : null,
            status: row.status,
            period_start: row.period_start ? iso(row.period_start) : null,
            requests: row.requests,
            errors: row.errors,
            latency: latencyOf(row),
          })),
          has_more: rows.length > MAX_API_ROWS,
        },
      };
    },

    getCachePerformance: async ({ query, ctx, services }) => {
      const window = windowFrom(services, query);
      const caller = callerOf(ctx);
      const now = services.get(Clock).now();
      await services.get(SavedRetrievers).flushHistory();
      const namespaces = await namespacesInReach(services, ctx, caller);
      const queries = services.get(PlatformQueries);
      const executions = await queries.cacheExecutions(caller.organizationId, namespaces, window);
      const entries = await queries.cacheEntries(caller.organizationId, namespaces, now);
      const evictions = await queries.cacheEvictions(caller.organizationId, namespaces, window);
      const ttls = (await queries.cacheConfigs(caller.organizationId, namespaces))
        .map((r) => ttlOf(r.retriever_id, r.cache_config))
        .filter((ttl): ttl is number => ttl !== null);
      const entriesOf = new Map(entries.map((e) => [e.retriever_id, e]));
      const cachedExecutions = executions.reduce((sum, e) => sum + e.cached_executions, 0);
      const hits = executions.reduce((sum, e) => sum + e.hits, 0);
      const evicted = evictions.reduce((sum, e) => sum + Number(e.entries), 0);
      const hours = (window.end.getTime() - window.start.getTime()) / 3_600_000;
      return {
        status: 200,
        body: {
          ...windowFields(window),
          namespace_id: ctx.namespace?.id ?? null,
          cached_executions: cachedExecutions,
          hits,
          hit_rate: rate(hits, cachedExecutions),
          entries: entries.reduce((sum, e) => sum + e.entries, 0),
          memory_bytes: entries.reduce((sum, e) => sum + Number(e.bytes), 0),
          expired_entries: entries.reduce((sum, e) => sum + e.expired, 0),
          avg_ttl_seconds: ttls.length > 0 ? figure(ttls.reduce((a, b) => a + b, 0) / ttls.length) : null,
          evictions: evicted,
          evictions_by_reason: Object.fromEntries(evictions.map((e) => [e.reason, Number(e.entries)])),
          eviction_rate_per_hour: figure(evicted / hours) ?? 0,
          retrievers: executions.slice(0, MAX_CACHE_RETRIEVERS).map((e) => ({
            retriever_id: e.retriever_id,
            retriever_name: e.retriever_name,
            namespace_id: e.namespace_id,
            cached_executions: e.cached_executions,
            hits: e.hits,
            hit_rate: rate(e.hits, e.cached_executions),
            entries: entriesOf.get(e.retriever_id)?.entries ?? 0,
            ttl_seconds: ttlOf(e.retriever_id, e.cache_config),
          })),
        },
      };
    },

    getEnginePerformance: async ({ query, ctx, services }) => {
      const window = windowFrom(services, query);
      const organizationId = callerOf(ctx).organizationId;
      const by = query.group_by ?? 'task_type';
      const queries = services.get(ProcessingQueries);
      const totals = await queries.taskTotals(organizationId, window);
      const byType = by === 'task_type' ? await queries.tasksByType(organizationId, window) : [];
      const byDay = by === 'day' ? await queries.tasksByDay(organizationId, window) : [];
      const queue = await queries.queue(organizationId, services.get(Clock).now());
      const workers = await liveTaskWorkers(services.get(DatabaseHandle).db, services.get(Clock));
      return {
        status: 200,
        body: {
          ...windowFields(window),
          group_by: by,
          totals: taskFigures(totals),
          // Four significant digits: over a week, a few seconds of work is a tiny but real share.
          utilization: Number((Number(totals.busy_ms) / (window.end.getTime() - window.start.getTime())).toPrecision(4)),
          queue,
          workers: { live: workers.length },
          by_type: byType.map((row) => ({ task_type: row.task_type, ...taskFigures(row) })),
          series: byDay.map((row) => ({ period_start: iso(row.period_start), ...taskFigures(row) })),
        },
      };
    },

    getExtractorPerformance: async ({ params, query, ctx, services }) => {
      const window = windowFrom(services, query);
      if (!services.get(PluginRegistry).extractors.has(params.extractor_name)) {
        throw new NotFoundError(`Feature extractor '${params.extractor_name}' is not registered (GET /v1/collections/features/extractors lists them)`, {
          extractor_name: params.extractor_name,
        });
      }
      const caller = callerOf(ctx);
      const namespaces = await namespacesInReach(services, ctx, caller);
      const queries = services.get(ProcessingQueries);
      const totals = await queries.extractorTotals(caller.organizationId, namespaces, params.extractor_name, window);
      const collections = await queries.extractorChunks(caller.organizationId, namespaces, params.extractor_name, window, MAX_EXTRACTOR_COLLECTIONS);
      return {
        status: 200,
        body: {
          extractor_name: params.extractor_name,
          ...windowFields(window),
          namespace_id: ctx.namespace?.id ?? null,
          batches: totals.batches ?? 0,
          totals: extractorFigures(totals),
          collections: collections.map((row) => ({ collection_id: row.collection_id!, ...extractorFigures(row) })),
        },
      };
    },

    getInferencePerformance: async ({ query, services }) => {
      const window = windowFrom(services, query);
      // This process's latest calls first (every other process writes its own within 30 s).
      await services.tryGet(InferenceCallStats)?.flush();
      const groups = await services.get(InferenceQueries).groups(window);
      return {
        status: 200,
        body: {
          ...windowFields(window),
          totals: inferenceFigures(sumGroups(groups)),
          models: groups.map((g) => ({ model: g.model, method: g.method, ...inferenceFigures(g) })),
        },
      };
    },

    getUsageSummary: async ({ query, ctx, services }) => {
      const window = windowFrom(services, query);
      const by = query.group_by ?? 'resource_type';
      await services.get(RequestLog).flush();
      const rows = await services.get(PlatformQueries).creditsByOperation(callerOf(ctx).organizationId, window, by === 'day');
      const types = new Map<string, { requests: number; credits: number }>();
      const days = new Map<string, { requests: number; credits: number; by_resource_type: Record<string, number> }>();
      for (const row of rows) {
        const type = resourceTypeOf(row.operation_id);
        const credits = Number(row.credits);
        const total = types.get(type) ?? { requests: 0, credits: 0 };
        types.set(type, { requests: total.requests + row.requests, credits: total.credits + credits });
        if (row.period_start) {
          const day = iso(row.period_start);
          const entry = days.get(day) ?? { requests: 0, credits: 0, by_resource_type: {} };
          entry.requests += row.requests;
          entry.credits += credits;
          entry.by_resource_type[type] = (entry.by_resource_type[type] ?? 0) + credits;
          days.set(day, entry);
        }
      }
      const totalCredits = [...types.values()].reduce((sum, t) => sum + t.credits, 0);
      return {
        status: 200,
        body: {
          ...windowFields(window),
          group_by: by,
          total_requests: [...types.values()].reduce((sum, t) => sum + t.requests, 0),
          total_credits: figure(totalCredits) ?? 0,
          by_resource_type: [...types.entries()]
            .map(([resource_type, t]) => ({ resource_type, requests: t.requests, credits: figure(t.credits) ?? 0, credit_share: rate(t.credits, totalCredits) }))
            .sort((a, b) => b.credits - a.credits || b.requests - a.requests || a.resource_type.localeCompare(b.resource_type)),
          series: [...days.entries()]
            .sort(([a], [b]) => a.localeCompare(b))
            .map(([period_start, d]) => ({
              period_start,
              requests: d.requests,
              credits: figure(d.credits) ?? 0,
              by_resource_type: Object.fromEntries(Object.entries(d.by_resource_type).map(([k, v]) => [k, figure(v) ?? 0])),
            })),
        },
      };
    },
  },
});
