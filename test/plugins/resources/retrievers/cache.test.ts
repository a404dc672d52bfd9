/**
 * Retriever result caching through the real stack: a hit returns the same documents with `cache_hit` and
 * no credits; every write path (direct write, bulk, metadata, delete, grants, batch processing's store)
 * invalidates; entries expire with the injected clock and are swept; user-scoped keys never share entries;
 * collections' invalidation rules drop named retrievers' caches in a background task; two API processes on
 * one PostgreSQL database share one cache; a collection saved retrievers use is not deleted.
 *
 * Entries are shown to be real by writing a document *around* the write paths (straight into the document
 * store, which tells no cache): a hit still answers what was there before, a miss finds the new document.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../../../kernel/clock.js';
import { DatabaseHandle, EventBus, TaskQueue } from '../../../../kernel/tokens.js';
import { Documents } from '../../../../plugins/resources/collections/index.js';
import { startTestKernel, type TestKernel, organizationMe } from '../../../support/kernel.js';

const NS = 'cached';
const DIMS = 384;
const FEATURE = 'tessera://text_extractor@1.0/text_embedding';

function unit(direction: number, jitter = 0): number[] {
  const v = Array.from({ length: DIMS }, (_, d) => (d === direction ? 1 : 0) + (d === (direction + 1) % DIMS ? jitter : 0));
  const norm = Math.hypot(...v);
  return v.map((x) => x / norm);
}

type Doc = { document_id: string; payload: { fields: { title: string } } };
const titles = (body: { documents: Doc[] }) => body.documents.map((d) => d.payload.fields.title);

describe('retriever cache', () => {
  const clock = new ManualClock(new Date());
  let t: TestKernel;
  let organizationId: string;
  let products: { collection_id: string; namespace_id: string };
  const keys: Record<'alice' | 'bob', string> = {} as never;
  let bypassCount = 0;

  const api = (method: string, path: string, body?: unknown, key = t.adminKey) =>
    t.request(method, path, { key, headers: { 'X-Namespace': NS }, ...(body !== undefined ? { body } : {}) });
  const run = async (name: string, inputs: Record<string, unknown> = { category: 'lamps' }, key = t.adminKey, pagination?: unknown) => {
    const res = await api('POST', `/v1/retrievers/${name}/execute`, { inputs, ...(pagination ? { pagination } : {}) }, key);
    expect(res.status, res.text).toBe(200);
    return res.body;
  };
  const hits = (body: { stage_statistics: { stages: Record<string, { cache_hit: boolean }> } }) =>
    Object.fromEntries(Object.entries(body.stage_statistics.stages).map(([name, s]) => [name, s.cache_hit]));
  /** A document written straight into the store: no cache hears of it. */
  const writeAround = async (title: string, category = 'lamps', ownerPrincipal?: string) => {
    bypassCount += 1;
    await t.kernel.services.get(Documents).upsert({
      organizationId, namespaceId: products.namespace_id, collectionId: products.collection_id, sourceKey: `around-${bypassCount}`,
      rootObjectId: null, sourceCollectionId: null, sourceDocumentId: null, processingTier: 0,
      fields: { title, category, price: 100 + bypassCount }, ...(ownerPrincipal ? { ownerPrincipal } : {}),
    });
  };
  const write = (documents: unknown[], key = t.adminKey) => api('POST', '/v1/collections/products/documents/bulk', { documents }, key);

  const searchStage = { stage_name: 'search', stage_type: 'filter', config: { stage_id: 'feature_search', parameters: { searches: [{ feature_uri: FEATURE, query: { vector: unit(0) }, top_k: 50 }] } } };
  const filterStage = { stage_name: 'filter', stage_type: 'filter', config: { stage_id: 'attribute_filter', parameters: { filters: { AND: [{ field: 'category', operator: 'eq', value: '{{inputs.category}}' }] } } } };
  const sortStage = { stage_name: 'sort', config: { stage_id: 'sort_attribute', parameters: { field: 'price', direction: 'asc' } } };
  const define = (name: string, extra: Record<string, unknown> = {}) =>
    api('POST', '/v1/retrievers', {
      retriever_name: name,
      collection_identifiers: ['products'],
      input_schema: { category: { type: 'string', required: true } },
      stages: [filterStage, sortStage],
      cache_config: { enabled: true, ttl_seconds: 60 },
      ...extra,
    });

  beforeAll(async () => {
    t = await startTestKernel({ clock, config: { runTasks: false } });
    organizationId = organizationMe((await t.client().GET('/v1/me', {})).data).organization.organization_id;
    await t.client().POST('/v1/namespaces', { body: { namespace_name: NS } });
    await api('POST', '/v1/buckets', { bucket_name: 'src' });
    const created = await api('POST', '/v1/collections/create', {
      collection_name: 'products', source: { type: 'bucket', bucket_id: 'src' }, feature_extractors: [{ feature_extractor_name: 'text_extractor' }],
    });
    expect(created.status, created.text).toBe(201);
    products = created.body;
    await api('POST', '/v1/collections/create', { collection_name: 'prices', source: { type: 'bucket', bucket_id: 'src' } });
    const items = [['lamp-a', 'lamps', 30], ['lamp-b', 'lamps', 10], ['chair-a', 'chairs', 50], ['lamp-c', 'lamps', 20]] as const;
    const written = await write(items.map(([title, category, price], i) => ({ key: title, fields: { title, category, price }, vectors: { text_embedding: unit(0, i * 0.1) } })));
    expect(written.status, written.text).toBe(200);
    for (const principal of ['alice', 'bob'] as const) {
      keys[principal] = (await t.request('POST', `/v1/organizations/users/${encodeURIComponent(t.adminEmail)}/api-keys`, {
        key: t.adminKey, body: { name: principal, principal_id: principal, permissions: ['read', 'write'] },
      })).body.key;
    }
    expect((await define('lamps')).status).toBe(201);
    expect((await define('searched', { stages: [searchStage, filterStage, sortStage], cache_stage_names: ['search'] })).status).toBe(201);
  }, 120_000);
  afterAll(async () => {
    await t?.stop();
  });

  it('a hit returns the same documents, marks cache_hit and charges nothing; it serves every page', async () => {
    const first = await run('lamps');
    expect(hits(first)).toEqual({ filter: false, sort: false });
    expect(titles(first)).toEqual(['lamp-b', 'lamp-c', 'lamp-a']);
    const second = await run('lamps');
    expect(hits(second)).toEqual({ filter: true, sort: true });
    expect(second.documents).toEqual(first.documents);
    expect(second.stage_statistics.stages.sort).toMatchObject({ status: 'completed', input_count: 3, output_count: 3, credits: 0 });
    // Another page of the same execution is read from the same entry.
    const page = await run('lamps', { category: 'lamps' }, t.adminKey, { method: 'offset', limit: 1, offset: 1 });
    expect(hits(page).sort).toBe(true);
    expect(titles(page)).toEqual(['lamp-c']);
    // Other inputs are another key.
    expect(hits(await run('lamps', { category: 'chairs' }))).toEqual({ filter: false, sort: false });
    // The entry is real: a document written around the write paths is not seen while it is valid.
    await writeAround('lamp-hidden');
    expect(titles(await run('lamps'))).not.toContain('lamp-hidden');
  });

  it('a streamed execution served by the cache still shows every stage start and complete, in order', async () => {
    const first = await run('lamps');
    const res = await api('POST', '/v1/retrievers/lamps/execute', { inputs: { category: 'lamps' }, stream: true });
    expect(res.status, res.text).toBe(200);
    const events = res.text.split('\n\n').filter((b) => b.trim() !== '').map((b) => b.slice('data: '.length));
    expect(events.at(-1)).toBe('[DONE]');
    const typed = events.slice(0, -1).map((e) => JSON.parse(e) as { event_type: string; stage_name: string | null; statistics?: Record<string, unknown>; documents?: Doc[]; stage_statistics?: unknown });
    expect(typed.map((e) => [e.event_type, e.stage_name])).toEqual([
      ['stage_start', 'filter'], ['stage_complete', 'filter'], ['stage_start', 'sort'], ['stage_complete', 'sort'], ['execution_complete', null],
    ]);
    expect(typed[3]!.statistics).toMatchObject({ input_count: 3, output_count: 3 });
    expect(typed[4]!.documents).toEqual(first.documents);
    const executionId = (typed[0] as { execution_id?: string }).execution_id;
    const recorded = (await api('GET', `/v1/retrievers/lamps/executions/${executionId}`)).body;
    expect(recorded.cache_hit).toBe(true);
    expect(hits(recorded)).toEqual({ filter: true, sort: true });
  });

  it('caches the stages cache_stage_names names: the later ones run again; skipped stages are not charged', async () => {
    const miss = await run('searched');
    expect(hits(miss)).toEqual({ search: false, filter: false, sort: false });
    expect(miss.stage_statistics.stages.search.credits).toBe(1);
    const hit = await run('searched');
    expect(hits(hit)).toEqual({ search: true, filter: false, sort: false });
    expect(hit.stage_statistics.stages.search).toMatchObject({ credits: 0, output_count: miss.stage_statistics.stages.search.output_count });
    expect(hit.budget.credits_used).toBe(0);
    expect(hit.documents).toEqual(miss.documents);
    // The cached search output feeds a filter with other inputs.
    const chairs = await run('searched', { category: 'chairs' });
    expect(hits(chairs)).toEqual({ search: true, filter: false, sort: false });
    expect(titles(chairs)).toEqual(['chair-a']);
  });

  it('a direct write, a bulk write, a metadata change and a delete each invalidate at once', async () => {
    await run('lamps');
    expect(hits(await run('lamps')).sort).toBe(true);
    const created = await api('POST', '/v1/collections/products/documents', { key: 'lamp-new', fields: { title: 'lamp-new', category: 'lamps', price: 1 }, vectors: { text_embedding: unit(0) } });
    expect(created.status, created.text).toBe(201);
    const afterCreate = await run('lamps');
    expect(hits(afterCreate).sort).toBe(false);
    expect(titles(afterCreate)[0]).toBe('lamp-new');
    // Hidden documents written around the write paths show up too: the whole result was recomputed.
    expect(titles(afterCreate)).toContain('lamp-hidden');

    expect(hits(await run('lamps')).sort).toBe(true);
    expect((await write([{ key: 'lamp-new', fields: { title: 'lamp-new', category: 'chairs', price: 1 } }])).status).toBe(200);
    const afterBulk = await run('lamps');
    expect(hits(afterBulk).sort).toBe(false);
    expect(titles(afterBulk)).not.toContain('lamp-new');

    const newDoc = (await run('lamps', { category: 'chairs' })).documents.find((d: Doc) => d.payload.fields.title === 'lamp-new') as Doc;
    expect(hits(await run('lamps', { category: 'chairs' })).sort).toBe(true);
    expect((await api('PATCH', `/v1/collections/products/documents/${newDoc.document_id}`, { metadata: { on_sale: true } })).status).toBe(200);
    const afterPatch = await run('lamps', { category: 'chairs' });
    expect(hits(afterPatch).sort).toBe(false);
    expect(afterPatch.documents.find((d: Doc) => d.document_id === newDoc.document_id).payload.metadata).toEqual({ on_sale: true });

    expect(hits(await run('lamps', { category: 'chairs' })).sort).toBe(true);
    expect((await api('DELETE', `/v1/collections/products/documents/${newDoc.document_id}`)).status).toBe(200);
    const afterDelete = await run('lamps', { category: 'chairs' });
    expect(hits(afterDelete).sort).toBe(false);
    expect(titles(afterDelete)).toEqual(['chair-a']);
  });

  it('entries expire after ttl_seconds (injected clock) and expired rows are swept', async () => {
    await run('lamps');
    expect(hits(await run('lamps')).sort).toBe(true);
    await writeAround('lamp-late');
    clock.advance(59_000);
    expect(titles(await run('lamps'))).not.toContain('lamp-late');
    clock.advance(2_000);
    const expired = await run('lamps');
    expect(hits(expired).sort).toBe(false);
    expect(titles(expired)).toContain('lamp-late');

    const db = t.kernel.services.get(DatabaseHandle).db;
    const live = async () => Number(((await db('retriever_cache_entries').count({ n: '*' })) as Array<{ n: string | number }>)[0]!.n);
    expect(await live()).toBeGreaterThan(1);
    clock.advance(3_600_000);
    const tasks = t.kernel.services.get(TaskQueue);
    await tasks.enqueue('retrievers.cache_sweep', {});
    await tasks.drain();
    expect(await live()).toBe(0);
  });

  it('user-scoped keys never share entries: each principal sees its own documents, hit or miss', async () => {
    await writeAround('lamp-of-alice', 'lamps', 'alice');
    await api('POST', '/v1/collections/products/documents', { key: 'touch', fields: { title: 'touch', category: 'none' } });
    const asAdmin = await run('lamps');
    expect(titles(asAdmin)).toContain('lamp-of-alice');
    expect(hits(await run('lamps')).sort).toBe(true);
    // Bob's first run is a miss, never the admin's entry (which holds Alice's document).
    const asBob = await run('lamps', { category: 'lamps' }, keys.bob);
    expect(hits(asBob).sort).toBe(false);
    expect(asBob.documents).toEqual([]);
    const asAlice = await run('lamps', { category: 'lamps' }, keys.alice);
    expect(hits(asAlice).sort).toBe(false);
    expect(titles(asAlice)).toEqual(['lamp-of-alice']);
    const again = await run('lamps', { category: 'lamps' }, keys.alice);
    expect(hits(again).sort).toBe(true);
    expect(titles(again)).toEqual(['lamp-of-alice']);
    expect(hits(await run('lamps', { category: 'lamps' }, keys.bob)).sort).toBe(true);
    expect((await run('lamps', { category: 'lamps' }, keys.bob)).documents).toEqual([]);

    // A grant is a write: Bob's entry is stale at once and his next run finds the granted document.
    const aliceDoc = again.documents[0] as Doc;
    const granted = await api('POST', `/v1/collections/products/documents/${aliceDoc.document_id}/grants`, { principal_ids: ['bob'] });
    expect(granted.status, granted.text).toBe(200);
    const bobAfterGrant = await run('lamps', { category: 'lamps' }, keys.bob);
    expect(hits(bobAfterGrant).sort).toBe(false);
    expect(titles(bobAfterGrant)).toEqual(['lamp-of-alice']);
  });

  it("a collection's invalidation rule drops a named retriever's cache in a background task", async () => {
    // lamps does not read prices: only the rule links them.
    const rule = { collection: 'prices', action: 'updated', retriever_id: 'lamps', recompute_strategy: 'background' };
    expect((await api('PATCH', '/v1/collections/prices', { cache_config: { invalidation_events: [rule] } })).status).toBe(200);
    await run('lamps');
    expect(hits(await run('lamps')).sort).toBe(true);
    await writeAround('lamp-after-rule');
    const tasks = t.kernel.services.get(TaskQueue);
    // A created price does not match the rule's action: the cache stays.
    expect((await api('POST', '/v1/collections/prices/documents', { key: 'p1', fields: { amount: 1 } })).status).toBe(201);
    await tasks.drain();
    expect(titles(await run('lamps'))).not.toContain('lamp-after-rule');
    // An updated price matches: the drop is a task, done when tasks run.
    expect((await api('POST', '/v1/collections/prices/documents', { key: 'p1', fields: { amount: 2 } })).status).toBe(200);
    expect(titles(await run('lamps'))).not.toContain('lamp-after-rule');
    expect(await tasks.drain()).toBeGreaterThanOrEqual(1);
    const dropped = await run('lamps');
    expect(hits(dropped).sort).toBe(false);
    expect(titles(dropped)).toContain('lamp-after-rule');
    // Rows of the dropped retriever are gone, not only unreachable.
    const db = t.kernel.services.get(DatabaseHandle).db;
    const lampsId = (await api('GET', '/v1/retrievers/lamps')).body.retriever.retriever_id;
    expect(Number(((await db('retriever_cache_entries').where({ retriever_id: lampsId }).count({ n: '*' })) as Array<{ n: string | number }>)[0]!.n)).toBe(1);
  });

  it('batch processing that writes documents invalidates', async () => {
    expect((await api('POST', '/v1/buckets', { bucket_name: 'feed' })).status).toBe(201);
    expect((await api('POST', '/v1/collections/create', {
      collection_name: 'feed-docs', source: { type: 'bucket', bucket_id: 'feed' }, feature_extractors: [{ feature_extractor_name: 'passthrough_extractor' }],
    })).status).toBe(201);
    const all = { stage_name: 'all', config: { stage_id: 'attribute_filter', parameters: { filters: { AND: [{ field: 'processing_tier', operator: 'eq', value: 0 }] } } } };
    expect((await api('POST', '/v1/retrievers', { retriever_name: 'feed', collection_identifiers: ['feed-docs'], stages: [all], cache_config: { enabled: true } })).status).toBe(201);
    const ingest = async (key: string) => {
      const object = await api('POST', '/v1/buckets/feed/objects', { key, blobs: [{ property: 'content', text: key }] });
      expect(object.status, object.text).toBe(201);
      const batch = await api('POST', '/v1/buckets/feed/batches', { object_ids: [object.body.object_id] });
      expect((await api('POST', `/v1/buckets/feed/batches/${batch.body.batch_id}/submit`)).status).toBe(202);
      for (let i = 0; i < 50; i++) {
        await t.kernel.services.get(TaskQueue).drain();
        const status = (await api('GET', `/v1/buckets/feed/batches/${batch.body.batch_id}`)).body.status as string;
        if (status === 'COMPLETED') return;
        expect(['PENDING', 'QUEUED', 'PROCESSING', 'IN_PROGRESS', 'DRAFT', 'SUBMITTED']).toContain(status);
        await new Promise((r) => setTimeout(r, 100));
      }
      throw new Error('batch did not finish');
    };
    await ingest('first.txt');
    expect((await run('feed', {})).documents).toHaveLength(1);
    expect(hits(await run('feed', {})).all).toBe(true);
    await ingest('second.txt');
    const after = await run('feed', {});
    expect(hits(after).all).toBe(false);
    expect(after.documents).toHaveLength(2);
  });

  it('direct document writes and deletes publish document.created, document.updated and document.deleted', async () => {
    const seen: Array<{ type: string; data: Record<string, unknown> }> = [];
    const unsubscribe = t.kernel.services.get(EventBus).subscribe('document.*', (event) => {
      if (event.data.collection_name === 'prices') seen.push({ type: event.type, data: event.data });
    });
    try {
      const created = await api('POST', '/v1/collections/prices/documents', { key: 'ev', fields: { amount: 1 } });
      await api('POST', '/v1/collections/prices/documents', { key: 'ev', fields: { amount: 2 } });
      await api('DELETE', `/v1/collections/prices/documents/${created.body.document_id}`);
      for (let i = 0; i < 100 && seen.length < 3; i++) await new Promise((r) => setTimeout(r, 50));
      expect(seen.map((e) => e.type)).toEqual(['document.created', 'document.updated', 'document.deleted']);
      expect(seen[0]!.data).toMatchObject({ document_ids: [created.body.document_id], count: 1, namespace_id: products.namespace_id });
    } finally {
      unsubscribe();
    }
  });

  it('records hits and misses: cache_hit in execution history, hit rate on the retriever', async () => {
    const history = (await api('GET', '/v1/retrievers/lamps/executions?limit=1000')).body;
    const recorded = history.results.map((r: { cache_hit: boolean | null }) => r.cache_hit);
    expect(recorded.every((h: unknown) => typeof h === 'boolean')).toBe(true);
    const hitCount = recorded.filter((h: boolean) => h).length;
    const retriever = (await api('GET', '/v1/retrievers/lamps')).body.retriever;
    expect(retriever.cache_statistics).toEqual({
      executions: recorded.length, hits: hitCount, misses: recorded.length - hitCount, hit_rate: hitCount / recorded.length,
    });
    expect(hitCount).toBeGreaterThan(0);
    expect(hitCount).toBeLessThan(recorded.length);
    // The same figures in every answer that shows the retriever: the list and an update; a clone starts at none.
    const listed = (await api('GET', '/v1/retrievers?limit=1000')).body.results.find((r: { retriever_name: string }) => r.retriever_name === 'lamps');
    expect(listed.cache_statistics).toEqual(retriever.cache_statistics);
    const patched = (await api('PATCH', '/v1/retrievers/lamps', { tags: ['lit'] })).body.retriever;
    expect(patched.cache_statistics).toEqual(retriever.cache_statistics);
    const cloned = (await api('POST', '/v1/retrievers/lamps/clone', { retriever_name: 'lamps-copy' })).body.retriever;
    expect(cloned.cache_statistics).toEqual({ executions: 0, hits: 0, misses: 0, hit_rate: null });
    // A retriever that does not cache records no hit or miss.
    await define('uncached', { cache_config: { enabled: false } });
    await run('uncached');
    expect((await api('GET', '/v1/retrievers/uncached/executions')).body.results[0].cache_hit).toBeNull();
    expect((await api('GET', '/v1/retrievers/uncached')).body.retriever.cache_statistics).toEqual({ executions: 0, hits: 0, misses: 0, hit_rate: null });
  });

  it('refuses to delete a collection saved retrievers use (409 naming them, even with force); deletable once they are gone', async () => {
    await api('POST', '/v1/collections/create', { collection_name: 'temp', source: { type: 'bucket', bucket_id: 'src' } });
    await api('POST', '/v1/retrievers', { retriever_name: 'on-temp', collection_identifiers: ['temp'], stages: [sortStage] });
    for (const path of ['/v1/collections/temp', '/v1/collections/temp?force=true']) {
      const refused = await api('DELETE', path);
      expect(refused.status).toBe(409);
      expect(refused.body.error.message).toContain("retriever 'on-temp'");
      expect(refused.body.error.message).toMatch(/delete that retriever first, or clone/);
      expect(refused.body.error.details.references).toEqual([expect.objectContaining({ resource_type: 'retriever', resource_name: 'on-temp' })]);
    }
    // Ad hoc executions keep nothing that could hold a collection.
    expect((await api('POST', '/v1/retrievers/execute', { collection_identifiers: ['temp'], input_schema: {}, stages: [sortStage], inputs: {} })).status).toBe(200);
    expect((await api('DELETE', '/v1/retrievers/on-temp')).status).toBe(200);
    expect((await api('DELETE', '/v1/collections/temp')).status).toBe(200);
  });
});

describe.skipIf(!process.env.TEST_DATABASE_URL)('retriever cache shared by two API processes on one PostgreSQL database', () => {
  let a: TestKernel;
  let b: TestKernel;

  const api = (k: TestKernel, method: string, path: string, body?: unknown) =>
    k.request(method, path, { key: a.adminKey, headers: { 'X-Namespace': NS }, ...(body !== undefined ? { body } : {}) });
  const run = async (k: TestKernel) => {
    const res = await api(k, 'POST', '/v1/retrievers/shared/execute', { inputs: {} });
    expect(res.status, res.text).toBe(200);
    return { hit: res.body.stage_statistics.stages.sort.cache_hit as boolean, titles: titles(res.body) };
  };

  beforeAll(async () => {
    a = await startTestKernel({ config: { runTasks: false } });
    b = await startTestKernel({ config: { runTasks: false, databaseUrl: a.config.databaseUrl!, adminKey: a.adminKey } });
    await a.client().POST('/v1/namespaces', { body: { namespace_name: NS } });
    await api(a, 'POST', '/v1/buckets', { bucket_name: 'src' });
    await api(a, 'POST', '/v1/collections/create', { collection_name: 'things', source: { type: 'bucket', bucket_id: 'src' } });
    const one = await api(a, 'POST', '/v1/collections/things/documents', { key: 'one', fields: { title: 'one', n: 1 } });
    expect(one.status, one.text).toBe(201);
    const created = await api(a, 'POST', '/v1/retrievers', {
      retriever_name: 'shared', collection_identifiers: ['things'],
      stages: [
        { stage_name: 'all', config: { stage_id: 'attribute_filter', parameters: { filters: { AND: [{ field: 'n', operator: 'gte', value: 0 }] } } } },
        { stage_name: 'sort', config: { stage_id: 'sort_attribute', parameters: { field: 'n', direction: 'asc' } } },
      ],
      cache_config: { enabled: true, ttl_seconds: 600 },
    });
    expect(created.status, created.text).toBe(201);
  }, 120_000);
  afterAll(async () => {
    await b?.stop();
    await a?.stop();
  });

  it("one process's entry is the other's hit, and one process's write invalidates the other's cache", async () => {
    expect(await run(a)).toEqual({ hit: false, titles: ['one'] });
    expect(await run(b)).toEqual({ hit: true, titles: ['one'] });
    expect((await api(b, 'POST', '/v1/collections/things/documents', { key: 'zero', fields: { title: 'zero', n: 0 } })).status).toBe(201);
    expect(await run(a)).toEqual({ hit: false, titles: ['zero', 'one'] });
    expect(await run(b)).toEqual({ hit: true, titles: ['zero', 'one'] });
    const zero = (await api(a, 'POST', '/v1/retrievers/shared/execute', { inputs: {} })).body.documents[0].document_id as string;
    expect((await api(a, 'DELETE', `/v1/collections/things/documents/${zero}`)).status).toBe(200);
    expect(await run(b)).toEqual({ hit: false, titles: ['one'] });
  });
});
