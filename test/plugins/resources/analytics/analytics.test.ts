/**
 * `/v1/analytics/*` through the real stack: figures computed from real executions, interactions, requests and
 * cache entries (an injected clock moves time), windows and their errors, and who may read what — another
 * organization's retriever is a 404, a scoped key's cache report covers only its namespaces.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../../../kernel/clock.js';
import { TaskQueue, TenantStore, resolve } from '../../../../kernel/tokens.js';
import { Documents } from '../../../../plugins/resources/collections/index.js';
import { startTestKernel, type TestKernel, organizationMe } from '../../../support/kernel.js';

const NS = 'shop';
const OTHER_NS = 'depot';

describe('analytics', () => {
  const clock = new ManualClock(new Date('2026-11-20T10:00:00Z'));
  let t: TestKernel;
  let organizationId: string;
  let otherOrgKey: string;
  let readKey: string;
  let depotOnlyKey: string;
  const executions: Array<{ execution_id: string; documents: Array<{ document_id: string }> }> = [];

  const api = (method: string, path: string, body?: unknown, key = t.adminKey, ns: string | null = NS) =>
    t.request(method, path, { key, headers: ns ? { 'X-Namespace': ns } : {}, ...(body !== undefined ? { body } : {}) });
  const get = async (path: string, key = t.adminKey, ns: string | null = NS) => {
    const res = await api('GET', path, undefined, key, ns);
    expect(res.status, res.text).toBe(200);
    return res.body;
  };
  const run = async (name: string, category: string, ns = NS) => {
    const res = await api('POST', `/v1/retrievers/${name}/execute`, { inputs: { category } }, t.adminKey, ns);
    expect(res.status, res.text).toBe(200);
    clock.advance(1000);
    return res.body;
  };
  const retriever = (name: string, extra: Record<string, unknown> = {}) => ({
    retriever_name: name,
    collection_identifiers: ['products'],
    input_schema: { category: { type: 'string', required: true } },
    stages: [
      { stage_name: 'match', config: { stage_id: 'attribute_filter', parameters: { filters: { AND: [{ field: 'category', operator: 'eq', value: '{{inputs.category}}' }] } } } },
      { stage_name: 'order', config: { stage_id: 'sort_attribute', parameters: { field: 'price', direction: 'asc' } } },
    ],
    ...extra,
  });

  async function createKey(name: string, body: Record<string, unknown>): Promise<string> {
    const res = await t.request('POST', `/v1/organizations/users/${encodeURIComponent(t.adminEmail)}/api-keys`, { key: t.adminKey, body: { name, ...body } });
    expect(res.status, res.text).toBe(201);
    return res.body.key;
  }

  beforeAll(async () => {
    t = await startTestKernel({ clock, config: { runTasks: false } });
    organizationId = organizationMe((await t.client().GET('/v1/me', {})).data).organization.organization_id;
    for (const ns of [NS, OTHER_NS]) {
      expect((await api('POST', '/v1/namespaces', { namespace_name: ns }, t.adminKey, null)).status).toBe(201);
      expect((await api('POST', '/v1/buckets', { bucket_name: 'src' }, t.adminKey, ns)).status).toBe(201);
      const collection = (await api('POST', '/v1/collections/create', { collection_name: 'products', source: { type: 'bucket', bucket_id: 'src' } }, t.adminKey, ns)).body;
      for (let i = 0; i < 10; i++) {
        await t.kernel.services.get(Documents).upsert({
          organizationId, namespaceId: collection.namespace_id, collectionId: collection.collection_id, sourceKey: `p-${i}`,
          rootObjectId: null, sourceCollectionId: null, sourceDocumentId: null, processingTier: 0,
          fields: { title: `Product ${i}`, category: i % 2 === 0 ? 'lamps' : 'chairs', price: 10 + i },
        });
      }
      expect((await api('POST', '/v1/retrievers', retriever('finder', { cache_config: { enabled: true, ttl_seconds: 60 } }), t.adminKey, ns)).status).toBe(201);
    }
    expect((await api('POST', '/v1/retrievers', retriever('plain'))).status).toBe(201);

    // finder: a miss, two hits, another miss; plain: the same input six times, never cached.
    for (const category of ['lamps', 'lamps', 'lamps', 'chairs']) executions.push(await run('finder', category));
    for (let i = 0; i < 6; i++) await run('plain', 'lamps');
    await run('finder', 'lamps', OTHER_NS);

    otherOrgKey = (await resolve(t.kernel.container, TenantStore).createOrganization({ name: 'org-b', ownerEmail: 'owner-b@example.test' })).adminKeyPlaintext;
    readKey = await createKey('reader', { permissions: ['read'] });
    depotOnlyKey = await createKey('depot-only', { permissions: ['read'], scopes: [{ resource_type: 'namespace', resource_id: OTHER_NS }] });
  }, 120_000);

  afterAll(async () => {
    await t?.stop();
  });

  it('reports a retriever\'s executions, latency percentiles, cache hit rate and error rate, per day on request', async () => {
    const body = await get('/v1/analytics/retrievers/finder/performance?group_by=day');
    expect(body).toMatchObject({
      retriever_name: 'finder', executions: 4, completed: 4, failed: 0, budget_exceeded: 0, error_rate: 0,
      cached_executions: 4, cache_hit_rate: 0.5, avg_results: 5, group_by: 'day',
    });
    for (const key of ['p50_latency_ms', 'p95_latency_ms', 'p99_latency_ms']) expect(body[key]).toBeGreaterThanOrEqual(0);
    expect(body.latency.p95_ms).toBe(body.p95_latency_ms);
    expect(body.latency.max_ms).toBeGreaterThanOrEqual(body.latency.p50_ms);
    expect(body.series).toEqual([expect.objectContaining({ period_start: '2026-11-20T00:00:00.000Z', executions: 4, cache_hit_rate: 0.5, error_rate: 0 })]);

    // The namespace decides which `finder`; a window before the executions has none.
    expect((await get('/v1/analytics/retrievers/finder/performance', t.adminKey, OTHER_NS)).executions).toBe(1);
    const empty = await get('/v1/analytics/retrievers/finder/performance?start_time=2026-11-01T00:00:00Z&end_time=2026-11-02T00:00:00Z');
    expect(empty).toMatchObject({ executions: 0, error_rate: null, cache_hit_rate: null, p95_latency_ms: null, series: [] });
  });

  it('refuses bad windows and unknown retrievers, and hides other organizations\' retrievers', async () => {
    const backwards = await api('GET', '/v1/analytics/retrievers/finder/performance?start_time=2026-11-20T00:00:00Z&end_time=2026-11-19T00:00:00Z');
    expect(backwards.status).toBe(400);
    expect(backwards.body.error.message).toContain('start_time must be before end_time');
    const tooLong = await api('GET', '/v1/analytics/retrievers/finder/performance?start_time=2024-01-01T00:00:00Z&end_time=2026-01-01T00:00:00Z');
    expect(tooLong.status).toBe(400);
    expect(tooLong.body.error.message).toContain('366 days');
    expect((await api('GET', '/v1/analytics/retrievers/finder/performance?start_time=yesterday')).status).toBe(422);
    expect((await api('GET', '/v1/analytics/retrievers/finder/performance?group_by=week')).status).toBe(422);
    expect((await api('GET', '/v1/analytics/retrievers/nothing-here/performance')).status).toBe(404);
    const finderId = executions.length > 0 ? (await get('/v1/analytics/retrievers/finder/performance')).retriever_id : '';
    const otherOrg = await api('GET', `/v1/analytics/retrievers/${finderId}/stages`, undefined, otherOrgKey, 'default');
    expect([403, 404]).toContain(otherOrg.status);
    expect(JSON.stringify(otherOrg.body)).not.toContain('match');
  });

  it('reports each stage\'s time and counts in the definition\'s order', async () => {
    const body = await get('/v1/analytics/retrievers/finder/stages');
    expect(body.executions).toBe(4);
    expect(body.stages.map((s: { stage_name: string }) => s.stage_name)).toEqual(['match', 'order']);
    const [match, order] = body.stages;
    // The first stage reads the collection itself: it receives no documents from a stage before it.
    expect(match).toMatchObject({ stage_id: 'attribute_filter', stage_index: 0, in_current_definition: true, executions: 4, failed: 0, avg_input_count: 0, avg_output_count: 5 });
    expect(order).toMatchObject({ stage_id: 'sort_attribute', stage_index: 1, executions: 4, avg_output_count: 5 });
    // The cache serves the last stage's output: two executions hit it.
    expect(order.cache_hits).toBe(2);
    const shares = body.stages.map((s: { time_share: number | null }) => s.time_share ?? 0);
    if (shares.some((s: number) => s > 0)) expect(shares.reduce((a: number, b: number) => a + b, 0)).toBeCloseTo(1, 2);
  });

  it('aggregates interactions by position, document and session with click-through rates', async () => {
    const [first] = executions;
    const docs = first!.documents.map((d) => d.document_id);
    const interactions = [
      ...docs.slice(0, 3).map((document_id, position) => ({ document_id, interaction_type: ['VIEW'], position, execution_id: first!.execution_id, session_id: 'sess-a' })),
      { document_id: docs[0], interaction_type: ['CLICK'], position: 0, execution_id: first!.execution_id, session_id: 'sess-a' },
      { document_id: docs[0], interaction_type: ['VIEW', 'CLICK'], position: 0, session_id: 'sess-b' },
      { document_id: docs[1], interaction_type: ['PURCHASE'] },
    ];
    const recorded = await api('POST', '/v1/retrievers/finder/interactions', { interactions });
    expect(recorded.status, recorded.text).toBe(200);
    clock.advance(1000);

    const byPosition = await get('/v1/analytics/retrievers/finder/signals');
    expect(byPosition).toMatchObject({ group_by: 'position', total_interactions: 6, sessions: 2, documents: 3, has_more: false });
    expect(byPosition.counts).toEqual({ VIEW: 4, CLICK: 2, PURCHASE: 1 });
    expect(byPosition.click_through_rate).toBe(0.5);
    expect(byPosition.results.map((r: { position: number }) => r.position)).toEqual([0, 1, 2]);
    expect(byPosition.results[0]).toMatchObject({ interactions: 3, counts: { VIEW: 2, CLICK: 2 }, click_through_rate: 1, document_id: null });

    const byDocument = await get('/v1/analytics/retrievers/finder/signals?group_by=document&limit=1');
    expect(byDocument.results).toEqual([expect.objectContaining({ document_id: docs[0], interactions: 3, position: null })]);
    expect(byDocument.has_more).toBe(true);

    const bySession = await get('/v1/analytics/retrievers/finder/signals?group_by=session');
    const sessions = Object.fromEntries(bySession.results.map((r: { session_id: string | null; interactions: number }) => [String(r.session_id), r.interactions]));
    expect(sessions).toEqual({ 'sess-a': 4, 'sess-b': 1, null: 1 });
  });

  it('lists the slowest executions with their full inputs and stage times', async () => {
    const body = await get('/v1/analytics/retrievers/finder/slowest?limit=2');
    expect(body.results).toHaveLength(2);
    const [a, b] = body.results;
    expect(a.duration_ms).toBeGreaterThanOrEqual(b.duration_ms);
    expect(a.inputs).toHaveProperty('category');
    expect(a.stages.map((s: { stage_name: string }) => s.stage_name).sort()).toEqual(['match', 'order']);
    expect(a.stages[0].duration_ms).toBeGreaterThanOrEqual(a.stages[1].duration_ms);
    expect((await api('GET', '/v1/analytics/retrievers/finder/slowest?limit=101')).status).toBe(422);
  });

  it('suggests a cache for repeated inputs, and nothing on too few executions', async () => {
    const plain = await api('POST', '/v1/analytics/retrievers/plain/analyze');
    expect(plain.status, plain.text).toBe(200);
    expect(plain.body.executions).toBe(6);
    expect(plain.body.suggestions).toContainEqual(expect.objectContaining({ code: 'enable_cache', category: 'cache_config', evidence: expect.objectContaining({ executions: 6, distinct_inputs: 1 }) }));
    const finder = await api('POST', '/v1/analytics/retrievers/finder/analyze');
    expect(finder.body).toMatchObject({ executions: 4, suggestions: [] });
  });

  it('reports API latency by endpoint and status, by status, and by day (admin only)', async () => {
    const body = await get('/v1/analytics/api/performance', t.adminKey, null);
    const execute = body.results.find((r: { operation_id: string; status: number }) => r.operation_id === 'executeRetriever' && r.status === 200);
    expect(execute).toMatchObject({ method: 'POST', path: '/v1/retrievers/{retriever_id}/execute', requests: 11, errors: 0 });
    expect(execute.latency.p50_ms).toBeGreaterThan(0);
    expect(body.total_requests).toBeGreaterThanOrEqual(11);
    expect(body.errors).toBeGreaterThan(0);

    const byStatus = await get('/v1/analytics/api/performance?group_by=status', t.adminKey, null);
    expect(byStatus.results.every((r: { operation_id: unknown; status: number }) => r.operation_id === null && typeof r.status === 'number')).toBe(true);
    expect(byStatus.results.reduce((sum: number, r: { requests: number }) => sum + r.requests, 0)).toBe(byStatus.total_requests);
    const byDay = await get('/v1/analytics/api/performance?group_by=day', t.adminKey, null);
    expect(byDay.results.every((r: { period_start: string }) => r.period_start.endsWith('T00:00:00.000Z'))).toBe(true);

    expect((await api('GET', '/v1/analytics/api/performance', undefined, readKey, null)).status).toBe(403);
    // Another organization sees none of these requests.
    const other = await get('/v1/analytics/api/performance', otherOrgKey, null);
    expect(other.results.some((r: { operation_id: string }) => r.operation_id === 'executeRetriever')).toBe(false);
  });

  it('reports credits by resource type, and per day', async () => {
    const body = await get('/v1/analytics/usage/summary', t.adminKey, null);
    const types = Object.fromEntries(body.by_resource_type.map((r: { resource_type: string; requests: number }) => [r.resource_type, r.requests]));
    expect(types.retriever).toBeGreaterThanOrEqual(11);
    expect(body.by_resource_type.reduce((sum: number, r: { requests: number }) => sum + r.requests, 0)).toBe(body.total_requests);
    expect(body.by_resource_type.reduce((sum: number, r: { credits: number }) => sum + r.credits, 0)).toBeCloseTo(body.total_credits, 3);
    const daily = await get('/v1/analytics/usage/summary?group_by=day', t.adminKey, null);
    expect(daily.series.reduce((sum: number, d: { requests: number }) => sum + d.requests, 0)).toBe(daily.total_requests);
    expect((await api('GET', '/v1/analytics/usage/summary', undefined, readKey, null)).status).toBe(403);
  });

  it('reports the cache: hit rate, entries, memory, TTL and evictions; narrowed to a namespace or a key\'s scopes', async () => {
    const all = await get('/v1/analytics/cache/performance', t.adminKey, null);
    expect(all).toMatchObject({ namespace_id: null, cached_executions: 5, hits: 2, hit_rate: 0.4, avg_ttl_seconds: 60, evictions: 0, expired_entries: 0 });
    expect(all.entries).toBe(3);
    expect(all.memory_bytes).toBeGreaterThan(0);
    expect(all.retrievers.map((r: { cached_executions: number }) => r.cached_executions)).toEqual([4, 1]);

    const shop = await get('/v1/analytics/cache/performance');
    expect(shop).toMatchObject({ cached_executions: 4, hits: 2, entries: 2 });
    expect(shop.retrievers).toHaveLength(1);
    const depotOnly = await get('/v1/analytics/cache/performance', depotOnlyKey, null);
    expect(depotOnly).toMatchObject({ cached_executions: 1, hits: 0, entries: 1 });
    expect((await api('GET', '/v1/analytics/cache/performance', undefined, depotOnlyKey, NS)).status).toBe(403);

    // Past the TTL the entries are expired, then swept: evictions with their reason.
    clock.advance(120_000);
    expect((await get('/v1/analytics/cache/performance', t.adminKey, null)).expired_entries).toBe(3);
    const tasks = t.kernel.services.get(TaskQueue);
    await tasks.enqueue('retrievers.cache_sweep', {});
    await tasks.drain();
    clock.advance(1000);
    const swept = await get('/v1/analytics/cache/performance', t.adminKey, null);
    expect(swept).toMatchObject({ entries: 0, expired_entries: 0, evictions: 3, evictions_by_reason: { expired: 3 } });
    expect(swept.eviction_rate_per_hour).toBeGreaterThan(0);
  });
});
