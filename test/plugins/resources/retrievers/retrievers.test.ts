import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DatabaseHandle } from '../../../../kernel/tokens.js';
import { Documents } from '../../../../plugins/resources/collections/index.js';
import { startTestKernel, type TestKernel, organizationMe } from '../../../support/kernel.js';

const NS = 'shop';

describe('retrievers: resource, execution engine and history', () => {
  let t: TestKernel;
  let collection: { collection_id: string; namespace_id: string };
  let aliceKey: string;

  const api = (method: string, path: string, body?: unknown, key = t.adminKey) =>
    t.request(method, path, { key, headers: { 'X-Namespace': NS }, ...(body !== undefined ? { body } : {}) });

  const filterStage = (filters: unknown, name = 'filter') => ({ stage_name: name, stage_type: 'filter', config: { stage_id: 'attribute_filter', parameters: { filters } } });
  const sortStage = (field: string, direction = 'asc') => ({ stage_name: 'sort', config: { stage_id: 'sort_attribute', parameters: { field, direction } } });

  const definition = (name: string, extra: Record<string, unknown> = {}) => ({
    retriever_name: name,
    collection_identifiers: ['products'],
    input_schema: { category: { type: 'string', required: true }, max_price: { type: 'number' } },
    stages: [
      filterStage({ AND: [{ field: 'category', operator: 'eq', value: '{{inputs.category}}' }, { field: 'price', operator: 'lte', value: '{{inputs.max_price}}' }] }),
      sortStage('price'),
    ],
    ...extra,
  });

  beforeAll(async () => {
    t = await startTestKernel({ config: { runTasks: false } });
    const organizationId = organizationMe((await t.client().GET('/v1/me', {})).data).organization.organization_id;
    await t.client().POST('/v1/namespaces', { body: { namespace_name: NS } });
    await api('POST', '/v1/buckets', { bucket_name: 'src' });
    collection = (await api('POST', '/v1/collections/create', { collection_name: 'products', source: { type: 'bucket', bucket_id: 'src' } })).body;
    const items = [
      ['lamp-a', 'lamps', 30], ['lamp-b', 'lamps', 10], ['lamp-c', 'lamps', 20], ['chair-a', 'chairs', 50], ['lamp-d', 'Lamps', 40], ['lamp-e', 'lamps', 5],
    ] as const;
    for (const [i, [title, category, price]] of items.entries()) {
      await t.kernel.services.get(Documents).upsert({
        organizationId, namespaceId: collection.namespace_id, collectionId: collection.collection_id, sourceKey: `k${i}`,
        rootObjectId: `obj_${i}`, sourceCollectionId: null, sourceDocumentId: null, processingTier: 0,
        fields: { title, category, price }, ...(title === 'lamp-e' ? { ownerPrincipal: 'alice' } : {}),
      });
    }
    aliceKey = (await t.request('POST', `/v1/organizations/users/${t.adminEmail}/api-keys`, {
      key: t.adminKey, body: { name: 'alice', principal_id: 'alice', permissions: ['read'] },
    })).body.key;
  }, 120_000);
  afterAll(async () => {
    await t?.stop();
  });

  it('creates with recorded stage versions, gets by id and by name, lists with name and tag filters', async () => {
    const created = await api('POST', '/v1/retrievers', definition('cheap-lamps', { tags: ['shop', 'lamps'], cache_config: { enabled: true, ttl_seconds: 60 }, cache_stage_names: ['filter'] }));
    expect(created.status).toBe(201);
    const r = created.body.retriever;
    expect(r).toMatchObject({
      retriever_id: expect.stringMatching(/^ret_/), version: 1, collection_ids: [collection.collection_id], tags: ['shop', 'lamps'],
      cache_config: { enabled: true, ttl_seconds: 60 }, cache_stage_names: ['filter'], feature_dependencies: [],
      stage_versions: [{ stage_name: 'filter', stage_id: 'attribute_filter', version: '1.0' }, { stage_name: 'sort', stage_id: 'sort_attribute', version: '1.0' }],
    });
    expect((await api('GET', `/v1/retrievers/${r.retriever_id}`)).body.retriever.retriever_name).toBe('cheap-lamps');
    expect((await api('GET', '/v1/retrievers/CHEAP-LAMPS')).body.retriever.retriever_id).toBe(r.retriever_id);
    expect((await api('POST', '/v1/retrievers', definition('cheap-lamps'))).status).toBe(409);
    await api('POST', '/v1/retrievers', definition('other', { tags: ['shop'] }));
    const tagged = await api('GET', '/v1/retrievers?tags=lamps,shop');
    expect(tagged.status, tagged.text).toBe(200);
    expect(tagged.body.results.map((x: { retriever_name: string }) => x.retriever_name)).toEqual(['cheap-lamps']);
    expect((await api('GET', '/v1/retrievers?search=OTH')).body.results.map((x: { retriever_name: string }) => x.retriever_name)).toEqual(['other']);
    const page = (await api('GET', '/v1/retrievers?limit=1&offset=1')).body;
    expect(page).toMatchObject({ total: 2, limit: 1, offset: 1, has_next: false });
  });

  it('refuses unknown stages, bad parameters, undeclared placeholders and unknown collections', async () => {
    const unknownStage = await api('POST', '/v1/retrievers', definition('x', { stages: [{ stage_name: 's', config: { stage_id: 'nope', parameters: {} } }] }));
    expect(unknownStage.status).toBe(422);
    expect(unknownStage.body.detail[0].loc).toEqual(['body', 'stages', 0, 'config', 'stage_id']);
    const badParams = await api('POST', '/v1/retrievers', definition('x', { stages: [{ stage_name: 's', config: { stage_id: 'limit', parameters: { limit: 0 } } }] }));
    expect(badParams.status).toBe(422);
    expect(badParams.body.detail[0].loc).toEqual(['body', 'stages', 0, 'config', 'parameters', 'limit']);
    const undeclared = await api('POST', '/v1/retrievers', definition('x', { stages: [{ stage_name: 's', config: { stage_id: 'limit', parameters: { limit: '{{inputs.n}}' } } }] }));
    expect(undeclared.status).toBe(422);
    expect(undeclared.body.detail[0].msg).toContain("input 'n'");
    expect((await api('POST', '/v1/retrievers', definition('x', { collection_identifiers: ['missing'] }))).status).toBe(404);
  });

  it('PATCH changes only name, description, tags and display config, bumping the version; an empty body is a 400', async () => {
    const empty = await api('PATCH', '/v1/retrievers/cheap-lamps', {});
    expect(empty.status).toBe(400);
    expect(empty.body).toMatchObject({ success: false, status: 400, error: { type: 'InputError' } });
    expect((await api('PATCH', '/v1/retrievers/cheap-lamps', { stages: [] })).status).toBe(422);
    expect((await api('PATCH', '/v1/retrievers/cheap-lamps', { budget_limits: { max_credits: 1 } })).status).toBe(422);
    const patched = await api('PATCH', '/v1/retrievers/cheap-lamps', { description: 'Lamps by price', tags: ['x'], display_config: { title: 'Lamps' } });
    expect(patched.body.retriever).toMatchObject({ version: 2, description: 'Lamps by price', tags: ['x'], display_config: { title: 'Lamps' } });
    const renamed = await api('PATCH', '/v1/retrievers/cheap-lamps', { retriever_name: 'lamps' });
    expect(renamed.body.retriever).toMatchObject({ version: 3, retriever_name: 'lamps' });
    expect((await api('PATCH', '/v1/retrievers/lamps', { retriever_name: 'other' })).status).toBe(409);
  });

  it('clones to change the logic: new id, version 1, replaced stages and budget', async () => {
    const clone = await api('POST', '/v1/retrievers/lamps/clone', { stages: [filterStage({ AND: [{ field: 'category', operator: 'eq', value: 'chairs' }] })], budget_limits: { max_credits: 5 } });
    expect(clone.status).toBe(201);
    expect(clone.body.retriever).toMatchObject({ retriever_name: 'lamps-copy', version: 1, budget_limits: { max_credits: 5 }, cache_stage_names: ['filter'] });
    expect(clone.body.retriever.retriever_id).not.toBe((await api('GET', '/v1/retrievers/lamps')).body.retriever.retriever_id);
    expect((await api('POST', '/v1/retrievers/lamps/clone')).body.retriever.retriever_name).toBe('lamps-copy-2');
    const run = await api('POST', '/v1/retrievers/lamps-copy/execute', { inputs: { category: 'x' } });
    expect(run.body.documents.map((d: { payload: { fields: { title: string } } }) => d.payload.fields.title)).toEqual(['chair-a']);
    expect((await api('DELETE', '/v1/retrievers/lamps-copy-2')).body).toMatchObject({ deleted: true });
    expect((await api('GET', '/v1/retrievers/lamps-copy-2')).status).toBe(404);
  });

  it('executes a saved retriever with typed placeholders, records the execution and pages the results', async () => {
    const run = await api('POST', '/v1/retrievers/lamps/execute', { inputs: { category: 'LAMPS', max_price: 30 }, pagination: { method: 'offset', limit: 2, offset: 1 } });
    expect(run.status).toBe(200);
    // max_price stayed a number: `lte 30` compares numbers (a string '30' would match nothing).
    expect(run.body).toMatchObject({
      status: 'completed', error: null, optimization_applied: false,
      pagination: { total: 4, limit: 2, offset: 1, has_next: true, has_previous: true },
      execution_metadata: { retriever_persisted: true, retriever_version: 3 },
    });
    expect(run.body.documents.map((d: { payload: { fields: { title: string } } }) => d.payload.fields.title)).toEqual(['lamp-b', 'lamp-c']);
    expect(run.body.stage_statistics.stages.filter).toMatchObject({ stage_id: 'attribute_filter', status: 'completed', input_count: 0, output_count: 4, cache_hit: false });
    expect(run.body.stage_statistics.stages.sort).toMatchObject({ input_count: 4, output_count: 4 });
    const pageTwo = await api('POST', '/v1/retrievers/lamps/execute', { inputs: { category: 'lamps', max_price: 30 }, pagination: { method: 'page_number', page_number: 2, page_size: 3 } });
    expect(pageTwo.body.pagination).toMatchObject({ total: 4, limit: 3, offset: 3, page_number: 2, total_pages: 2, has_next: false, has_previous: true });
    expect(pageTwo.body.documents).toHaveLength(1);

    const history = await api('GET', '/v1/retrievers/lamps/executions');
    expect(history.body.total).toBe(2);
    const first = history.body.results[1];
    expect(first).toMatchObject({ execution_id: run.body.execution_id, inputs: { category: 'LAMPS', max_price: 30 }, status: 'completed', total_results: 4 });
    expect(first.result_document_ids).toHaveLength(4);
    const one = await api('GET', `/v1/retrievers/lamps/executions/${run.body.execution_id}`);
    expect(one.body.stage_statistics.stages.filter.output_count).toBe(4);
    expect((await api('GET', '/v1/retrievers/lamps/executions/exec_missing')).status).toBe(404);
  });

  it('answers 422 naming the input when inputs break the input schema', async () => {
    const missing = await api('POST', '/v1/retrievers/lamps/execute', { inputs: {} });
    expect(missing.status).toBe(422);
    expect(missing.body.detail[0]).toMatchObject({ loc: ['body', 'inputs', 'category'] });
    const wrongType = await api('POST', '/v1/retrievers/lamps/execute', { inputs: { category: 'lamps', max_price: 'cheap' } });
    expect(wrongType.status).toBe(422);
    expect(wrongType.body.detail[0].loc).toEqual(['body', 'inputs', 'max_price']);
    // An optional input left out drops the condition built on it (it does not match against nothing).
    const noMax = await api('POST', '/v1/retrievers/lamps/execute', { inputs: { category: 'lamps' }, pagination: { limit: 100 } });
    expect(noMax.body.pagination.total).toBe(5);
  });

  it('fills placeholders by type: a list stays a list, embedded text is stringified', async () => {
    const run = await api('POST', '/v1/retrievers/execute', {
      collection_identifiers: ['products'],
      input_schema: { titles: { type: 'array', required: true }, prefix: { type: 'string' }, n: { type: 'integer' } },
      inputs: { titles: ['lamp-a', 'chair-a', 'lamp-d'], prefix: 'lamp', n: 1 },
      stages: [
        filterStage({ AND: [{ field: 'title', operator: 'in', value: '{{inputs.titles}}' }, { field: 'title', operator: 'starts_with', value: '{{inputs.prefix}}-' }] }),
        sortStage('price', 'desc'),
        { stage_name: 'cut', config: { stage_id: 'limit', parameters: { limit: '{{inputs.n}}' } } },
      ],
    });
    expect(run.status).toBe(200);
    expect(run.body.documents.map((d: { payload: { fields: { title: string } } }) => d.payload.fields.title)).toEqual(['lamp-d']);
  });

  it('runs ad hoc without leaving a row behind', async () => {
    const db = t.kernel.services.get(DatabaseHandle).db;
    const before = Number((await db('retriever_executions').count({ n: '*' }))[0]!.n);
    const retrievers = Number((await db('retrievers').count({ n: '*' }))[0]!.n);
    const run = await api('POST', '/v1/retrievers/execute', {
      collection_identifiers: ['products'], input_schema: {}, inputs: {}, stages: [filterStage({ AND: [{ field: 'category', operator: 'eq', value: 'chairs' }] })],
    });
    expect(run.status).toBe(200);
    expect(run.headers.get('x-execution-mode')).toBe('anonymous');
    expect(run.body.execution_metadata).toMatchObject({ retriever_persisted: false, retriever_id: null });
    expect(run.body.execution_id).toMatch(/^exec_/);
    expect(Number((await db('retriever_executions').count({ n: '*' }))[0]!.n)).toBe(before);
    expect(Number((await db('retrievers').count({ n: '*' }))[0]!.n)).toBe(retrievers);
  });

  it('reports a failing stage as status failed with a readable error naming it', async () => {
    const run = await api('POST', '/v1/retrievers/execute', {
      collection_identifiers: ['products'], input_schema: {}, inputs: {},
      stages: [
        filterStage({ AND: [{ field: 'category', operator: 'eq', value: 'lamps' }] }),
        { stage_name: 'search', config: { stage_id: 'feature_search', parameters: { searches: [{ feature_uri: 'tessera://text_extractor@1.0/text_embedding', query: { text: 'lamp' } }] } } },
        sortStage('price'),
      ],
    });
    expect(run.status).toBe(200);
    expect(run.body.status).toBe('failed');
    expect(run.body.error).toMatch(/^Stage 'search' \(feature_search\) failed: .*text_extractor/);
    expect(run.body.documents).toEqual([]);
    expect(run.body.stage_statistics.stages.search).toMatchObject({ status: 'failed', error: expect.stringContaining('indexes') });
    expect(run.body.stage_statistics.stages.sort.status).toBe('skipped');
  });

  it('stops at a budget limit between stages, naming it and returning what was found so far', async () => {
    const run = await api('POST', '/v1/retrievers/execute', {
      collection_identifiers: ['products'], input_schema: {}, inputs: {}, budget_limits: { max_credits: 0 },
      // As written: the optimizer would fold the filter into the search, leaving nothing found before it.
      optimize: false,
      stages: [
        filterStage({ AND: [{ field: 'category', operator: 'eq', value: 'chairs' }] }),
        { stage_name: 'search', config: { stage_id: 'feature_search', parameters: { searches: [{ feature_uri: 'tessera://text_extractor@1.0/text_embedding', query: { text: 'x' } }] } } },
      ],
    });
    expect(run.body.status).toBe('budget_exceeded');
    expect(run.body.budget.exceeded).toEqual({ limit: 'max_credits', value: 0, used: 0, stopped_before: 'search' });
    expect(run.body.documents.map((d: { payload: { fields: { title: string } } }) => d.payload.fields.title)).toEqual(['chair-a']);
    expect(run.body.stage_statistics.stages.search.status).toBe('skipped');
  });

  it("never shows a user-scoped key another principal's documents", async () => {
    const run = await api('POST', '/v1/retrievers/lamps/execute', { inputs: { category: 'lamps', max_price: 100 } }, aliceKey);
    expect(run.status).toBe(200);
    expect(run.body.documents.map((d: { payload: { fields: { title: string } } }) => d.payload.fields.title)).toEqual(['lamp-e']);
    // Its history shows only its own executions: the others' results name documents it may not see.
    const history = await api('GET', '/v1/retrievers/lamps/executions', undefined, aliceKey);
    expect(history.body.results.map((e: { execution_id: string }) => e.execution_id)).toEqual([run.body.execution_id]);
    const others = (await api('GET', '/v1/retrievers/lamps/executions')).body.results.filter((e: { execution_id: string }) => e.execution_id !== run.body.execution_id);
    expect(others.length).toBeGreaterThan(0);
    expect((await api('GET', `/v1/retrievers/lamps/executions/${others[0].execution_id}`, undefined, aliceKey)).status).toBe(404);
  });

  it('refuses to run a saved retriever with a stage version other than the one it was built with', async () => {
    const created = (await api('POST', '/v1/retrievers', definition('pinned'))).body.retriever;
    const db = t.kernel.services.get(DatabaseHandle).db;
    const versions = created.stage_versions.map((v: { stage_id: string }) => (v.stage_id === 'sort_attribute' ? { ...v, version: '0.9' } : v));
    await db('retrievers').where({ retriever_id: created.retriever_id }).update({ stage_versions: JSON.stringify(versions) });
    const run = await api('POST', '/v1/retrievers/pinned/execute', { inputs: { category: 'lamps' } });
    expect(run.status).toBe(409);
    expect(run.body.error.message).toContain('sort_attribute 0.9');
    expect((await api('POST', '/v1/retrievers/pinned/clone', { retriever_name: 'pinned-2' })).body.retriever.stage_versions[1].version).toBe('1.0');
    expect((await api('POST', '/v1/retrievers/pinned-2/execute', { inputs: { category: 'lamps' } })).status).toBe(200);
  });

  it("runs only over collections the key's scopes can read", async () => {
    const other = (await api('POST', '/v1/collections/create', { collection_name: 'other', source: { type: 'bucket', bucket_id: 'src' } })).body;
    const scoped = (await t.request('POST', `/v1/organizations/users/${t.adminEmail}/api-keys`, {
      key: t.adminKey,
      body: { name: 'scoped', permissions: ['read'], scopes: [{ resource_type: 'retriever', resource_id: '*' }, { resource_type: 'collection', resource_id: other.collection_id }] },
    })).body.key;
    const body = (collection: string) => ({ collection_identifiers: [collection], input_schema: {}, inputs: {}, stages: [filterStage({})] });
    const refused = await api('POST', '/v1/retrievers/execute', body('products'), scoped);
    expect(refused.status).toBe(403);
    expect(refused.body.error.message).toContain("collection 'products'");
    expect((await api('POST', '/v1/retrievers/execute', body('other'), scoped)).status).toBe(200);
    expect((await api('POST', '/v1/retrievers/lamps/execute', { inputs: { category: 'lamps' } }, scoped)).status).toBe(403);
  });

  it('records interactions: the ten upper-case types and the lower-case kinds, one or a batch of up to 100', async () => {
    const db = t.kernel.services.get(DatabaseHandle).db;
    const run = await api('POST', '/v1/retrievers/lamps/execute', { inputs: { category: 'lamps' } });
    expect(run.status, run.text).toBe(200);
    const doc = run.body.documents[0].document_id;
    const one = await api('POST', '/v1/retrievers/lamps/interactions', { document_id: doc, interaction_type: ['click', 'LONG_VIEW', 'long_view'], position: 0, execution_id: run.body.execution_id, query_snapshot: { category: 'lamps' } });
    expect(one.status).toBe(200);
    expect(one.body).toMatchObject({ recorded: 1, interaction_ids: [expect.stringMatching(/^int_/)] });
    const stored = await db('retriever_interactions').where({ interaction_id: one.body.interaction_ids[0] }).first();
    expect(stored.interaction_types).toEqual(['CLICK', 'LONG_VIEW']);
    const types = ['VIEW', 'CLICK', 'POSITIVE_FEEDBACK', 'NEGATIVE_FEEDBACK', 'PURCHASE', 'ADD_TO_CART', 'WISHLIST', 'LONG_VIEW', 'SHARE', 'BOOKMARK'];
    const batch = await api('POST', '/v1/retrievers/lamps/interactions', { interactions: types.map((type, position) => ({ document_id: doc, interaction_type: [type], position, session_id: 's1' })) });
    expect(batch.body.recorded).toBe(10);
    expect((await api('POST', '/v1/retrievers/lamps/interactions', { interactions: Array.from({ length: 101 }, () => ({ document_id: doc, interaction_type: ['VIEW'] })) })).status).toBe(422);
    expect((await api('POST', '/v1/retrievers/lamps/interactions', { document_id: doc, interaction_type: ['hover'] })).status).toBe(422);
    expect((await api('POST', '/v1/retrievers/lamps/interactions', { document_id: doc, interaction_type: ['VIEW'], execution_id: 'exec_unknown' })).status).toBe(404);
    // Tied to an execution, an interaction is on one of its results; a batch with one that is not stores nothing.
    const before = (await db('retriever_interactions').count({ n: '*' }))[0]!.n;
    const unseen = await api('POST', '/v1/retrievers/lamps/interactions', {
      interactions: [
        { document_id: doc, interaction_type: ['VIEW'], execution_id: run.body.execution_id },
        { document_id: 'doc_never_shown', interaction_type: ['CLICK'], execution_id: run.body.execution_id },
      ],
    });
    expect(unseen.status, unseen.text).toBe(400);
    expect(unseen.body.error.message).toContain(`Document 'doc_never_shown' is not among the results of execution '${run.body.execution_id}' (interaction 1)`);
    expect(unseen.body.error.details).toMatchObject({ document_id: 'doc_never_shown', index: 1 });
    expect((await db('retriever_interactions').count({ n: '*' }))[0]!.n).toBe(before);
    // Without an execution, any document of the retriever's collections can be named (e.g. a recommendation).
    expect((await api('POST', '/v1/retrievers/lamps/interactions', { document_id: 'doc_never_shown', interaction_type: ['VIEW'] })).status).toBe(200);
    // X-Session-ID is the session of those that name none, as on the public endpoints.
    const tab = await t.request('POST', '/v1/retrievers/lamps/interactions', {
      key: t.adminKey,
      headers: { 'X-Namespace': NS, 'X-Session-ID': 'tab-7' },
      body: { interactions: [{ document_id: doc, interaction_type: ['VIEW'] }, { document_id: doc, interaction_type: ['VIEW'], session_id: 'own' }] },
    });
    expect(tab.status, tab.text).toBe(200);
    const sessions = await db('retriever_interactions').whereIn('interaction_id', tab.body.interaction_ids).orderBy('interaction_id').select('interaction_id', 'session_id');
    expect(sessions.map((r: { interaction_id: string; session_id: string }) => [tab.body.interaction_ids.indexOf(r.interaction_id), r.session_id]).sort()).toEqual([[0, 'tab-7'], [1, 'own']]);
  });

  it('an offset past any page is an empty page; past a 32-bit integer, a 422 naming it', async () => {
    const far = await api('GET', '/v1/retrievers/lamps/executions?offset=2147483647');
    expect(far.status, far.text).toBe(200);
    expect(far.body.results).toEqual([]);
    const huge = await api('GET', '/v1/retrievers/lamps/executions?offset=9223372036854775807');
    expect(huge.status).toBe(422);
    expect(huge.body.detail[0].loc).toEqual(['query', 'offset']);
  });

  it('lists every registered stage with its parameter schema', async () => {
    const stages = await api('GET', '/v1/retrievers/stages');
    expect(stages.status).toBe(200);
    const ids = stages.body.results.map((s: { stage_id: string }) => s.stage_id);
    expect(ids).toEqual(expect.arrayContaining(['attribute_filter', 'feature_search', 'limit', 'sort_attribute']));
    expect(stages.body.results.find((s: { stage_id: string }) => s.stage_id === 'limit')).toMatchObject({ stage_type: 'reduce', version: '1.0', parameters: { type: 'object' } });
  });
});
