/**
 * Tuning suggestions for a saved retriever from its recorded executions: each rule looks at the figures of
 * the window and, when they call for a change, says what to change and the figures behind it.
 */
import type { components } from '../../../generated/openapi.js';
import { cacheRequestOf } from '../../../kernel/retrieval/cache.js';
import type { ExecutionTotals, StageFigures } from './retriever-queries.js';
import { figure, rate } from './window.js';

type Schemas = components['schemas'];
export type Suggestion = Schemas['RetrieverAnalysis']['suggestions'][number];

/** Below this many executions the figures say too little to suggest anything. */
export const MIN_EXECUTIONS = 5;
/** Share of executions whose inputs were seen before, from which a cache pays. */
const REPEATED_INPUTS_SHARE = 0.2;
/** A cache hitting less often than this over at least LOW_HIT_MIN_EXECUTIONS is worth a look. */
const LOW_HIT_RATE = 0.2;
const LOW_HIT_MIN_EXECUTIONS = 20;
/** Without a time budget, a p95 above this is worth a limit. */
const SLOW_P95_MS = 1000;
/** A p95 above this share of the time budget is near it. */
const NEAR_LIMIT_SHARE = 0.8;
/** A stage taking at least this share of all stage time dominates. */
const DOMINANT_SHARE = 0.6;
/** A filter keeping less than this share of its input after an expensive stage belongs before it. */
const SELECTIVE_FILTER = 0.5;
const EXPENSIVE_SHARE = 0.3;
/** A model-backed stage this slow (p95) and this dominant may run a lighter model. */
const SLOW_MODEL_P95_MS = 200;
const MODEL_SHARE = 0.5;

export interface AnalysisInput {
  retriever: {
    retriever_id: string;
    stages: Array<Schemas['RetrieverStage']>;
    budget_limits: Schemas['RetrieverBudgetLimits'];
    cache_config: Schemas['RetrieverCacheConfig'];
    cache_stage_names: string[];
  };
  totals: ExecutionTotals;
  stages: StageFigures[];
}

export function analyze({ retriever, totals, stages }: AnalysisInput): Suggestion[] {
  if (totals.executions < MIN_EXECUTIONS) return [];
  return [...budgetRules(retriever, totals), ...cacheRules(retriever, totals), ...stageRules(retriever, stages)];
}

function budgetRules(retriever: AnalysisInput['retriever'], totals: ExecutionTotals): Suggestion[] {
  const out: Suggestion[] = [];
  const limits = retriever.budget_limits ?? {};
  const p95 = figure(totals.p95_ms);
  const p99 = figure(totals.p99_ms);
  if (totals.budget_exceeded > 0) {
    out.push({
      code: 'raise_budget',
      category: 'budget_limits',
      stage_name: null,
      message: `${totals.budget_exceeded} of ${totals.executions} executions ran out of budget and returned partial results: raise the limit they hit (see their error), or make the stages cheaper.`,
      evidence: { budget_exceeded: totals.budget_exceeded, executions: totals.executions, budget_limits: limits },
    });
  }
  const timeLimit = limits.max_time_ms ?? limits.max_execution_time_ms;
  if (timeLimit === undefined && p95 !== null && p95 > SLOW_P95_MS) {
    out.push({
      code: 'add_time_budget',
      category: 'budget_limits',
      stage_name: null,
      message: `p95 latency is ${p95} ms and no time budget is set: set budget_limits.max_time_ms so a slow execution stops with what it has instead of holding the caller.`,
      evidence: { p95_latency_ms: p95, p99_latency_ms: p99, suggested_max_time_ms: Math.ceil((p99 ?? p95) * 1.5) },
    });
  } else if (timeLimit !== undefined && p95 !== null && p95 > timeLimit * NEAR_LIMIT_SHARE) {
    out.push({
      code: 'budget_near_limit',
      category: 'budget_limits',
      stage_name: null,
      message: `p95 latency (${p95} ms) is over ${Math.round(NEAR_LIMIT_SHARE * 100)}% of the time budget (${timeLimit} ms): raise it, or expect executions to stop early.`,
      evidence: { p95_latency_ms: p95, max_time_ms: timeLimit },
    });
  }
  return out;
}

function cacheRules(retriever: AnalysisInput['retriever'], totals: ExecutionTotals): Suggestion[] {
  const caching = cacheRequestOf(retriever.retriever_id, retriever.cache_config, retriever.cache_stage_names);
  const repeatedShare = 1 - totals.distinct_inputs / totals.executions;
  if (!caching && repeatedShare >= REPEATED_INPUTS_SHARE) {
    return [
      {
        code: 'enable_cache',
        category: 'cache_config',
        stage_name: null,
        message: `${Math.round(repeatedShare * 100)}% of executions repeated inputs seen before and the retriever does not cache: set cache_config.enabled to serve repeats from the cache.`,
        evidence: { executions: totals.executions, distinct_inputs: totals.distinct_inputs, repeated_share: figure(repeatedShare) },
      },
    ];
  }
  const hitRate = rate(totals.cache_hits, totals.cached_executions);
  if (caching && totals.cached_executions >= LOW_HIT_MIN_EXECUTIONS && hitRate !== null && hitRate < LOW_HIT_RATE) {
    return [
      {
        code: 'low_cache_hit_rate',
        category: 'cache_config',
        stage_name: null,
        message: `The cache served ${Math.round(hitRate * 100)}% of ${totals.cached_executions} executions: a longer ttl_seconds, or caching an earlier stage whose inputs repeat more (cache_stage_names), may help; otherwise caching costs writes for little.`,
        evidence: { hit_rate: hitRate, cached_executions: totals.cached_executions, ttl_seconds: caching.ttlSeconds, cache_stage_names: retriever.cache_stage_names },
      },
    ];
  }
  return [];
}

function stageRules(retriever: AnalysisInput['retriever'], stages: StageFigures[]): Suggestion[] {
  const out: Suggestion[] = [];
  const total = stages.reduce((sum, s) => sum + s.total_ms, 0);
  if (total <= 0) return out;
  const share = new Map(stages.map((s) => [s.stage_name, s.total_ms / total]));
  const figuresOf = new Map(stages.map((s) => [s.stage_name, s]));
  const defined = retriever.stages;

  defined.forEach((stage, index) => {
    const own = figuresOf.get(stage.stage_name);
    if (!own) return;
    if (stage.config.stage_id === 'attribute_filter' && own.avg_input_count && own.avg_output_count !== null) {
      const kept = own.avg_output_count / own.avg_input_count;
      const expensive = defined.slice(0, index).find((before) => (share.get(before.stage_name) ?? 0) >= EXPENSIVE_SHARE);
      if (expensive && kept < SELECTIVE_FILTER) {
        out.push({
          code: 'move_filter_earlier',
          category: 'stage_order',
          stage_name: stage.stage_name,
          message: `'${stage.stage_name}' keeps ${Math.round(kept * 100)}% of its documents after '${expensive.stage_name}' (${Math.round((share.get(expensive.stage_name) ?? 0) * 100)}% of the time) worked on all of them: filter first (before it, or as its pre_filters).`,
          evidence: {
            avg_input_count: figure(own.avg_input_count),
            avg_output_count: figure(own.avg_output_count),
            expensive_stage: expensive.stage_name,
            expensive_stage_time_share: figure(share.get(expensive.stage_name) ?? 0),
          },
        });
      }
    }
    const stageShare = share.get(stage.stage_name) ?? 0;
    const p95 = figure(own.p95_ms);
    if ((own.avg_inference_calls ?? 0) > 0 && stageShare >= MODEL_SHARE && p95 !== null && p95 >= SLOW_MODEL_P95_MS) {
      out.push({
        code: 'lighter_model',
        category: 'model_swap',
        stage_name: stage.stage_name,
        message: `'${stage.stage_name}' calls a model (${figure(own.avg_inference_calls)} calls a run) and takes ${Math.round(stageShare * 100)}% of the time (p95 ${p95} ms): a smaller or faster model, fewer candidates (a lower top_k before it), or caching this stage would cut it most.`,
        evidence: { time_share: figure(stageShare), p95_ms: p95, avg_inference_calls: figure(own.avg_inference_calls), model: modelOf(stage) },
      });
    } else if (defined.length > 1 && stageShare >= DOMINANT_SHARE) {
      out.push({
        code: 'dominant_stage',
        category: 'stage_order',
        stage_name: stage.stage_name,
        message: `'${stage.stage_name}' takes ${Math.round(stageShare * 100)}% of the time: narrow what reaches it (a filter or a lower limit before it) or cache it.`,
        evidence: { time_share: figure(stageShare), avg_ms: figure(own.avg_ms), p95_ms: p95 },
      });
    }
  });
  return out;
}

/** The model a stage names in its parameters, when it names one. */
function modelOf(stage: Schemas['RetrieverStage']): string | null {
  const parameters = (stage.config.parameters ?? {}) as Record<string, unknown>;
  for (const key of ['model', 'model_name', 'inference_name', 'feature_uri']) {
    if (typeof parameters[key] === 'string') return parameters[key] as string;
  }
  return null;
}
