/**
 * rerank: the stage contract (with a spawned inference worker serving lexical-reranker), the stage's own
 * rules on hand-made documents (passages, missing text, top_k, the kept score, batches as inference calls),
 * then through the whole stack: a text corpus searched by feature_search and reranked over HTTP, the
 * max_inference_calls budget stopping it before any model call, model errors as failed executions, and
 * user-scoped keys that only ever get their own documents back.
 */
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { StageContext, StageDocument } from '../../../kernel/plugins.js';
import { BudgetExceededError } from '../../../kernel/retrieval/budget.js';
import { lexicalScore } from '../../../plugins/models/lexical-reranker/index.js';
import rerank, { passageOf, type RerankParameters } from '../../../plugins/stages/rerank/index.js';
import { startTestKernel, type TestKernel } from '../../support/kernel.js';
import { runStageContract, startStageWorld, type StageWorld } from '../../support/stage-contract.js';
import { ingestTexts, TEXT_MODEL_PLUGIN } from '../../support/text-corpus.js';

const RERANKER_PLUGIN = path.resolve(__dirname, '../../../plugins/models/lexical-reranker/index.ts');
const TEXT_FEATURE = 'tessera://text_extractor@1.0/text_embedding';

runStageContract(
  rerank,
  {
    valid: [
      { query: 'document 3' },
      { query: 'x', model: 'lexical-reranker', text_fields: ['text', 'metadata.summary'], top_k: 5, max_candidates: 10, batch_size: 4, missing_text: 'drop', original_score_field: null },
    ],
    invalid: [{}, { query: '' }, { query: 'x', batch_size: 0 }, { query: 'x', batch_size: 65 }, { query: 'x', max_candidates: 1001 }, { query: 'x', text_fields: [] }, { query: 'x', model: 'Bad Name' }, { query: 'x', missing_text: 'keep' }, { query: 'x', extra: 1 }],
  },
  { inferencePlugins: [RERANKER_PLUGIN] },
);

describe('rerank stage rules', () => {
  let world: StageWorld;
  beforeAll(async () => {
    world = await startStageWorld({ inferencePlugins: [RERANKER_PLUGIN] });
  }, 120_000);
  afterAll(async () => {
    await world?.t.stop();
  });

  const doc = (id: string, fields: Record<string, unknown>, score?: number): StageDocument => ({
    document_id: id,
    collection_id: 'col_x',
    ...(score !== undefined ? { score } : {}),
    payload: { document_id: id, fields, metadata: { summary: `summary of ${id}` } },
  });
  const run = (ctx: StageContext, docs: StageDocument[], params: RerankParameters) => rerank.run(ctx, docs, params);

  it('builds passages from the chosen fields, or every string field by name', () => {
    const d = doc('d1', { title: 'Title', body: 'Body text', count: 3, tags: ['a', 'b'] });
    expect(passageOf(d, undefined)).toBe('Body text\nTitle');
    expect(passageOf(d, ['title', 'tags', 'metadata.summary', 'missing'])).toBe('Title\na\nb\nsummary of d1');
    expect(passageOf(doc('d2', { text: '   ' }), undefined)).toBeUndefined();
    expect(passageOf(doc('d3', { text: 'x'.repeat(20_000) }), ['text'])).toHaveLength(16_000);
  });

  it('orders by the model, keeps the incoming score, puts textless documents last (or drops them) and cuts top_k', async () => {
    const query = 'harbour lighthouse keeper';
    const docs = [
      doc('a', { text: 'The harbour has a lighthouse and a keeper lives nearby.' }, 0.9),
      doc('b', { image: { storage_key: 'k' } }, 0.8),
      doc('c', { text: 'A harbour lighthouse keeper trims the lamp.' }, 0.7),
      doc('d', { text: 'Bread needs flour and salt.' }, 0.6),
    ];
    const ctx = world.context(null, 1);
    const out = await run(ctx, structuredClone(docs), { query });
    expect(out.map((d) => d.document_id)).toEqual(['c', 'a', 'd', 'b']);
    expect(out[0]!.score).toBeCloseTo(lexicalScore(query, 'A harbour lighthouse keeper trims the lamp.'), 5);
    expect(out[2]!.score).toBe(0);
    expect(out[3]!.score).toBeUndefined();
    expect(out.map((d) => d.payload?.original_score)).toEqual([0.7, 0.9, 0.6, 0.8]);
    // One batch of three passages: one inference call.
    expect(ctx.budget.inferenceCalls).toBe(1);

    const dropped = await run(world.context(null, 1), structuredClone(docs), { query, missing_text: 'drop', original_score_field: null, top_k: 2 });
    expect(dropped.map((d) => d.document_id)).toEqual(['c', 'a']);
    expect(dropped[0]!.payload?.original_score).toBeUndefined();
  });

  it('scores only max_candidates documents, one inference call per batch, and makes none past max_inference_calls', async () => {
    const docs = Array.from({ length: 7 }, (_, i) => doc(`d${i}`, { text: i === 5 ? 'the red fox' : `plain text ${i}` }, 1 - i / 10));
    const ctx = world.context(null, 1);
    const out = await run(ctx, structuredClone(docs), { query: 'red fox', batch_size: 2, max_candidates: 6 });
    expect(ctx.budget.inferenceCalls).toBe(3);
    expect(out.map((d) => d.document_id)).toEqual(['d5', 'd0', 'd1', 'd2', 'd3', 'd4', 'd6']);
    expect(out[6]!.score).toBeUndefined();

    const limited = world.context(null, 1);
    limited.budget.maxInferenceCalls = 2;
    await expect(run(limited, structuredClone(docs), { query: 'red fox', batch_size: 2, max_candidates: 6 })).rejects.toBeInstanceOf(BudgetExceededError);
    expect(limited.budget.inferenceCalls).toBe(0);
  });
});

describe('rerank through a retriever', () => {
  let t: TestKernel;
  const keys: Record<string, string> = {};
  const TEXTS = [
    { text: 'Solar panels lose efficiency in the heat. Their output drops on hot afternoons.', owner: 'alice' },
    { text: 'Panel discussions about solar policy rarely mention efficiency.', owner: 'bob' },
    { text: 'The solar panel efficiency record was broken this year.', owner: 'alice' },
    { text: 'Bread needs flour, water, salt and time.', owner: 'bob' },
  ];

  const stage = (stage_id: string, parameters: Record<string, unknown>) => ({ stage_name: stage_id, config: { stage_id, parameters } });
  const search = stage('feature_search', { searches: [{ feature_uri: TEXT_FEATURE, query: { text: '{{inputs.query}}' }, top_k: 20 }] });
  const execute = async (stages: unknown[], options: { key?: string; budget?: Record<string, number>; query?: string } = {}) => {
    const res = await t.request('POST', '/v1/retrievers/execute', {
      key: options.key ?? t.adminKey,
      headers: { 'X-Namespace': 'reranking' },
      body: {
        collection_identifiers: ['chunks'],
        input_schema: { query: { type: 'string', required: true } },
        inputs: { query: options.query ?? 'solar panel efficiency' },
        stages,
        ...(options.budget ? { budget_limits: options.budget } : {}),
        pagination: { limit: 100 },
      },
    });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    return res.body;
  };

  beforeAll(async () => {
    t = await startTestKernel({ inferencePlugins: [TEXT_MODEL_PLUGIN, RERANKER_PLUGIN], config: { inferenceWorkers: 1, runTasks: false } });
    expect((await t.client().POST('/v1/namespaces', { body: { namespace_name: 'reranking' } })).response.status).toBe(201);
    await ingestTexts(t, { namespace: 'reranking', bucket: 'docs', collection: 'chunks' }, TEXTS);
    for (const principal of ['alice', 'bob']) {
      keys[principal] = (await t.request('POST', `/v1/organizations/users/${t.adminEmail}/api-keys`, {
        key: t.adminKey, body: { name: principal, principal_id: principal, permissions: ['read'] },
      })).body.key;
    }
  }, 180_000);
  afterAll(async () => {
    await t?.stop();
  });

  it('is listed with its parameter schema', async () => {
    const res = await t.request('GET', '/v1/retrievers/stages', { key: t.adminKey });
    const found = (res.body.results as Array<{ stage_id: string; parameters: { required?: string[] } }>).find((s) => s.stage_id === 'rerank');
    expect(found?.parameters.required).toEqual(['query']);
  });

  it('reorders feature_search results by the reranker, the exact phrase first', async () => {
    const body = await execute([search, stage('rerank', { query: '{{inputs.query}}', text_fields: ['text'], top_k: 3 })]);
    expect(body.status, JSON.stringify(body)).toBe('completed');
    const docs = body.documents as Array<{ score: number; payload: { fields: { text: string }; original_score: number } }>;
    expect(docs).toHaveLength(3);
    expect(docs[0]!.payload.fields.text).toBe('The solar panel efficiency record was broken this year.');
    // The order is the model's, and the scores are its scores.
    const scores = docs.map((d) => d.score);
    expect(scores).toEqual([...scores].sort((a, b) => b - a));
    for (const d of docs) expect(d.score).toBeCloseTo(lexicalScore('solar panel efficiency', d.payload.fields.text), 5);
    for (const d of docs) expect(typeof d.payload.original_score).toBe('number');
    // One call to embed the query, one to rerank.
    expect(body.stage_statistics.stages.rerank.inference_calls).toBe(1);
    expect(body.budget.inference_calls).toBe(2);
  });

  it('stops before the rerank when max_inference_calls would be passed, returning what was found', async () => {
    const stages = [search, stage('rerank', { query: '{{inputs.query}}', batch_size: 2 }), stage('limit', { limit: 1 })];
    const found = await execute([search]);
    const stopped = await execute(stages, { budget: { max_inference_calls: 3 } });
    expect(stopped.status).toBe('budget_exceeded');
    expect(stopped.budget.exceeded).toMatchObject({ limit: 'max_inference_calls', value: 3, used: 1, stopped_before: 'rerank' });
    expect(stopped.budget.inference_calls).toBe(1);
    expect(stopped.stage_statistics.stages.rerank.status).toBe('skipped');
    expect(stopped.stage_statistics.stages.limit.status).toBe('skipped');
    expect(stopped.documents.map((d: { document_id: string }) => d.document_id)).toEqual(found.documents.map((d: { document_id: string }) => d.document_id));
    // Five chunks in batches of 2: three calls, plus the query's embedding.
    expect(found.documents).toHaveLength(5);
    const enough = await execute(stages, { budget: { max_inference_calls: 4 } });
    expect(enough.status).toBe('completed');
    expect(enough.budget.inference_calls).toBe(4);
    expect(enough.documents).toHaveLength(1);
  });

  it('stops before the query embedding when max_inference_calls allows no call at all', async () => {
    const stopped = await execute([search], { budget: { max_inference_calls: 0 } });
    expect(stopped.status).toBe('budget_exceeded');
    expect(stopped.budget.exceeded).toMatchObject({ limit: 'max_inference_calls', value: 0, used: 0, stopped_before: 'feature_search' });
    expect(stopped.budget.inference_calls).toBe(0);
    expect(stopped.documents).toEqual([]);
  });

  it('fails readably with a model that is missing or does not rerank', async () => {
    const missing = await execute([search, stage('rerank', { query: 'x', model: 'no-such-model' })]);
    expect(missing.status).toBe('failed');
    expect(missing.error).toMatch(/rerank.*no model named 'no-such-model'/);
    const wrongTask = await execute([search, stage('rerank', { query: 'x', model: 'hashed-ngram-text' })]);
    expect(wrongTask.status).toBe('failed');
    expect(wrongTask.error).toMatch(/does embed_text, not rerank/);
  });

  it("never gives a user-scoped key another principal's document", async () => {
    const all = await execute([search, stage('rerank', { query: '{{inputs.query}}' })]);
    const owners = new Set((all.documents as Array<{ payload: { owner_principal: string } }>).map((d) => d.payload.owner_principal));
    expect(owners).toEqual(new Set(['alice', 'bob']));
    for (const principal of ['alice', 'bob']) {
      const mine = await execute([search, stage('rerank', { query: '{{inputs.query}}', top_k: 100 })], { key: keys[principal] });
      expect(mine.status).toBe('completed');
      expect(mine.documents.length).toBeGreaterThan(0);
      for (const d of mine.documents as Array<{ payload: { owner_principal: string } }>) expect(d.payload.owner_principal).toBe(principal);
    }
  });
});
