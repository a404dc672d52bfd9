/**
 * The refinement stages (sort_relevance, score_normalize, sample, deduplicate, group_by, unwind) through the
 * whole stack: ad hoc executions over HTTP after a vector search, as the admin and as user-scoped keys,
 * which must only ever get their own principal's documents back, nested group members included.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CONTRACT_FEATURE_URI, contractVector, startStageWorld, type StageWorld } from '../../support/stage-contract.js';

interface Doc {
  document_id: string;
  score?: number;
  payload: { owner_principal: string | null; group_key?: unknown; group_size?: number; documents?: Doc[]; fields: Record<string, unknown> };
}

describe('refinement stages through a retriever', () => {
  let world: StageWorld;
  const keys: Record<string, string> = {};

  const stage = (stage_id: string, parameters: Record<string, unknown>) => ({ stage_name: stage_id, config: { stage_id, parameters } });
  const search = stage('feature_search', { searches: [{ feature_uri: CONTRACT_FEATURE_URI, query: { vector: contractVector(3) }, top_k: 12 }] });
  const execute = async (stages: unknown[], key = world.t.adminKey) => {
    const res = await world.t.request('POST', '/v1/retrievers/execute', {
      key, headers: { 'X-Namespace': 'contract' },
      body: { collection_identifiers: ['contract-docs'], input_schema: {}, inputs: {}, stages, pagination: { limit: 100 } },
    });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body.status, JSON.stringify(res.body)).toBe('completed');
    return res.body.documents as Doc[];
  };

  beforeAll(async () => {
    world = await startStageWorld();
    for (const principal of ['alice', 'bob']) {
      keys[principal] = (await world.t.request('POST', `/v1/organizations/users/${world.t.adminEmail}/api-keys`, {
        key: world.t.adminKey, body: { name: principal, principal_id: principal, permissions: ['read'] },
      })).body.key;
    }
  }, 120_000);
  afterAll(async () => {
    await world?.t.stop();
  });

  it('lists the six stages with their schemas', async () => {
    const res = await world.t.request('GET', '/v1/retrievers/stages', { key: world.t.adminKey });
    const byId = new Map((res.body.results as Array<{ stage_id: string }>).map((s) => [s.stage_id, s]));
    for (const id of ['sort_relevance', 'score_normalize', 'sample', 'deduplicate', 'group_by', 'unwind']) expect(byId.has(id), id).toBe(true);
  });

  it('normalizes, groups and re-sorts search results', async () => {
    const docs = await execute([search, stage('score_normalize', { method: 'min_max' }), stage('group_by', { field: 'category', output_mode: 'all', max_per_group: 3 }), stage('sort_relevance', { direction: 'asc' })]);
    expect(docs).toHaveLength(2);
    expect(docs.map((d) => d.payload.group_key).sort()).toEqual(['even', 'odd']);
    expect(docs.map((d) => d.payload.group_size)).toEqual([6, 6]);
    // sorted ascending: the group whose best score is lower comes first; the best of all is normalized to 1
    expect(docs[0]!.score!).toBeLessThan(docs[1]!.score!);
    expect(docs[1]!.score).toBe(1);
    for (const group of docs) {
      expect(group.payload.documents).toHaveLength(3);
      expect(group.payload.documents![0]!.document_id).toBe(group.document_id);
      for (const member of group.payload.documents!) expect(member.payload.fields.category).toBe(group.payload.group_key);
    }
  });

  it('deduplicates, samples by stratum and unwinds, reproducibly', async () => {
    const stages = [search, stage('deduplicate', { fields: ['chunk_index'] }), stage('sample', { count: 2, seed: 11, stratify_by: 'category' }), stage('unwind', { field: 'text', output_field: 'line' })];
    const docs = await execute(stages);
    expect(docs).toHaveLength(2);
    expect(new Set(docs.map((d) => d.payload.fields.category)).size).toBe(2);
    for (const d of docs) expect(d.payload.fields).toMatchObject({ line: d.payload.fields.text, unwind_index: 0 });
    expect((await execute(stages)).map((d) => d.document_id)).toEqual(docs.map((d) => d.document_id));
  });

  it("never gives a user-scoped key another principal's document, nested group members included", async () => {
    for (const principal of ['alice', 'bob']) {
      const pipelines = [
        [search, stage('score_normalize', { method: 'softmax' }), stage('sort_relevance', {})],
        [search, stage('group_by', { field: 'category', output_mode: 'all' })],
        [search, stage('group_by', { field: 'chunk_index', output_mode: 'flatten', max_per_group: 1 }), stage('deduplicate', { fields: ['category'] })],
        [search, stage('sample', { count: 3, stratify_by: 'category' }), stage('unwind', { field: 'text' })],
      ];
      for (const stages of pipelines) {
        const docs = await execute(stages, keys[principal]);
        expect(docs.length).toBeGreaterThan(0);
        for (const d of docs) {
          expect(d.payload.owner_principal).toBe(principal);
          for (const member of d.payload.documents ?? []) expect(member.payload.owner_principal).toBe(principal);
        }
      }
    }
  });
});
