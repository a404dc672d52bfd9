/**
 * text_search end to end: texts in a bucket → a text_extractor collection → a batch → the chunks are
 * found by BM25 through the kernel's TextIndex and by the stage; deleting documents or the collection
 * takes them out of the index. The stage runs with a StageContext built on the test kernel's container,
 * as the retriever engine builds it; it also passes the stage contract suite.
 */
import { Ajv } from 'ajv';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { StageContext, StageDocument } from '../../../kernel/plugins.js';
import { DatabaseHandle, RootLogger, TextIndex } from '../../../kernel/tokens.js';
import { DocumentCache } from '../../../plugins/resources/collections/index.js';
import textSearch, { type TextSearchParameters } from '../../../plugins/stages/text_search/index.js';
import { startTestKernel, type TestKernel, organizationMe } from '../../support/kernel.js';
import { runStageContract } from '../../support/stage-contract.js';
import { ingestTexts, TEXT_MODEL_PLUGIN } from '../../support/text-corpus.js';

// The contract world's documents read "document <n>": every one matches `document`.
runStageContract(textSearch, {
  valid: [{ query: 'document' }, { query: '"document 1" docu*', fields: ['text'], field_weights: { text: 2 }, k1: 1.5, b: 0.5, top_k: 5, min_score: 0 }],
  invalid: [{}, { query: '' }, { query: 'x', top_k: 0 }, { query: 'x', top_k: 1001 }, { query: 'x', k1: -1 }, { query: 'x', b: 2 }, { query: 'x', within_input: true }],
});

const TEXTS = [
  'Lighthouses guide ships along rocky coasts. Their lamps turn all night.',
  'Bread needs flour, water, salt and time. The crust forms in a hot oven.',
  'Glaciers carve valleys over thousands of years. Meltwater feeds the rivers below.',
  'A lighthouse keeper trims the lamp wick. Ships pass the rocky point safely.',
];

let t: TestKernel;
let chunks: { collection_id: string; collection_name: string; namespace_id: string };
let organizationId: string;

const api = (method: string, p: string, body?: unknown) =>
  t.request(method, p, { key: t.adminKey, headers: { 'X-Namespace': 'texts' }, ...(body !== undefined ? { body } : {}) });

function context(principalId: string | null = null, collections = [chunks], stageIndex = 0): StageContext {
  return {
    organizationId,
    namespace: { id: chunks.namespace_id, name: 'texts' },
    collections: collections.map((c) => ({ collection_id: c.collection_id, collection_name: c.collection_name, namespace_id: c.namespace_id })),
    inputs: {},
    stageIndex,
    budget: { maxCredits: null, maxTimeMs: null, creditsUsed: 0, deadline: null, maxInferenceCalls: null, inferenceCalls: 0 },
    principalId,
    log: t.kernel.services.get(RootLogger),
    container: t.kernel.container,
  };
}

/** Parameters as the engine passes them: validated against the stage's schema with defaults filled in. */
function parameters(input: Record<string, unknown>): TextSearchParameters {
  const validate = new Ajv({ useDefaults: true, strict: false }).compile(textSearch.parameters as object);
  const params = structuredClone(input);
  if (!validate(params)) throw new Error(JSON.stringify(validate.errors));
  return params as unknown as TextSearchParameters;
}

async function chunkText(documentId: string): Promise<string> {
  const res = await api('GET', `/v1/collections/chunks/documents/${documentId}`);
  expect(res.status).toBe(200);
  return res.body.fields.text;
}

beforeAll(async () => {
  t = await startTestKernel({
    inferencePlugins: [TEXT_MODEL_PLUGIN],
    config: { inferenceWorkers: 1, runTasks: false },
  });
  organizationId = organizationMe((await t.client().GET('/v1/me', {})).data).organization.organization_id;
  expect((await t.client().POST('/v1/namespaces', { body: { namespace_name: 'texts' } })).response.status).toBe(201);
  chunks = (await ingestTexts(t, { namespace: 'texts', bucket: 'docs', collection: 'chunks' }, TEXTS)).collection;
}, 180_000);

afterAll(async () => {
  await t?.stop();
});

describe('text_search stage', () => {
  it('declares its parameters with the documented defaults and bounds', () => {
    expect(parameters({ query: 'ships' })).toEqual({ query: 'ships', k1: 1.2, b: 0.75, top_k: 10 });
    expect(() => parameters({})).toThrow(/query/);
    expect(() => parameters({ query: 'x', top_k: 1001 })).toThrow(/top_k|maximum/);
    expect(() => parameters({ query: 'x', b: 1.5 })).toThrow();
    expect(() => parameters({ query: 'x', surprise: true })).toThrow();
  });

  it('finds the chunks the batch wrote, best first, through the kernel index and the stage', async () => {
    const index = t.kernel.services.get(TextIndex);
    const stats = await index.statistics(chunks.collection_id);
    expect(stats.find((s) => s.field === 'text')?.document_count).toBe(8);

    const hits = await index.search({ collectionIds: [chunks.collection_id], query: 'rocky ships safely', limit: 10 });
    const texts = await Promise.all(hits.map((h) => chunkText(h.document_id)));
    expect(texts).toEqual(['Ships pass the rocky point safely.', 'Lighthouses guide ships along rocky coasts.']);

    const docs = await textSearch.run(context(), [], parameters({ query: 'rocky ships safely' }));
    expect(docs.map((d) => ({ document_id: d.document_id, collection_id: d.collection_id, score: d.score }))).toEqual(
      hits.map((h) => ({ document_id: h.document_id, collection_id: chunks.collection_id, score: h.score })),
    );
    // Hydrated through the document source: the payload is the document as a read returns it.
    expect(docs[0]!.payload).toMatchObject({ document_id: docs[0]!.document_id, fields: { text: 'Ships pass the rocky point safely.' } });

    const phrase = await textSearch.run(context(), [], parameters({ query: '"hot oven"' }));
    expect(await Promise.all(phrase.map((d) => chunkText(d.document_id)))).toEqual(['The crust forms in a hot oven.']);
    const prefix = await textSearch.run(context(), [], parameters({ query: 'lighthouse*', top_k: 5 }));
    expect(prefix).toHaveLength(2);
    const capped = await textSearch.run(context(), [], parameters({ query: 'the', top_k: 2 }));
    expect(capped).toHaveLength(2);
    expect(capped[0]!.score!).toBeGreaterThanOrEqual(capped[1]!.score!);
    const high = await textSearch.run(context(), [], parameters({ query: 'rocky ships safely', min_score: docs[0]!.score! }));
    expect(high.map((d) => d.document_id)).toEqual([docs[0]!.document_id]);
  });

  it('as a later stage scores only the incoming documents', async () => {
    const all = await textSearch.run(context(), [], parameters({ query: 'ships' }));
    expect(all).toHaveLength(2);
    const input: StageDocument[] = [{ document_id: all[1]!.document_id, collection_id: chunks.collection_id }];
    expect((await textSearch.run(context(null, [chunks], 1), input, parameters({ query: 'ships' }))).map((d) => d.document_id)).toEqual([all[1]!.document_id]);
    expect(await textSearch.run(context(null, [chunks], 1), [], parameters({ query: 'ships' }))).toEqual([]);
  });

  it("returns only the caller's principal's documents", async () => {
    const db = t.kernel.services.get(DatabaseHandle).db;
    const all = await textSearch.run(context(), [], parameters({ query: 'ships', top_k: 1 }));
    // Owners changed straight in the database (no API changes an owner): the documents kept in memory are forgotten.
    const forget = () => t.kernel.services.get(DocumentCache).forgetAll();
    await db('documents').where({ collection_id: chunks.collection_id }).update({ owner_principal: 'usr_other' });
    forget();
    const ships = await textSearch.run(context(), [], parameters({ query: 'ships' }));
    await db('documents').where({ document_id: ships[1]!.document_id }).update({ owner_principal: 'usr_me' });
    forget();
    // The best match belongs to someone else: top_k 1 still gives the caller its own match.
    const mine = await textSearch.run(context('usr_me'), [], parameters({ query: 'ships', top_k: 1 }));
    expect(mine.map((d) => d.document_id)).toEqual([ships[1]!.document_id]);
    expect(all[0]!.document_id).toBe(ships[0]!.document_id);
    expect(await textSearch.run(context('usr_nobody'), [], parameters({ query: 'ships' }))).toEqual([]);
    await db('documents').where({ collection_id: chunks.collection_id }).update({ owner_principal: null });
    forget();
  });

  it('drops deleted documents and a deleted collection from the index', async () => {
    const index = t.kernel.services.get(TextIndex);
    const [glacier] = await index.search({ collectionIds: [chunks.collection_id], query: 'glaciers', limit: 10 });
    expect(glacier).toBeDefined();
    expect((await api('DELETE', `/v1/collections/chunks/documents/${glacier!.document_id}`)).status).toBe(200);
    expect(await index.search({ collectionIds: [chunks.collection_id], query: 'glaciers', limit: 10 })).toEqual([]);
    expect(await index.documentFrequency(chunks.collection_id, 'text', 'glaciers')).toBe(0);

    const deleted = await api('POST', '/v1/collections/chunks/documents/delete', { filters: { AND: [{ field: 'text', operator: 'contains', value: 'Bread' }] } });
    expect(deleted.status).toBe(200);
    expect(deleted.body.deleted).toBe(1);
    expect(await index.search({ collectionIds: [chunks.collection_id], query: 'bread', limit: 10 })).toEqual([]);
    expect((await index.statistics(chunks.collection_id)).find((s) => s.field === 'text')?.document_count).toBe(6);

    expect((await api('DELETE', '/v1/collections/chunks')).status).toBe(200);
    expect(await index.statistics(chunks.collection_id)).toEqual([]);
    expect(await textSearch.run(context(), [], parameters({ query: 'ships' }))).toEqual([]);
    const db = t.kernel.services.get(DatabaseHandle).db;
    expect(Number(((await db('text_documents').where({ collection_id: chunks.collection_id }).count('* as n').first()) as { n: unknown }).n)).toBe(0);
  });
});
