/**
 * Runs a retriever's pipeline: checks the inputs against the input schema, fills placeholders, checks
 * each stage's parameters, then runs the stages in order, each receiving the documents the previous one
 * returned. Budget limits are checked between stages: when one is reached the execution stops, says which
 * limit stopped it and returns what was found so far. A failing stage fails the execution with a readable
 * error naming the stage (the execution result, not an HTTP error: rule 8 of the contract).
 */
import type { Container } from 'inversify';
import type { Logger } from 'pino';
import type { ResolvedNamespace } from '../auth/namespaces.js';
import { scopesAllow, type ResourceScope } from '../auth/scopes.js';
import { ApiError, NotAllowedError, RequestValidationError, ServiceUnavailableError } from '../errors.js';
import type { PluginRegistry, RetrievalCollection, StageBudget, StageContext, StageDocument } from '../plugins.js';
import { Clock, DocumentSource, resolve } from '../tokens.js';
import { BudgetExceededError, type StageLimitName } from './budget.js';
import { ExecutionCache, type CacheStorage, type CachedStageCounts, type ExecutionCacheRequest } from './cache.js';
import type { DocumentSource as DocumentSourceShape } from './documents.js';
import { explainPlan, type Explanation } from './explain.js';
import { checkInputs, type InputSchema } from './inputs.js';
import { paginate, type KeysetPosition, type PageContinuation, type PaginationRequest, type PaginationResult } from './pagination.js';
import { optimizePipeline, unoptimizedPlan, type OptimizationSummary, type OptimizedPlan, type PreparedStage } from './optimizer.js';
import { fillStageParameters, StageChecker, type StageSpec } from './pipeline.js';
import { lazyLogger } from '../logger.js';

export interface BudgetLimits {
  max_credits?: number;
  max_time_ms?: number;
  max_inference_calls?: number;
  max_execution_time_ms?: number;
  max_llm_tokens?: number;
}

export type BudgetLimitName = 'max_credits' | 'max_time_ms' | 'max_inference_calls' | 'max_execution_time_ms' | 'max_llm_tokens';

export interface ExecutionCaller {
  organizationId: string;
  principalId: string | null;
  scopes: readonly ResourceScope[];
}

export interface ExecutionRequest {
  caller: ExecutionCaller;
  namespace: ResolvedNamespace;
  executionId: string;
  collectionIdentifiers: readonly string[];
  inputSchema: InputSchema;
  stages: readonly StageSpec[];
  inputs: Record<string, unknown>;
  budgetLimits: BudgetLimits;
  pagination?: PaginationRequest;
  /** Set for saved retrievers that cache (cache.ts). */
  cache?: ExecutionCacheRequest;
  /** A keyset page: where the previous page of the same ranking ended. */
  keysetAfter?: KeysetPosition;
  /** false runs the stages exactly as written (the optimizer is on by default). */
  optimize?: boolean;
  log: Logger;
  /** Told as each stage starts and ends (streamed executions report progress through it). */
  observer?: ExecutionObserver;
  /** Aborted when nobody waits for the result any more (a streaming client hung up): no further stage starts. */
  signal?: AbortSignal;
}

export interface StageStartEvent {
  execution_id: string;
  stage_name: string;
  stage_id: string;
  stage_index: number;
  total_stages: number;
  input_count: number;
}

export interface ExecutionObserver {
  stageStarted?(event: StageStartEvent): void;
  /** After each stage that ran (`statistics.status` is `completed` or `failed`). */
  stageFinished?(event: { execution_id: string; total_stages: number; statistics: StageStatistics }): void;
}

export interface StageStatistics {
  stage_name: string;
  stage_id: string;
  stage_index: number;
  version: string | null;
  /** `optimized_away`: the optimizer folded the stage into `optimized_into` (or removed it: null). */
  status: 'completed' | 'failed' | 'skipped' | 'optimized_away';
  duration_ms: number;
  input_count: number;
  output_count: number;
  credits: number;
  inference_calls: number;
  cache_hit: boolean;
  error?: string;
  optimized_into?: string | null;
}

export interface ExecutionOutcome {
  execution_id: string;
  status: 'completed' | 'failed' | 'budget_exceeded';
  documents: StageDocument[];
  /** Every final document's id, in rank order (what history records). */
  result_ids: string[];
  /** Every final document's score (null when it has none), in the order of `result_ids`. */
  result_scores: Array<number | null>;
  pagination: PaginationResult;
  /** Where the next page starts (cursor and keyset pagination), when there is one. */
  continuation: PageContinuation | null;
  stage_statistics: { stages: Record<string, StageStatistics>; total_time_ms: number; credits_used: number; inference_calls: number };
  budget: {
    credits_used: number;
    credits_remaining: number | null;
    time_used_ms: number;
    inference_calls: number;
    /** Language-model tokens stages produced (counted into `max_llm_tokens`). */
    llm_tokens: number;
    limits: BudgetLimits;
    exceeded: { limit: BudgetLimitName; value: number; used: number; stopped_before: string | null } | null;
  };
  error: string | null;
  collection_ids: string[];
  inputs: Record<string, unknown>;
  started_at: Date;
  duration_ms: number;
  /** Whether a cached stage output was used; null when the execution does not cache. */
  cache_hit?: boolean | null;
  /** Null when the optimizer changed nothing (or was off). */
  optimization: OptimizationSummary | null;
}

const round = (ms: number) => Math.round(ms * 1000) / 1000;

export class RetrievalEngine {
  readonly checker: StageChecker;

  constructor(
    private readonly registry: PluginRegistry,
    private readonly container: Container,
    private readonly cacheStorage?: CacheStorage,
  ) {
    this.checker = new StageChecker(registry);
  }

  /** The documents retrieval reads (the collections plugin's, through the kernel seam). */
  documents(): DocumentSourceShape {
    if (!this.container.isBound(DocumentSource)) throw new ServiceUnavailableError('No plugin provides documents to retrievers (the collections plugin is not loaded)');
    return this.container.get(DocumentSource);
  }

  /**
   * The collections a pipeline runs over: each must exist in the namespace and be readable by the key's
   * scopes (a key scoped to some collections cannot search the others through a retriever).
   */
  async collections(caller: ExecutionCaller, namespace: ResolvedNamespace, identifiers: readonly string[]): Promise<RetrievalCollection[]> {
    const collections = await this.documents().resolveCollections(caller.organizationId, namespace.id, identifiers);
    for (const c of collections) {
      const allowed = scopesAllow(caller.scopes, {
        organizationId: caller.organizationId,
        resource: { type: 'collection', identifiers: [c.collection_id, c.collection_name] },
        namespace,
        operation: 'read_data',
      });
      if (!allowed) throw new NotAllowedError(`The API key's scopes do not allow read_data on collection '${c.collection_name}'`, { collection: c.collection_name });
    }
    return collections;
  }

  async execute(request: ExecutionRequest): Promise<ExecutionOutcome> {
    // The service's clock (an injected one in tests), as every other recorded time.
    const startedAt = resolve(this.container, Clock).now();
    const t0 = performance.now();
    const { inputs, prepared } = this.prepare(request.inputSchema, request.stages, request.inputs);
    const plan = this.plan(prepared, request.optimize);
    const collections = await this.collections(request.caller, request.namespace, request.collectionIdentifiers);

    const limits = request.budgetLimits;
    const timeLimits = (['max_time_ms', 'max_execution_time_ms'] as const).filter((k) => typeof limits[k] === 'number');
    const budget: StageBudget = {
      maxCredits: limits.max_credits ?? null,
      maxTimeMs: timeLimits.length > 0 ? Math.min(...timeLimits.map((k) => limits[k]!)) : null,
      creditsUsed: 0,
      deadline: null,
      maxInferenceCalls: limits.max_inference_calls ?? null,
      inferenceCalls: 0,
      maxLlmTokens: limits.max_llm_tokens ?? null,
      llmTokens: 0,
    };
    budget.deadline = budget.maxTimeMs === null ? null : Date.now() + budget.maxTimeMs;
    const ctx: StageContext = {
      organizationId: request.caller.organizationId,
      namespace: request.namespace,
      collections,
      inputs,
      budget,
      principalId: request.caller.principalId,
      resolveCollections: (identifiers) => this.collections(request.caller, request.namespace, identifiers),
      stageIndex: 0,
      log: request.log,
      container: this.container,
    };

    const stats: Record<string, StageStatistics> = {};
    let docs: StageDocument[] = [];
    let status: ExecutionOutcome['status'] = 'completed';
    let error: string | null = null;
    let exceeded: ExecutionOutcome['budget']['exceeded'] = null;
    const elapsed = () => performance.now() - t0;

    const cache =
      request.cache && this.cacheStorage
        ? await ExecutionCache.open(this.cacheStorage, request.cache, {
            organizationId: request.caller.organizationId, namespaceId: request.namespace.id, principalId: request.caller.principalId,
            collections, stages: plan.stages.map((p) => ({ stageName: p.spec.stage_name, stage: p.stage, parameters: p.parameters })), log: request.log,
          })
        : null;
    const hit = cache ? await cache.bestHit() : null;
    const counts: CachedStageCounts[] = hit ? hit.statistics : [];
    if (hit) docs = hit.documents;

    for (const [index, { spec, stage, parameters, originalIndex }] of plan.stages.entries()) {
      const cost = stage.cost ? stage.cost(parameters as never) : 0;
      const base: StageStatistics = {
        stage_name: spec.stage_name, stage_id: stage.id, stage_index: originalIndex, version: stage.version, status: 'skipped',
        duration_ms: 0, input_count: docs.length, output_count: 0, credits: 0, inference_calls: 0, cache_hit: false,
      };
      if (hit && index <= hit.index) {
        // Served by the cache: nothing ran and nothing is charged.
        const recorded = hit.statistics[index];
        const served: StageStatistics = { ...base, status: 'completed', input_count: recorded?.input_count ?? 0, output_count: recorded?.output_count ?? 0, cache_hit: true };
        stats[spec.stage_name] = served;
        // A stream still shows every stage start and complete, in order.
        request.observer?.stageStarted?.({
          execution_id: request.executionId, stage_name: spec.stage_name, stage_id: stage.id, stage_index: originalIndex, total_stages: prepared.length, input_count: served.input_count,
        });
        request.observer?.stageFinished?.({ execution_id: request.executionId, total_stages: prepared.length, statistics: served });
        continue;
      }
      if (status !== 'completed') {
        stats[spec.stage_name] = base;
        continue;
      }
      exceeded = this.limitReached(budget, limits, elapsed(), cost, spec.stage_name);
      if (exceeded) {
        status = 'budget_exceeded';
        stats[spec.stage_name] = base;
        continue;
      }
      if (request.signal?.aborted) {
        // The client went away (a closed stream): nothing more runs, and the execution is recorded as stopped here.
        status = 'failed';
        error = `Stopped before stage '${spec.stage_name}': the client closed the connection`;
        stats[spec.stage_name] = base;
        continue;
      }
      const creditsBefore = budget.creditsUsed;
      const callsBefore = budget.inferenceCalls;
      budget.creditsUsed += cost;
      request.observer?.stageStarted?.({
        execution_id: request.executionId, stage_name: spec.stage_name, stage_id: stage.id, stage_index: originalIndex, total_stages: prepared.length, input_count: docs.length,
      });
      const s0 = performance.now();
      try {
        const stageCtx: StageContext = { ...ctx, stageIndex: index, log: lazyLogger(() => request.log.child({ stage: spec.stage_name })), ...(request.signal ? { signal: request.signal } : {}) };
        const out = await stage.run(stageCtx, docs, parameters as never);
        stats[spec.stage_name] = { ...base, status: 'completed', output_count: out.length };
        docs = out;
        counts.push({ stage_name: spec.stage_name, input_count: base.input_count, output_count: out.length });
        if (cache?.isCached(index)) await cache.store(index, docs, counts);
      } catch (err) {
        if (err instanceof BudgetExceededError) {
          // The stage stopped before a call that would pass a limit: what was found before it is the result.
          status = 'budget_exceeded';
          exceeded = { limit: this.limitName(err.limit, limits), value: err.value, used: err.used, stopped_before: spec.stage_name };
          stats[spec.stage_name] = { ...base, status: 'skipped' };
        } else {
          const message = this.messageOf(err, request.log, spec.stage_name);
          error = `Stage '${spec.stage_name}' (${stage.id}) failed: ${message}`;
          status = 'failed';
          stats[spec.stage_name] = { ...base, status: 'failed', error: message };
        }
      }
      const entry = stats[spec.stage_name]!;
      entry.duration_ms = round(performance.now() - s0);
      entry.credits = budget.creditsUsed - creditsBefore;
      entry.inference_calls = budget.inferenceCalls - callsBefore;
      request.observer?.stageFinished?.({ execution_id: request.executionId, total_stages: prepared.length, statistics: entry });
      // A limit passed during the last stage stops nothing more, but the run did exceed its budget: reported
      // as such (`stopped_before: null`: every stage ran), so `status` alone tells which runs went over.
      if (status === 'completed' && index === plan.stages.length - 1) {
        exceeded = this.limitReached(budget, limits, elapsed(), 0, null, true);
        if (exceeded) status = 'budget_exceeded';
      }
    }
    if (status === 'failed') docs = [];
    for (const r of plan.removed) {
      stats[r.stage_name] = {
        stage_name: r.stage_name, stage_id: r.stage_id, stage_index: r.stage_index, version: r.version, status: 'optimized_away',
        duration_ms: 0, input_count: 0, output_count: 0, credits: 0, inference_calls: 0, cache_hit: false, optimized_into: r.optimized_into,
      };
    }
    // The user's stages in the user's order, whatever the plan ran.
    const stages = Object.fromEntries(Object.values(stats).sort((a, b) => a.stage_index - b.stage_index).map((e) => [e.stage_name, e]));

    const { page, pagination, continuation } = paginate(docs, request.pagination, request.keysetAfter);
    const duration = elapsed();
    return {
      execution_id: request.executionId,
      status,
      documents: page,
      result_ids: docs.map((d) => d.document_id),
      result_scores: docs.map((d) => (typeof d.score === 'number' && Number.isFinite(d.score) ? d.score : null)),
      pagination,
      continuation,
      stage_statistics: { stages, total_time_ms: round(duration), credits_used: budget.creditsUsed, inference_calls: budget.inferenceCalls },
      budget: {
        credits_used: budget.creditsUsed,
        credits_remaining: budget.maxCredits === null ? null : Math.max(0, budget.maxCredits - budget.creditsUsed),
        time_used_ms: round(duration),
        inference_calls: budget.inferenceCalls,
        llm_tokens: budget.llmTokens ?? 0,
        limits,
        exceeded,
      },
      error,
      collection_ids: collections.map((c) => c.collection_id),
      inputs,
      started_at: startedAt,
      duration_ms: round(duration),
      cache_hit: cache ? hit !== null : null,
      optimization: plan.summary,
    };
  }

  /** The plan `execute` would run for this request, with estimates; runs no stage (kernel/retrieval/explain.ts). */
  async explain(
    request: Pick<ExecutionRequest, 'caller' | 'namespace' | 'collectionIdentifiers' | 'inputSchema' | 'stages' | 'inputs' | 'optimize'> & { cacheEnabled: boolean | null },
  ): Promise<Explanation> {
    const { prepared } = this.prepare(request.inputSchema, request.stages, request.inputs);
    const plan = this.plan(prepared, request.optimize);
    const collections = await this.collections(request.caller, request.namespace, request.collectionIdentifiers);
    return explainPlan(plan, this.documents(), {
      organizationId: request.caller.organizationId,
      collectionIds: collections.map((c) => c.collection_id),
      principalId: request.caller.principalId,
      cacheEnabled: request.cacheEnabled,
    });
  }

  /**
   * Checks the inputs against the input schema, then fills and checks every stage's parameters before
   * anything runs: a bad input is a 422, not a half-run.
   */
  prepare(inputSchema: InputSchema, specs: readonly StageSpec[], rawInputs: Record<string, unknown>): { inputs: Record<string, unknown>; prepared: PreparedStage[] } {
    const inputs = checkInputs(inputSchema, rawInputs);
    const prepared = specs.map((spec, i) => {
      const stage = this.checker.stageOf(spec.config.stage_id);
      if (!stage) {
        throw new RequestValidationError([{ loc: ['body', 'stages', i, 'config', 'stage_id'], msg: `stage '${spec.config.stage_id}' is not registered`, type: 'unknown_stage' }]);
      }
      const parameters = fillStageParameters(stage, spec.config.parameters ?? {}, inputs);
      this.checker.checkFilled(stage, parameters, ['body', 'stages', i, 'config', 'parameters']);
      return { spec, stage, parameters };
    });
    return { inputs, prepared };
  }

  /** The stages that run: the optimizer's plan, or the user's stages as written when `optimize` is false. */
  plan(prepared: readonly PreparedStage[], optimize: boolean | undefined): OptimizedPlan {
    if (optimize === false) return unoptimizedPlan(prepared);
    return optimizePipeline(prepared, (stage, parameters) => {
      try {
        this.checker.checkFilled(stage, parameters, ['optimizer']);
        return true;
      } catch {
        return false;
      }
    });
  }

  /**
   * The limit the next stage would break (credits it costs, time or inference calls already spent), if
   * any. `after` reports a limit passed by the last stage (nothing is stopped then).
   */
  private limitReached(
    budget: StageBudget,
    limits: BudgetLimits,
    elapsedMs: number,
    nextCost: number,
    nextStage: string | null,
    after = false,
  ): ExecutionOutcome['budget']['exceeded'] {
    const hit = (limit: BudgetLimitName, value: number, used: number) => ({ limit, value, used, stopped_before: nextStage });
    const credits = after ? budget.creditsUsed : budget.creditsUsed + nextCost;
    if (budget.maxCredits !== null && credits > budget.maxCredits) {
      return hit('max_credits', budget.maxCredits, budget.creditsUsed);
    }
    for (const limit of ['max_time_ms', 'max_execution_time_ms'] as const) {
      const value = limits[limit];
      if (typeof value === 'number' && elapsedMs >= value) return hit(limit, value, Math.round(elapsedMs));
    }
    if (budget.maxInferenceCalls !== null && budget.inferenceCalls > budget.maxInferenceCalls) {
      return hit('max_inference_calls', budget.maxInferenceCalls, budget.inferenceCalls);
    }
    const llmTokens = budget.llmTokens ?? 0;
    if (typeof budget.maxLlmTokens === 'number' && (llmTokens > budget.maxLlmTokens || budget.llmLimitReached)) {
      return hit('max_llm_tokens', budget.maxLlmTokens, llmTokens);
    }
    return null;
  }

  /** The limit a stage's deadline stop names: whichever time limit set the deadline. */
  private limitName(limit: StageLimitName, limits: BudgetLimits): BudgetLimitName {
    if (limit !== 'max_time_ms') return limit;
    const { max_time_ms: time, max_execution_time_ms: execution } = limits;
    return typeof execution === 'number' && (typeof time !== 'number' || execution < time) ? 'max_execution_time_ms' : 'max_time_ms';
  }

  /** What a failed stage reports: typed errors say what went wrong; anything else is logged, not shown. */
  private messageOf(err: unknown, log: Logger, stageName: string): string {
    if (err instanceof ApiError || err instanceof RequestValidationError) return err.message;
    log.error({ err, stage: stageName }, 'retriever stage failed unexpectedly');
    return 'internal error (logged with the request id)';
  }
}
