/**
 * Explain: the plan an execution would run (after the optimizer), with estimates, bottlenecks and
 * suggestions, computed without running any stage.
 *
 * Estimates are upper bounds from the stages' parameters (`estimateOutput` on StagePlugin) and one number
 * read from the data: how many documents of the collections the caller may read (the principal filter is
 * applied in that query, so a user-scoped key's estimates never count another principal's documents).
 */
import type { DocumentSource } from './documents.js';
import type { OptimizedPlan, OptimizationSummary, OptimizerRule } from './optimizer.js';

/** Source documents are counted up to this many (a bound, not a scan of the whole collection). */
export const MAX_COUNTED_SOURCE = 10_001;
/** In relative cost, one credit (an inference call, a search) weighs as much as handling this many documents. */
const CREDIT_WEIGHT = 100;
const UNBOUNDED = 1_000_000_000;

export interface StageEstimate {
  credits: number;
  documents_in: number;
  documents_out: number;
  relative_cost: number;
}

export interface ExplainedStage {
  stage_name: string;
  stage_id: string;
  stage_type: string;
  version: string;
  stage_index: number;
  plan_index: number;
  absorbed: string[];
  parameters: Record<string, unknown>;
  estimate: StageEstimate;
}

export type SuggestionCode = 'add_pre_filter' | 'top_k_above_limit' | 'sort_after_limit' | 'no_cache';

export interface Explanation {
  optimization_applied: boolean;
  optimization_summary?: OptimizationSummary;
  rules_applied: OptimizerRule[];
  source_documents: number;
  stages: ExplainedStage[];
  optimized_away: Array<{ stage_name: string; stage_id: string; stage_index: number; rule: OptimizerRule; optimized_into: string | null }>;
  estimated_total: { credits: number; documents_out: number };
  bottleneck_stages: Array<{ stage_name: string; relative_cost: number; reason: string }>;
  suggestions: Array<{ code: SuggestionCode; stage_name: string | null; message: string }>;
}

export interface ExplainScope {
  organizationId: string;
  collectionIds: readonly string[];
  principalId: string | null;
  /** Saved retrievers: whether `cache_config.enabled` is set (null for ad hoc pipelines, which cannot cache). */
  cacheEnabled: boolean | null;
}

/** How many documents a stage keeps at most whatever it receives (a `limit`), or undefined. */
function capOf(plan: OptimizedPlan['stages'][number]): number | undefined {
  const bound = plan.stage.estimateOutput?.(plan.parameters as never, UNBOUNDED, { first: false, source: UNBOUNDED });
  return bound !== undefined && bound < UNBOUNDED ? bound : undefined;
}

export async function explainPlan(plan: OptimizedPlan, documents: DocumentSource, scope: ExplainScope): Promise<Explanation> {
  const source = await documents.count({
    organizationId: scope.organizationId, collectionIds: scope.collectionIds, principalId: scope.principalId, limit: MAX_COUNTED_SOURCE,
  });

  let flowing = 0;
  const stages: ExplainedStage[] = plan.stages.map((s, i) => {
    const first = i === 0;
    const input = first ? source : flowing;
    const credits = s.stage.cost ? s.stage.cost(s.parameters as never) : 0;
    const estimated = s.stage.estimateOutput?.(s.parameters as never, input, { first, source }) ?? input;
    const out = Math.max(0, Math.round(first ? Math.min(estimated, source) : estimated));
    flowing = out;
    return {
      stage_name: s.spec.stage_name, stage_id: s.stage.id, stage_type: s.stage.type, version: s.stage.version,
      stage_index: s.originalIndex, plan_index: i, absorbed: s.absorbed, parameters: s.parameters,
      estimate: { credits, documents_in: input, documents_out: out, relative_cost: 0 },
    };
  });
  const weight = (e: StageEstimate) => e.credits * CREDIT_WEIGHT + e.documents_in;
  const total = stages.reduce((n, s) => n + weight(s.estimate), 0);
  for (const s of stages) s.estimate.relative_cost = total > 0 ? Math.round((weight(s.estimate) / total) * 1000) / 1000 : 0;
  const heaviest = Math.max(0, ...stages.map((s) => weight(s.estimate)));
  const bottlenecks = heaviest > 0
    ? stages.filter((s) => weight(s.estimate) === heaviest).map((s) => ({
        stage_name: s.stage_name,
        relative_cost: s.estimate.relative_cost,
        reason: s.estimate.credits > 0
          ? `charges ${s.estimate.credits} credit(s) (searches or inference) and handles up to ${s.estimate.documents_in} documents`
          : `handles up to ${s.estimate.documents_in} documents`,
      }))
    : [];

  return {
    optimization_applied: plan.summary !== null,
    ...(plan.summary ? { optimization_summary: plan.summary } : {}),
    rules_applied: plan.summary?.rules_applied ?? [],
    source_documents: source,
    stages,
    optimized_away: plan.removed.map(({ stage_name, stage_id, stage_index, rule, optimized_into }) => ({ stage_name, stage_id, stage_index, rule, optimized_into })),
    estimated_total: { credits: stages.reduce((n, s) => n + s.estimate.credits, 0), documents_out: stages.at(-1)?.estimate.documents_out ?? 0 },
    bottleneck_stages: bottlenecks,
    suggestions: suggestionsFor(plan, scope),
  };
}

function suggestionsFor(plan: OptimizedPlan, scope: ExplainScope): Explanation['suggestions'] {
  const out: Explanation['suggestions'] = [];
  const stages = plan.stages;
  for (const [i, s] of stages.entries()) {
    const traits = s.stage.optimizer;
    const prev = stages[i - 1];
    // A filter the optimizer could not move into the search before it (that would change the results).
    if (prev && traits?.filter && prev.stage.optimizer?.absorbSourceFilter) {
      out.push({
        code: 'add_pre_filter', stage_name: s.spec.stage_name,
        message: `'${s.spec.stage_name}' filters what '${prev.spec.stage_name}' kept after its top_k cut, so matches beyond that cut are lost; ` +
          `as '${prev.spec.stage_name}''s pre_filters the filter would run inside the index scan and return up to top_k matching documents (the results change).`,
      });
    }
    // A search (a stage that takes pre-filters) returning more than a later limit keeps, with only pass-through stages between.
    if (traits?.absorbSourceFilter || traits?.outputOrder) {
      const produced = capOf(s);
      for (const later of stages.slice(i + 1)) {
        const cap = capOf(later);
        if (cap !== undefined && produced !== undefined && produced > cap) {
          out.push({
            code: 'top_k_above_limit', stage_name: s.spec.stage_name,
            message: `'${s.spec.stage_name}' returns up to ${produced} documents but '${later.spec.stage_name}' keeps ${cap}: lower its top_k (or final_top_k) to ${cap}.`,
          });
        }
        if (cap !== undefined || !later.stage.optimizer?.passThrough || later.stage.optimizer.filter) break;
      }
    }
    // A sort after a limit orders only what the limit kept.
    if (traits?.sort) {
      const limiter = stages.slice(0, i).reverse().find((p) => p.stage.optimizer?.passThrough && !p.stage.optimizer.filter && capOf(p) !== undefined);
      if (limiter) {
        out.push({
          code: 'sort_after_limit', stage_name: s.spec.stage_name,
          message: `'${s.spec.stage_name}' sorts only the ${capOf(limiter)} documents '${limiter.spec.stage_name}' kept; sort before the limit to get the best ${capOf(limiter)} overall.`,
        });
      }
    }
  }
  if (scope.cacheEnabled === false) {
    out.push({ code: 'no_cache', stage_name: null, message: 'No cache is configured: set cache_config.enabled (and ttl_seconds) so repeated executions with the same inputs are answered from the cache.' });
  }
  return out;
}
