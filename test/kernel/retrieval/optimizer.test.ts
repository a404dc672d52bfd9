/**
 * Each optimizer rule on the real built-in stages (their declared traits), and the cases where a rule must
 * not fire because the rewrite would change the results.
 */
import { describe, expect, it } from 'vitest';
import { PluginRegistry, type StagePlugin } from '../../../kernel/plugins.js';
import { conjoinFilters, optimizePipeline, type PreparedStage } from '../../../kernel/retrieval/optimizer.js';
import { StageChecker } from '../../../kernel/retrieval/pipeline.js';
import attributeFilter from '../../../plugins/stages/attribute_filter/index.js';
import featureSearch from '../../../plugins/stages/feature_search/index.js';
import groupBy from '../../../plugins/stages/group_by/index.js';
import limit from '../../../plugins/stages/limit/index.js';
import sortAttribute from '../../../plugins/stages/sort_attribute/index.js';
import sortRelevance from '../../../plugins/stages/sort_relevance/index.js';
import textSearch from '../../../plugins/stages/text_search/index.js';
import unwind from '../../../plugins/stages/unwind/index.js';

const registry = new PluginRegistry();
for (const s of [attributeFilter, featureSearch, groupBy, limit, sortAttribute, sortRelevance, textSearch, unwind]) registry.add(s, 'test');
const checker = new StageChecker(registry);
const check = (stage: StagePlugin<never>, parameters: Record<string, unknown>) => {
  try {
    checker.checkFilled(stage, parameters, []);
    return true;
  } catch {
    return false;
  }
};

let counter = 0;
function st(stageId: string, parameters: Record<string, unknown>, name?: string): PreparedStage {
  const stage = registry.stages.get(stageId)!;
  const stage_name = name ?? `${stageId}_${counter++}`;
  return { spec: { stage_name, config: { stage_id: stageId, parameters } }, stage, parameters };
}
const cond = (field: string, value: unknown, operator = 'eq') => ({ field, operator, value });
const vectorSearch = (extra: Record<string, unknown> = {}) =>
  st('feature_search', { searches: [{ feature_uri: 'tessera://text_extractor@1.0/text_embedding', query: { vector: [1, 0, 0] }, top_k: 5 }], ...extra }, 'search');
const names = (plan: ReturnType<typeof optimizePipeline>) => plan.stages.map((s) => s.spec.stage_name);

describe('merge_consecutive_filters', () => {
  it('ANDs two adjacent filters into the first, which keeps its name and limit', () => {
    const plan = optimizePipeline([
      st('attribute_filter', { filters: { AND: [cond('category', 'a')] }, limit: 50 }, 'f1'),
      st('attribute_filter', { filters: { OR: [cond('price', 3), cond('price', 4)] } }, 'f2'),
    ], check);
    expect(names(plan)).toEqual(['f1']);
    expect(plan.stages[0]!.parameters).toEqual({ filters: { AND: [cond('category', 'a'), { OR: [cond('price', 3), cond('price', 4)] }] }, limit: 50 });
    expect(plan.stages[0]!.absorbed).toEqual(['f2']);
    expect(plan.removed).toMatchObject([{ stage_name: 'f2', rule: 'merge_consecutive_filters', optimized_into: 'f1', stage_index: 1 }]);
    expect(plan.summary).toMatchObject({ original_stage_count: 2, optimized_stage_count: 1, rules_applied: ['merge_consecutive_filters'], stage_reduction_pct: 50 });
  });

  it('merges a run of three, and never filters with different case sensitivity', () => {
    const three = optimizePipeline([vectorSearch(), st('attribute_filter', { filters: { AND: [cond('a', 1)] } }, 'x'), st('attribute_filter', { filters: { AND: [cond('b', 2)] } }, 'y'), st('attribute_filter', { filters: { AND: [cond('c', 3)] } }, 'z')], check);
    expect(names(three)).toEqual(['search', 'x']);
    expect(three.stages[1]!.parameters.filters).toEqual({ AND: [cond('a', 1), cond('b', 2), cond('c', 3)] });
    const mixed = optimizePipeline([vectorSearch(), st('attribute_filter', { filters: { AND: [cond('a', 'x')], case_sensitive: true } }), st('attribute_filter', { filters: { AND: [cond('b', 'y')] } })], check);
    expect(mixed.summary).toBeNull();
    expect(mixed.stages).toHaveLength(3);
  });

  it('refuses a merge past the filter language limits', () => {
    const many = (field: string) => ({ AND: Array.from({ length: 150 }, (_, i) => cond(field, i)) });
    const plan = optimizePipeline([vectorSearch(), st('attribute_filter', { filters: many('a') }), st('attribute_filter', { filters: many('b') })], check);
    expect(plan.stages).toHaveLength(3);
    expect(conjoinFilters(many('a'), many('b'))).toBeUndefined();
  });
});

describe('push_down_filters', () => {
  it('moves a first-stage filter into the following search as its pre-filter', () => {
    const plan = optimizePipeline([st('attribute_filter', { filters: { AND: [cond('category', 'a')] } }, 'only_a'), vectorSearch({ pre_filters: { AND: [cond('price', 2, 'gt')] } })], check);
    expect(names(plan)).toEqual(['search']);
    expect(plan.stages[0]!.parameters.pre_filters).toEqual({ AND: [cond('price', 2, 'gt'), cond('category', 'a')] });
    expect(plan.removed).toMatchObject([{ stage_name: 'only_a', rule: 'push_down_filters', optimized_into: 'search' }]);
  });

  it('never moves a filter that follows a top_k search into it (it would bring back documents the search cut)', () => {
    const plan = optimizePipeline([vectorSearch(), st('attribute_filter', { filters: { AND: [cond('category', 'a')] } })], check);
    expect(plan.summary).toBeNull();
    expect(plan.stages.map((s) => s.parameters)).toEqual([vectorSearch().parameters, { filters: { AND: [cond('category', 'a')] } }]);
  });

  it('takes a filter into a search-less feature_search (a pure filter), but not into a first one cut by final_top_k', () => {
    const pure = optimizePipeline([st('feature_search', { pre_filters: { AND: [cond('a', 1)] } }, 'pure'), st('attribute_filter', { filters: { AND: [cond('b', 2)] } }, 'f')], check);
    expect(names(pure)).toEqual(['pure']);
    expect(pure.stages[0]!.parameters.pre_filters).toEqual({ AND: [cond('a', 1), cond('b', 2)] });
    const cut = optimizePipeline([st('feature_search', { final_top_k: 3 }), st('attribute_filter', { filters: { AND: [cond('b', 2)] } })], check);
    expect(cut.summary).toBeNull();
  });

  it('does not push a filter that is not first into a later search (the search ranks its input, not the collections)', () => {
    const plan = optimizePipeline([vectorSearch(), st('attribute_filter', { filters: { AND: [cond('a', 1)] } }, 'f'), st('feature_search', { searches: [{ text_search: { query: 'x' }, top_k: 3 }] }, 's2')], check);
    expect(names(plan)).toEqual(['search', 'f', 's2']);
  });
});

describe('group_by_push_down', () => {
  it('moves a filter on the group key before the grouping, where it can merge further', () => {
    const plan = optimizePipeline([
      vectorSearch(),
      st('attribute_filter', { filters: { AND: [cond('price', 1, 'gte')] } }, 'cheap'),
      st('group_by', { field: 'category', output_mode: 'first' }, 'groups'),
      st('attribute_filter', { filters: { NOT: [cond('category', 'b')] } }, 'not_b'),
    ], check);
    expect(names(plan)).toEqual(['search', 'cheap', 'groups']);
    expect(plan.stages[1]!.parameters.filters).toEqual({ AND: [cond('price', 1, 'gte'), { NOT: [cond('category', 'b')] }] });
    expect(plan.summary!.rules_applied).toEqual(['group_by_push_down', 'merge_consecutive_filters']);
  });

  it('keeps a filter reading another field (or the group output) after the grouping', () => {
    for (const field of ['price', 'group_key']) {
      const plan = optimizePipeline([vectorSearch(), st('group_by', { field: 'category' }), st('attribute_filter', { filters: { AND: [cond(field, 1)] } })], check);
      expect(plan.summary, field).toBeNull();
    }
  });

  it('never moves a filter onto the first place (a group_by first groups nothing; a filter first would read the collections)', () => {
    const plan = optimizePipeline([st('group_by', { field: 'category' }), st('attribute_filter', { filters: { AND: [cond('category', 'a')] } })], check);
    expect(plan.summary).toBeNull();
  });
});

describe('eliminate_redundant_sorts', () => {
  it('removes sort_relevance after a search (already best first, ties by id), also through filters and limits', () => {
    const plan = optimizePipeline([vectorSearch(), st('limit', { limit: 3 }, 'top3'), st('sort_relevance', { direction: 'desc' }, 'by_score')], check);
    expect(names(plan)).toEqual(['search', 'top3']);
    expect(plan.removed).toMatchObject([{ stage_name: 'by_score', rule: 'eliminate_redundant_sorts', optimized_into: null }]);
    const text = optimizePipeline([st('text_search', { query: 'x' }, 'bm25'), st('sort_relevance', {}, 'again')], check);
    expect(names(text)).toEqual(['bm25']);
  });

  it('keeps an ascending relevance sort, and a relevance sort after a stage that may reorder', () => {
    expect(optimizePipeline([vectorSearch(), st('sort_relevance', { direction: 'asc' })], check).summary).toBeNull();
    expect(optimizePipeline([vectorSearch(), st('group_by', { field: 'category' }), st('sort_relevance', {})], check).summary).toBeNull();
  });

  it('removes a sort overridden by a total sort or a sort on the same field, not one whose ties the next sort keeps', () => {
    const overridden = optimizePipeline([vectorSearch(), st('sort_attribute', { field: 'price' }, 'by_price'), st('sort_relevance', { direction: 'asc' }, 'by_score')], check);
    expect(names(overridden)).toEqual(['search', 'by_score']);
    const sameField = optimizePipeline([vectorSearch(), st('sort_attribute', { field: 'price', direction: 'asc' }, 'up'), st('sort_attribute', { field: 'price', direction: 'desc' }, 'down')], check);
    expect(names(sameField)).toEqual(['search', 'down']);
    const tieBreak = optimizePipeline([vectorSearch(), st('sort_attribute', { field: 'price' }), st('sort_attribute', { field: 'category' })], check);
    expect(tieBreak.summary).toBeNull();
    const twice = optimizePipeline([vectorSearch(), st('sort_attribute', { field: 'price' }), st('limit', { limit: 2 }), st('sort_attribute', { field: 'price' }, 'again')], check);
    expect(names(twice)).not.toContain('again');
  });

  it('keeps a sort before a total sort once a stage that may repeat documents ran (their ties would keep its order)', () => {
    const plan = optimizePipeline([vectorSearch(), st('unwind', { field: 'text', output_field: 'line' }), st('sort_attribute', { field: 'line' }), st('sort_relevance', {})], check);
    expect(plan.summary).toBeNull();
  });

  it('never removes the first stage', () => {
    expect(optimizePipeline([st('sort_attribute', { field: 'price' }), st('sort_relevance', {})], check).summary).toBeNull();
  });
});

it('reports nothing when nothing changes', () => {
  const plan = optimizePipeline([vectorSearch(), st('limit', { limit: 2 })], check);
  expect(plan.summary).toBeNull();
  expect(plan.removed).toEqual([]);
});
