/**
 * Hybrid search through HTTP: a feature_search with a vector search and a lexical (BM25) search fused by
 * rrf, over texts embedded by the hashed n-gram model (similar spellings, not meaning). The corpus is
 * chosen so the two disagree: "Lighthouses keepers." shares the query's character n-grams but not its
 * words, while a long zoo note holds the exact word "keeper" among many others. Each search alone misses
 * one of them; the hybrid finds both.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestKernel, type TestKernel } from '../../../support/kernel.js';
import { ingestTexts, TEXT_MODEL_PLUGIN } from '../../../support/text-corpus.js';

const NS = 'hybrid';
const FEATURE = 'tessera://text_extractor@1.0/text_embedding';
const QUERY = 'lighthouse keeper';
const SPELLED_ALIKE = 'Lighthouses keepers.';
const EXACT_WORD = 'Every spring the zoo counts penguins, otters, seals, walruses and pelicans; one keeper feeds them all before the storm season begins.';

type Doc = { document_id: string; score: number; payload: { fields: { text: string }; owner_principal: string | null } };

describe('hybrid search (vector + BM25 in feature_search)', () => {
  let t: TestKernel;
  let bobKey: string;
  const api = (method: string, p: string, body?: unknown, key = t.adminKey) =>
    t.request(method, p, { key, headers: { 'X-Namespace': NS }, ...(body !== undefined ? { body } : {}) });
  const texts = (docs: Doc[]) => docs.map((d) => d.payload.fields.text);
  const run = (searches: unknown[], extra: Record<string, unknown> = {}, key = t.adminKey) =>
    api('POST', '/v1/retrievers/execute', {
      collection_identifiers: ['passages'], input_schema: {}, inputs: {},
      stages: [{ stage_name: 'search', config: { stage_id: 'feature_search', parameters: { searches, ...extra } } }],
    }, key);
  const vector = { feature_uri: FEATURE, query: { text: QUERY }, top_k: 3 };
  const lexical = { text_search: { query: QUERY }, top_k: 3 };

  beforeAll(async () => {
    t = await startTestKernel({
      inferencePlugins: [TEXT_MODEL_PLUGIN],
      config: { inferenceWorkers: 1, runTasks: false },
    });
    await t.client().POST('/v1/namespaces', { body: { namespace_name: NS } });
    const corpus: Array<[string, string | null]> = [
      [SPELLED_ALIKE, 'bob'],
      [EXACT_WORD, 'alice'],
      ['Lighthousekeeping.', null],
      ['Lighthouses and keepsakes.', null],
      ['Lighthouses keep on.', 'bob'],
      ['Bread needs flour, water, salt and time.', null],
    ];
    await ingestTexts(t, { namespace: NS, bucket: 'notes', collection: 'passages' }, corpus.map(([text, owner]) => ({ text, owner })));
    bobKey = (await t.request('POST', `/v1/organizations/users/${t.adminEmail}/api-keys`, {
      key: t.adminKey, body: { name: 'bob', principal_id: 'bob', permissions: ['read'] },
    })).body.key;
  }, 180_000);
  afterAll(async () => {
    await t?.stop();
  });

  it('vector-only and lexical-only each miss a document the rrf hybrid finds', async () => {
    const vectorOnly = await run([vector]);
    expect(vectorOnly.body.status).toBe('completed');
    expect(texts(vectorOnly.body.documents)).toContain(SPELLED_ALIKE);
    expect(texts(vectorOnly.body.documents)).not.toContain(EXACT_WORD);

    const lexicalOnly = await run([lexical]);
    expect(lexicalOnly.body.status).toBe('completed');
    // No stemming: only the zoo note holds the word "keeper"; "Lighthouses keepers." shares no term.
    expect(texts(lexicalOnly.body.documents)).toEqual([EXACT_WORD]);

    const hybrid = await run([vector, lexical], { fusion: 'rrf', final_top_k: 2 });
    expect(hybrid.body.status).toBe('completed');
    expect(texts(hybrid.body.documents).sort()).toEqual([EXACT_WORD, SPELLED_ALIKE].sort());
    expect(hybrid.body.stage_statistics.stages.search).toMatchObject({ inference_calls: 1, output_count: 2 });
  });

  it('fuses with every method, and a user-scoped key only gets its own documents from both searches', async () => {
    for (const fusion of ['rrf', 'dbsf', 'weighted', 'max']) {
      const fused = await run([vector, lexical], { fusion, final_top_k: 4 });
      expect(fused.body.status, fusion).toBe('completed');
      expect(texts(fused.body.documents), fusion).toContain(EXACT_WORD);
    }
    const asBob = await run([vector, { ...lexical, text_search: { query: 'keeper keep lighthouses' } }], { final_top_k: 10 }, bobKey);
    expect(asBob.body.status).toBe('completed');
    expect((asBob.body.documents as Doc[]).every((d) => d.payload.owner_principal === 'bob')).toBe(true);
    expect(texts(asBob.body.documents).sort()).toEqual([SPELLED_ALIKE, 'Lighthouses keep on.'].sort());
  });

  it('applies pre_filters to the lexical search inside the text index', async () => {
    const filtered = await run([lexical], { pre_filters: { AND: [{ field: 'text', operator: 'contains', value: 'bread' }] } });
    expect(filtered.body.status).toBe('completed');
    expect(filtered.body.documents).toEqual([]);
  });

  it('refuses a search that is both vector and lexical, or a vector search without its query', async () => {
    const both = await run([{ ...vector, ...lexical }]);
    expect(both.status).toBe(422);
    const noQuery = await run([{ feature_uri: FEATURE }]);
    expect(noQuery.status).toBe(422);
  });

  it('a saved hybrid retriever fills the same input into both searches and depends only on the vector feature', async () => {
    const created = await api('POST', '/v1/retrievers', {
      retriever_name: 'hybrid-notes',
      collection_identifiers: ['passages'],
      input_schema: { q: { type: 'text', required: true } },
      stages: [{ stage_name: 'search', stage_type: 'filter', config: { stage_id: 'feature_search', parameters: {
        fusion: 'rrf', final_top_k: 2,
        searches: [{ ...vector, query: { text: '{{inputs.q}}' } }, { ...lexical, text_search: { query: '{{inputs.q}}' } }],
      } } }],
    });
    expect(created.status).toBe(201);
    expect(created.body.retriever.feature_dependencies).toEqual([{ extractor: 'text_extractor', version: '1.0', scheme: 'tessera', output: 'text_embedding' }]);
    const run = await api('POST', '/v1/retrievers/hybrid-notes/execute', { inputs: { q: QUERY } });
    expect(run.body.status).toBe('completed');
    expect(texts(run.body.documents).sort()).toEqual([EXACT_WORD, SPELLED_ALIKE].sort());
  });
});
