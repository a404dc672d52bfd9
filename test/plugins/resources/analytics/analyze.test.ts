/** The tuning rules of `POST /v1/analytics/retrievers/{id}/analyze`, each on the figures that call for it and on those that do not. */
import { describe, expect, it } from 'vitest';
import { analyze, MIN_EXECUTIONS, type AnalysisInput } from '../../../../plugins/resources/analytics/analyze.js';
import type { ExecutionTotals, StageFigures } from '../../../../plugins/resources/analytics/retriever-queries.js';

const totals = (over: Partial<ExecutionTotals> = {}): ExecutionTotals => ({
  executions: 50, completed: 50, failed: 0, budget_exceeded: 0, cached_executions: 0, cache_hits: 0, avg_results: 10, credits: 0,
  distinct_inputs: 50, avg_ms: 50, p50_ms: 40, p95_ms: 90, p99_ms: 120, max_ms: 150, ...over,
});
const stage = (stage_name: string, over: Partial<StageFigures> = {}): StageFigures => ({
  stage_name, stage_id: 'sort_attribute', executions: 50, completed: 50, failed: 0, skipped: 0, optimized_away: 0, cache_hits: 0,
  avg_ms: 10, p50_ms: 10, p95_ms: 12, max_ms: 15, total_ms: 500, avg_input_count: 100, avg_output_count: 100, avg_inference_calls: 0, ...over,
});
const retriever = (over: Partial<AnalysisInput['retriever']> = {}): AnalysisInput['retriever'] => ({
  retriever_id: 'ret_x',
  stages: [
    { stage_name: 'search', config: { stage_id: 'feature_search', parameters: { searches: [] } } },
    { stage_name: 'keep', config: { stage_id: 'attribute_filter', parameters: {} } },
  ],
  budget_limits: {}, cache_config: {}, cache_stage_names: [], ...over,
});
const codes = (input: AnalysisInput) => analyze(input).map((s) => s.code).sort();

describe('analyze', () => {
  it('suggests nothing below the minimum of executions, whatever the figures', () => {
    expect(analyze({ retriever: retriever(), totals: totals({ executions: MIN_EXECUTIONS - 1, budget_exceeded: 4, distinct_inputs: 1, p95_ms: 9000 }), stages: [] })).toEqual([]);
  });

  it('budget: executions out of budget, a slow p95 without a time limit, a p95 near the limit', () => {
    expect(codes({ retriever: retriever(), totals: totals({ budget_exceeded: 3 }), stages: [] })).toEqual(['raise_budget']);
    const slow = analyze({ retriever: retriever(), totals: totals({ p95_ms: 1500, p99_ms: 2000 }), stages: [] });
    expect(slow).toEqual([expect.objectContaining({ code: 'add_time_budget', evidence: expect.objectContaining({ suggested_max_time_ms: 3000 }) })]);
    expect(codes({ retriever: retriever({ budget_limits: { max_time_ms: 1000 } }), totals: totals({ p95_ms: 900 }), stages: [] })).toEqual(['budget_near_limit']);
    expect(codes({ retriever: retriever({ budget_limits: { max_time_ms: 1000 } }), totals: totals({ p95_ms: 500 }), stages: [] })).toEqual([]);
  });

  it('cache: repeated inputs without a cache; a cache that rarely hits; nothing for a cache that works', () => {
    expect(codes({ retriever: retriever(), totals: totals({ distinct_inputs: 30 }), stages: [] })).toEqual(['enable_cache']);
    expect(codes({ retriever: retriever(), totals: totals({ distinct_inputs: 45 }), stages: [] })).toEqual([]);
    const caching = retriever({ cache_config: { enabled: true, ttl_seconds: 60 } });
    expect(codes({ retriever: caching, totals: totals({ cached_executions: 50, cache_hits: 5 }), stages: [] })).toEqual(['low_cache_hit_rate']);
    expect(codes({ retriever: caching, totals: totals({ cached_executions: 50, cache_hits: 30, distinct_inputs: 10 }), stages: [] })).toEqual([]);
  });

  it('stage order: a selective filter after an expensive stage; a dominant stage', () => {
    const expensiveSearch = stage('search', { stage_id: 'feature_search', total_ms: 800, avg_input_count: 0, avg_output_count: 100 });
    const selective = stage('keep', { stage_id: 'attribute_filter', total_ms: 200, avg_input_count: 100, avg_output_count: 10 });
    const found = analyze({ retriever: retriever(), totals: totals(), stages: [expensiveSearch, selective] });
    expect(found.map((s) => s.code).sort()).toEqual(['dominant_stage', 'move_filter_earlier']);
    expect(found.find((s) => s.code === 'move_filter_earlier')).toMatchObject({ stage_name: 'keep', evidence: { expensive_stage: 'search', avg_output_count: 10 } });
    const lenient = stage('keep', { stage_id: 'attribute_filter', total_ms: 200, avg_input_count: 100, avg_output_count: 90 });
    expect(codes({ retriever: retriever(), totals: totals(), stages: [expensiveSearch, lenient] })).toEqual(['dominant_stage']);
  });

  it('model swap: a slow, dominant stage that calls a model names the model', () => {
    const rerank = { stage_name: 'rerank', config: { stage_id: 'rerank', parameters: { model: 'lexical-reranker' } } };
    const found = analyze({
      retriever: retriever({ stages: [...retriever().stages, rerank] }),
      totals: totals(),
      stages: [stage('search', { total_ms: 100 }), stage('rerank', { stage_id: 'rerank', total_ms: 900, p95_ms: 350, avg_inference_calls: 1 })],
    });
    expect(found).toEqual([expect.objectContaining({ code: 'lighter_model', category: 'model_swap', stage_name: 'rerank', evidence: expect.objectContaining({ model: 'lexical-reranker' }) })]);
  });
});
