/**
 * json_transform and rag_prepare through the whole stack: ad hoc and saved retrievers over HTTP after a
 * vector search, template errors as 422s naming the parameter, hostile templates as failed executions,
 * `max_llm_tokens` stopping an execution, and user-scoped keys seeing only their own documents.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CONTRACT_FEATURE_URI, contractVector, startStageWorld, type StageWorld } from '../../support/stage-contract.js';

interface Doc {
  document_id: string;
  score?: number;
  payload: Record<string, unknown> & { fields?: Record<string, unknown>; owner_principal?: string | null };
}
interface Citation { n: number; document_id: string; collection_id: string; score: number }

describe('json_transform and rag_prepare through a retriever', () => {
  let world: StageWorld;
  const keys: Record<string, string> = {};
  const stage = (stage_name: string, stage_id: string, parameters: Record<string, unknown>) => ({ stage_name, config: { stage_id, parameters } });
  const search = stage('search', 'feature_search', { searches: [{ feature_uri: CONTRACT_FEATURE_URI, query: { vector: contractVector(3) }, top_k: 12 }] });
  const api = (method: string, path: string, body: unknown, key = world.t.adminKey) =>
    world.t.request(method, path, { key, headers: { 'X-Namespace': 'contract' }, body });
  const adHoc = (stages: unknown[], more: Record<string, unknown> = {}, key = world.t.adminKey) =>
    api('POST', '/v1/retrievers/execute', { collection_identifiers: ['contract-docs'], input_schema: {}, inputs: {}, stages, pagination: { limit: 100 }, ...more }, key);
  const ownerOf = (id: string) => world.documents.find((d) => d.document_id === id)?.payload?.owner_principal;

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

  it('lists both stages with their schemas', async () => {
    const res = await world.t.request('GET', '/v1/retrievers/stages', { key: world.t.adminKey });
    const byId = new Map((res.body.results as Array<{ stage_id: string; stage_type: string }>).map((s) => [s.stage_id, s]));
    expect(byId.get('json_transform')).toMatchObject({ stage_type: 'apply' });
    expect(byId.get('rag_prepare')).toMatchObject({ stage_type: 'reduce' });
  });

  it('reshapes documents with typed values; an input is a value in the template, never template text', async () => {
    const hostile = '{% for i in (1..100000000) %}x{% endfor %}';
    const res = await adHoc([search, stage('shape', 'json_transform', {
      template: { label: 'doc {{ doc.fields.chunk_index }} of {{ doc.collection_id }}', price: '{{ doc.fields.price }}', q: '{{ inputs.q }}', said: 'q={{ inputs.q }}' },
      output_field: 'shaped',
    })], { input_schema: { q: { type: 'string', required: true } }, inputs: { q: hostile } });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body.status).toBe('completed');
    const docs = res.body.documents as Doc[];
    expect(docs).toHaveLength(12);
    for (const d of docs) {
      expect(d.payload.shaped).toEqual({
        label: `doc ${d.payload.fields!.chunk_index} of ${world.documents[0]!.collection_id}`,
        price: d.payload.fields!.price,
        q: hostile,
        said: `q=${hostile}`,
      });
    }
  });

  it('refuses a template that does not parse, or reads an undeclared input, with a 422 naming it', async () => {
    const create = (template: unknown) => api('POST', '/v1/retrievers', {
      retriever_name: 'bad-template', collection_identifiers: ['contract-docs'], input_schema: { q: { type: 'string' } },
      stages: [search, stage('shape', 'json_transform', { template, output_field: 'o' })],
    });
    const syntax = await create({ ok: '{{ doc.score }}', label: 'a {% if %} b' });
    expect(syntax.status).toBe(422);
    expect(syntax.body.detail).toEqual([expect.objectContaining({ loc: ['body', 'stages', 1, 'config', 'parameters', 'template', 'label'], msg: expect.stringContaining('does not parse') })]);
    const undeclared = await create({ a: '{{ inputs.nope }}' });
    expect(undeclared.status).toBe(422);
    expect(undeclared.body.detail[0].msg).toContain("input 'nope'");
    const file = await adHoc([search, stage('shape', 'json_transform', { template: '{% include "/etc/passwd" %}', output_field: 'o' })]);
    expect(file.status).toBe(422);
    const rag = await adHoc([search, stage('rag', 'rag_prepare', { template: '[{n}] {title}' })]);
    expect(rag.status).toBe(422);
    expect(rag.body.detail[0]).toMatchObject({ loc: ['body', 'stages', 1, 'config', 'parameters', 'template'] });
  });

  it('fails the execution with a readable error when a template passes a limit', async () => {
    const res = await adHoc([search, stage('shape', 'json_transform', { template: '{% for i in (1..100000000) %}x{% endfor %}', output_field: 'o' })]);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ status: 'failed', documents: [] });
    expect(res.body.error).toMatch(/^Stage 'shape' \(json_transform\) failed: template failed: memory alloc limit exceeded/);
    expect(res.body.stage_statistics.stages.shape).toMatchObject({ status: 'failed', input_count: 12 });
  });

  it('builds a cited context in rank order and reports the tokens it used', async () => {
    const ranked = ((await adHoc([search])).body.documents as Doc[]).map((d) => d.document_id);
    const res = await adHoc([search, stage('rag', 'rag_prepare', { max_tokens: 1000 })]);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body.status).toBe('completed');
    expect(res.body.documents).toHaveLength(1);
    const context = res.body.documents[0] as Doc & { payload: { context: string; citations: Citation[]; token_count: number } };
    expect(context.document_id).toBe('rag_context');
    expect(context.payload.citations.map((c) => c.document_id)).toEqual(ranked);
    expect(context.payload.citations.map((c) => c.n)).toEqual(ranked.map((_, i) => i + 1));
    context.payload.citations.forEach((c) => {
      const cited = world.documents.find((d) => d.document_id === c.document_id)!;
      expect(context.payload.context).toContain(`[${c.n}] ${String(cited.payload!.fields && (cited.payload!.fields as { text: string }).text)}`);
    });
    expect(res.body.budget.llm_tokens).toBe(context.payload.token_count);
    expect(res.body.budget.exceeded).toBeNull();
  });

  it('stops at max_llm_tokens after the stage that reached it, returning what it made', async () => {
    const created = await api('POST', '/v1/retrievers', {
      retriever_name: 'llm-budget', collection_identifiers: ['contract-docs'], input_schema: {},
      stages: [search, stage('rag', 'rag_prepare', { max_tokens: 1000, output_mode: 'documents' }), stage('shape', 'json_transform', { template: '{{ doc.score }}', output_field: 's' })],
      budget_limits: { max_llm_tokens: 20 },
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const res = await api('POST', `/v1/retrievers/${created.body.retriever.retriever_id}/execute`, { inputs: {} });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body.status).toBe('budget_exceeded');
    const docs = res.body.documents as Array<Doc & { payload: { citation: number; context_tokens: number } }>;
    expect(docs.length).toBeGreaterThan(0);
    expect(docs.length).toBeLessThan(12);
    expect(docs.map((d) => d.payload.citation)).toEqual(docs.map((_, i) => i + 1));
    const used = docs.reduce((sum, d) => sum + d.payload.context_tokens, 0);
    expect(used).toBeLessThanOrEqual(20);
    expect(res.body.budget).toMatchObject({ llm_tokens: used, exceeded: { limit: 'max_llm_tokens', value: 20, used, stopped_before: 'shape' } });
    expect(res.body.stage_statistics.stages.shape.status).toBe('skipped');
    for (const d of docs) expect(d.payload.s).toBeUndefined();

    // The same pipeline with room to spare completes.
    const roomy = await adHoc(created.body.retriever.stages, { budget_limits: { max_llm_tokens: 10_000 } });
    expect(roomy.body).toMatchObject({ status: 'completed', budget: { exceeded: null } });
    expect(roomy.body.documents).toHaveLength(12);

    // Passed during the last stage: every stage ran, and the run still says it went over its budget.
    const last = await adHoc(created.body.retriever.stages.slice(0, 2), { budget_limits: { max_llm_tokens: 20 } });
    expect(last.body).toMatchObject({ status: 'budget_exceeded', budget: { exceeded: { limit: 'max_llm_tokens', value: 20, stopped_before: null } } });
    expect(last.body.documents.length).toBeGreaterThan(0);
  });

  it("never gives a user-scoped key another principal's text, cited or reshaped", async () => {
    for (const principal of ['alice', 'bob']) {
      const rag = await adHoc([search, stage('rag', 'rag_prepare', {})], {}, keys[principal]);
      expect(rag.body.status).toBe('completed');
      const citations = (rag.body.documents[0] as { payload: { citations: Citation[]; context: string } }).payload.citations;
      expect(citations.length).toBe(4);
      for (const c of citations) expect(ownerOf(c.document_id)).toBe(principal);
      const shaped = await adHoc([search, stage('shape', 'json_transform', { template: { owner: '{{ doc.payload.owner_principal }}', id: '{{ doc.document_id }}' } })], {}, keys[principal]);
      const docs = shaped.body.documents as Doc[];
      expect(docs).toHaveLength(4);
      for (const d of docs) expect([d.payload.owner, ownerOf(d.payload.id as string)]).toEqual([principal, principal]);
    }
  });
});
