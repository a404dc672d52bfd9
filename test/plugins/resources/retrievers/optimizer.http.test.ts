/**
 * The optimizer and explain through HTTP: `optimization_applied` / `optimization_summary` and the stage
 * statistics of a rewritten pipeline (saved and ad hoc, `optimize: false` to compare), and
 * `POST /v1/retrievers/{id}/explain` / `POST /v1/retrievers/explain`: the plan after optimization, estimates,
 * bottlenecks and suggestions, nothing run or recorded, the execute error rules, and estimates that never
 * count another principal's documents.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CONTRACT_FEATURE_URI, contractVector, startStageWorld, type StageWorld } from '../../../support/stage-contract.js';

const stage = (stage_name: string, stage_id: string, parameters: Record<string, unknown>) => ({ stage_name, config: { stage_id, parameters } });
const evens = stage('evens', 'attribute_filter', { filters: { AND: [{ field: 'category', operator: 'eq', value: '{{inputs.category}}' }] } });
const search = (top_k = 12) => stage('search', 'feature_search', { searches: [{ feature_uri: CONTRACT_FEATURE_URI, query: { vector: contractVector(3) }, top_k }] });
const bestFirst = stage('best_first', 'sort_relevance', {});
const OPTIMIZABLE = [evens, search(), bestFirst];

interface Result {
  status: string;
  documents: Array<{ document_id: string; score: number; payload: { owner_principal: string | null; fields: { category: string } } }>;
  optimization_applied: boolean;
  optimization_summary?: Record<string, unknown>;
  stage_statistics: { stages: Record<string, { stage_index: number; status: string; optimized_into?: string | null; input_count: number; output_count: number }> };
}

interface Explanation {
  retriever_id: string | null;
  optimization_applied: boolean;
  optimization_summary?: Record<string, unknown>;
  rules_applied: string[];
  source_documents: number;
  stages: Array<{ stage_name: string; stage_id: string; stage_index: number; plan_index: number; absorbed: string[]; parameters: Record<string, unknown>; estimate: { credits: number; documents_in: number; documents_out: number; relative_cost: number } }>;
  optimized_away: Array<{ stage_name: string; rule: string; optimized_into: string | null }>;
  estimated_total: { credits: number; documents_out: number };
  bottleneck_stages: Array<{ stage_name: string; relative_cost: number }>;
  suggestions: Array<{ code: string; stage_name: string | null; message: string }>;
}

describe('optimizer and explain over HTTP', () => {
  let world: StageWorld;
  const keys: Record<string, string> = {};
  const call = (method: string, path: string, body?: unknown, key = world.t.adminKey) =>
    world.t.request(method, path, { key, headers: { 'X-Namespace': 'contract' }, ...(body !== undefined ? { body } : {}) });
  const adHoc = (stages: unknown[], extra: Record<string, unknown> = {}) => ({
    collection_identifiers: ['contract-docs'], input_schema: {}, inputs: {}, stages, pagination: { limit: 100 }, ...extra,
  });

  beforeAll(async () => {
    world = await startStageWorld();
    for (const principal of ['alice', 'bob']) {
      keys[principal] = (await world.t.request('POST', `/v1/organizations/users/${world.t.adminEmail}/api-keys`, {
        key: world.t.adminKey, body: { name: principal, principal_id: principal, permissions: ['read'] },
      })).body.key;
    }
    const created = await call('POST', '/v1/retrievers', {
      retriever_name: 'evens-near-3', collection_identifiers: ['contract-docs'],
      input_schema: { category: { type: 'string', required: true } }, stages: OPTIMIZABLE,
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
  }, 120_000);
  afterAll(async () => {
    await world?.t.stop();
  });

  describe('execution', () => {
    it('reports the rewrite in optimization_summary and stage statistics, with the same documents as optimize: false', async () => {
      const fast = await call('POST', '/v1/retrievers/evens-near-3/execute', { inputs: { category: 'even' } });
      expect(fast.status, JSON.stringify(fast.body)).toBe(200);
      const result = fast.body as Result;
      expect(result.optimization_applied).toBe(true);
      expect(result.optimization_summary).toMatchObject({
        original_stage_count: 3, optimized_stage_count: 1, rules_applied: ['eliminate_redundant_sorts', 'push_down_filters'], stage_reduction_pct: 66.67,
      });
      expect(typeof result.optimization_summary!.optimization_time_ms).toBe('number');
      const stats = result.stage_statistics.stages;
      expect(Object.keys(stats)).toEqual(['evens', 'search', 'best_first']);
      expect(stats.evens).toMatchObject({ stage_index: 0, status: 'optimized_away', optimized_into: 'search' });
      expect(stats.best_first).toMatchObject({ stage_index: 2, status: 'optimized_away', optimized_into: null });
      expect(stats.search).toMatchObject({ stage_index: 1, status: 'completed', output_count: 6 });
      expect(result.documents.map((d) => d.payload.fields.category)).toEqual(Array(6).fill('even'));

      const plain = await call('POST', '/v1/retrievers/evens-near-3/execute', { inputs: { category: 'even' }, optimize: false });
      expect(plain.body.optimization_applied).toBe(false);
      expect(plain.body).not.toHaveProperty('optimization_summary');
      expect(Object.values(plain.body.stage_statistics.stages).map((s) => (s as { status: string }).status)).toEqual(['completed', 'completed', 'completed']);
      expect(plain.body.documents).toEqual(result.documents);
    });

    it('says optimization_applied false, without a summary, when nothing can be rewritten (ad hoc too)', async () => {
      const res = await call('POST', '/v1/retrievers/execute', adHoc([search(5), stage('cheap', 'attribute_filter', { filters: { AND: [{ field: 'price', operator: 'lt', value: 5 }] } })]));
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      expect(res.body.optimization_applied).toBe(false);
      expect(res.body).not.toHaveProperty('optimization_summary');
      const merged = await call('POST', '/v1/retrievers/execute', adHoc([search(), stage('a', 'attribute_filter', { filters: { AND: [{ field: 'price', operator: 'lt', value: 5 }] } }), stage('b', 'attribute_filter', { filters: { AND: [{ field: 'category', operator: 'eq', value: 'odd' }] } })]));
      expect(merged.body.optimization_summary.rules_applied).toEqual(['merge_consecutive_filters']);
      expect(merged.body.stage_statistics.stages.a).toMatchObject({ status: 'completed', input_count: 12 });
      expect(merged.body.stage_statistics.stages.b).toMatchObject({ status: 'optimized_away', optimized_into: 'a' });
      for (const d of merged.body.documents as Result['documents']) expect(d.payload.fields.category).toBe('odd');
    });

    it('records optimized executions in the history with the statistics it answered', async () => {
      const res = await call('POST', '/v1/retrievers/evens-near-3/execute', { inputs: { category: 'odd' } });
      const record = await call('GET', `/v1/retrievers/evens-near-3/executions/${res.body.execution_id}`);
      expect(record.status).toBe(200);
      expect(record.body.stage_statistics.stages.evens).toMatchObject({ status: 'optimized_away', optimized_into: 'search' });
    });
  });

  describe('explain', () => {
    it('answers the optimized plan with filled parameters, estimates, a bottleneck and suggestions, and runs nothing', async () => {
      const before = (await call('GET', '/v1/retrievers/evens-near-3/executions')).body.total as number;
      const res = await call('POST', '/v1/retrievers/evens-near-3/explain', { inputs: { category: 'even' } });
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      const plan = res.body as Explanation;
      expect(plan.retriever_id).toMatch(/^ret_/);
      expect(plan.optimization_applied).toBe(true);
      expect(plan.rules_applied).toEqual(['eliminate_redundant_sorts', 'push_down_filters']);
      expect(plan.stages).toHaveLength(1);
      expect(plan.stages[0]).toMatchObject({ stage_name: 'search', stage_id: 'feature_search', stage_index: 1, plan_index: 0, absorbed: ['evens'] });
      expect(plan.stages[0]!.parameters.pre_filters).toEqual({ AND: [{ field: 'category', operator: 'eq', value: 'even' }] });
      expect(plan.stages[0]!.estimate).toEqual({ credits: 1, documents_in: 12, documents_out: 12, relative_cost: 1 });
      expect(plan.optimized_away.map((s) => [s.stage_name, s.rule, s.optimized_into])).toEqual([['evens', 'push_down_filters', 'search'], ['best_first', 'eliminate_redundant_sorts', null]]);
      expect(plan.source_documents).toBe(12);
      expect(plan.estimated_total).toEqual({ credits: 1, documents_out: 12 });
      expect(plan.bottleneck_stages.map((b) => b.stage_name)).toEqual(['search']);
      expect(plan.suggestions.map((s) => s.code)).toEqual(['no_cache']);
      expect((await call('GET', '/v1/retrievers/evens-near-3/executions')).body.total).toBe(before);

      const asWritten = await call('POST', '/v1/retrievers/evens-near-3/explain', { inputs: { category: 'even' }, optimize: false });
      expect(asWritten.body.optimization_applied).toBe(false);
      expect(asWritten.body).not.toHaveProperty('optimization_summary');
      expect((asWritten.body as Explanation).stages.map((s) => s.stage_name)).toEqual(['evens', 'search', 'best_first']);
    });

    it('follows the execute rules: 404 for an unknown retriever, 422 naming a missing input or a bad body', async () => {
      const missing = await call('POST', '/v1/retrievers/no-such-retriever/explain', { inputs: {} });
      expect(missing.status).toBe(404);
      expect(missing.body.error.type).toBe('NotFoundError');
      const noInput = await call('POST', '/v1/retrievers/evens-near-3/explain', { inputs: {} });
      expect(noInput.status).toBe(422);
      expect(JSON.stringify(noInput.body.detail)).toContain('category');
      const badBody = await call('POST', '/v1/retrievers/evens-near-3/explain', { inputs: {}, run: true });
      expect(badBody.status).toBe(422);
      const badStage = await call('POST', '/v1/retrievers/explain', adHoc([stage('x', 'no_such_stage', {})]));
      expect(badStage.status).toBe(422);
      const badParameters = await call('POST', '/v1/retrievers/explain', adHoc([stage('cut', 'limit', { limit: 0 })]));
      expect(badParameters.status).toBe(422);
    });

    it('is a reserved retriever name', async () => {
      const res = await call('POST', '/v1/retrievers', { retriever_name: 'explain', collection_identifiers: ['contract-docs'], stages: [search()] });
      expect(res.status).toBe(422);
    });

    it('suggests a pre-filter, a smaller top_k and sorting before the limit for an ad hoc pipeline', async () => {
      const res = await call('POST', '/v1/retrievers/explain', adHoc([
        search(12),
        stage('only_odd', 'attribute_filter', { filters: { AND: [{ field: 'category', operator: 'eq', value: 'odd' }] } }),
        stage('top3', 'limit', { limit: 3 }),
        stage('by_price', 'sort_attribute', { field: 'price' }),
      ]));
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      const plan = res.body as Explanation;
      expect(plan.retriever_id).toBeNull();
      expect(plan.optimization_applied).toBe(false);
      expect(plan.suggestions.map((s) => [s.code, s.stage_name])).toEqual([['add_pre_filter', 'only_odd'], ['sort_after_limit', 'by_price']]);
      expect(plan.stages.map((s) => s.estimate.documents_out)).toEqual([12, 12, 3, 3]);

      const wide = await call('POST', '/v1/retrievers/explain', adHoc([search(12), stage('top3', 'limit', { limit: 3 })]));
      expect((wide.body as Explanation).suggestions).toMatchObject([{ code: 'top_k_above_limit', stage_name: 'search' }]);
      expect((wide.body as Explanation).suggestions[0]!.message).toContain('3');
    });

    it("never counts another principal's documents in a user-scoped key's estimates", async () => {
      for (const principal of ['alice', 'bob']) {
        const visible = await call('POST', '/v1/retrievers/execute', adHoc([stage('all', 'attribute_filter', { filters: {} })]), keys[principal]);
        expect(visible.status, JSON.stringify(visible.body)).toBe(200);
        const own = (visible.body as Result).documents.length;
        expect(own).toBeGreaterThan(0);
        expect(own).toBeLessThan(12);

        const saved = await call('POST', '/v1/retrievers/evens-near-3/explain', { inputs: { category: 'even' } }, keys[principal]);
        expect(saved.status, JSON.stringify(saved.body)).toBe(200);
        const plan = saved.body as Explanation;
        expect(plan.source_documents).toBe(own);
        for (const s of plan.stages) {
          expect(s.estimate.documents_in).toBeLessThanOrEqual(own);
          expect(s.estimate.documents_out).toBeLessThanOrEqual(own);
        }
        const adHocPlan = (await call('POST', '/v1/retrievers/explain', adHoc([search(12), stage('top', 'limit', { limit: 100 })]), keys[principal])).body as Explanation;
        expect(adHocPlan.source_documents).toBe(own);
        expect(adHocPlan.estimated_total.documents_out).toBe(own);
      }
    });
  });
});
