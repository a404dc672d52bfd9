import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pino } from 'pino';
import { DatabaseHandle } from '../../../../kernel/tokens.js';
import { Documents } from '../../../../plugins/resources/collections/index.js';
import { ExecutionHistory } from '../../../../plugins/resources/retrievers/execution-history.js';
import type { ExecutionRow, RetrieverStore } from '../../../../plugins/resources/retrievers/store.js';
import { startTestKernel, type TestKernel, organizationMe } from '../../../support/kernel.js';

const NS = 'history';

describe('retriever execution history, written behind the answer', () => {
  let t: TestKernel;

  const api = (method: string, path: string, body?: unknown) => t.request(method, path, { key: t.adminKey, headers: { 'X-Namespace': NS }, ...(body !== undefined ? { body } : {}) });
  const retriever = (name: string) => ({
    retriever_name: name,
    collection_identifiers: ['things'],
    input_schema: { n: { type: 'number', required: true } },
    stages: [{ stage_name: 'filter', config: { stage_id: 'attribute_filter', parameters: { filters: { AND: [{ field: 'n', operator: 'lte', value: '{{inputs.n}}' }] } } } }],
  });
  const executions = async (name: string) => Number((await t.kernel.services.get(DatabaseHandle).db('retriever_executions').join('retrievers', 'retrievers.retriever_id', 'retriever_executions.retriever_id')
    .where('retrievers.retriever_name', name).count({ n: '*' }))[0]!.n);

  beforeAll(async () => {
    t = await startTestKernel({ config: { runTasks: false } });
    const organizationId = organizationMe((await t.client().GET('/v1/me', {})).data).organization.organization_id;
    await t.client().POST('/v1/namespaces', { body: { namespace_name: NS } });
    await api('POST', '/v1/buckets', { bucket_name: 'src' });
    const collection = (await api('POST', '/v1/collections/create', { collection_name: 'things', source: { type: 'bucket', bucket_id: 'src' } })).body;
    for (let i = 0; i < 6; i++) {
      await t.kernel.services.get(Documents).upsert({
        organizationId, namespaceId: collection.namespace_id, collectionId: collection.collection_id, sourceKey: `k${i}`,
        rootObjectId: `obj_${i}`, sourceCollectionId: null, sourceDocumentId: null, processingTier: 0, fields: { n: i },
      });
    }
  }, 120_000);
  afterAll(async () => {
    await t?.stop();
  });

  it('lists and gets every execution answered before, however many ran at once', async () => {
    expect((await api('POST', '/v1/retrievers', retriever('burst'))).status).toBe(201);
    const runs = await Promise.all(Array.from({ length: 12 }, (_, i) => api('POST', '/v1/retrievers/burst/execute', { inputs: { n: i % 6 } })));
    expect(runs.map((r) => r.status)).toEqual(Array(12).fill(200));
    const one = await api('GET', `/v1/retrievers/burst/executions/${runs[11]!.body.execution_id}`);
    expect(one.status).toBe(200);
    expect(one.body.inputs).toEqual({ n: 5 });
    const listed = await api('GET', '/v1/retrievers/burst/executions?limit=100');
    expect(listed.body.total).toBe(12);
    expect(new Set(listed.body.results.map((e: { execution_id: string }) => e.execution_id))).toEqual(new Set(runs.map((r) => r.body.execution_id)));
  });

  it('records interactions on an execution answered a moment before', async () => {
    await api('POST', '/v1/retrievers', retriever('clicked'));
    const run = await api('POST', '/v1/retrievers/clicked/execute', { inputs: { n: 3 } });
    const recorded = await api('POST', '/v1/retrievers/clicked/interactions', {
      execution_id: run.body.execution_id, document_id: run.body.documents[0].document_id, interaction_type: ['click'],
    });
    expect(recorded.status, recorded.text).toBe(200);
  });

  it('pages a cursor at once: the execution it reads back was written before the first page answered', async () => {
    await api('POST', '/v1/retrievers', retriever('paged'));
    const first = await api('POST', '/v1/retrievers/paged/execute', { inputs: { n: 5 }, pagination: { method: 'cursor', page_size: 2 } });
    expect(first.body.pagination.has_next).toBe(true);
    expect(await executions('paged')).toBe(1);
    const second = await api('POST', '/v1/retrievers/paged/execute', { inputs: { n: 5 }, pagination: { method: 'cursor', cursor: first.body.pagination.cursor } });
    expect(second.status, second.text).toBe(200);
    expect(second.body.documents).toHaveLength(2);
  });

  it('gives back a query vector exactly as it was sent (kept packed in the history row), and pages a cursor over it', async () => {
    await api('POST', '/v1/retrievers', {
      ...retriever('vectored'),
      input_schema: { n: { type: 'number', required: true }, probe: { type: 'array', required: false } },
    });
    const probe = Array.from({ length: 384 }, (_, i) => Math.sin(i) / 3 + 1e-17 * i);
    const inputs = { n: 5, probe, nested: { pair: [1, 2], many: [probe.slice(0, 20), 'x'] } };
    const first = await api('POST', '/v1/retrievers/vectored/execute', { inputs, pagination: { method: 'cursor', page_size: 2 } });
    expect(first.status, first.text).toBe(200);
    const second = await api('POST', '/v1/retrievers/vectored/execute', { inputs, pagination: { method: 'cursor', cursor: first.body.pagination.cursor } });
    expect(second.status, second.text).toBe(200);
    expect(second.body.documents).toHaveLength(2);
    const one = await api('GET', `/v1/retrievers/vectored/executions/${first.body.execution_id}`);
    expect(one.body.inputs).toEqual(inputs);
    const stored = await t.kernel.services.get(DatabaseHandle).db('retriever_executions').where({ execution_id: first.body.execution_id }).first();
    expect(String(stored.inputs).length).toBeLessThan(JSON.stringify(inputs).length * 0.6);
  });

  it('deletes a retriever executed a moment before, its history with it', async () => {
    await api('POST', '/v1/retrievers', retriever('gone'));
    expect((await api('POST', '/v1/retrievers/gone/execute', { inputs: { n: 1 } })).status).toBe(200);
    expect((await api('DELETE', '/v1/retrievers/gone')).status).toBe(200);
    const left = Number((await t.kernel.services.get(DatabaseHandle).db('retriever_executions').whereNotIn('retriever_id', t.kernel.services.get(DatabaseHandle).db('retrievers').select('retriever_id')).count({ n: '*' }))[0]!.n);
    expect(left).toBe(0);
    expect(t.logs.filter((line) => line.includes('execution history write failed'))).toEqual([]);
  });
});

describe('ExecutionHistory batches', () => {
  const row = (id: string): ExecutionRow => ({ execution_id: id } as ExecutionRow);
  const fakeStore = (refuse: (id: string) => string | null) => {
    const written: string[] = [];
    const store = {
      async insertExecutions(rows: readonly ExecutionRow[]) {
        const bad = rows.map((r) => refuse(r.execution_id)).find((code) => code !== null);
        if (bad) throw Object.assign(new Error('refused'), { code: bad });
        written.push(...rows.map((r) => r.execution_id));
      },
    } as unknown as RetrieverStore;
    return { store, written };
  };

  it('writes queued records in one insert on flush', async () => {
    const { store, written } = fakeStore(() => null);
    const history = new ExecutionHistory(store, pino({ level: 'silent' }));
    history.record(row('a'));
    history.record(row('b'));
    await history.flush();
    expect(written).toEqual(['a', 'b']);
  });

  it('keeps records queued during a write for the next batch instead of writing them one by one', async () => {
    const batches: string[][] = [];
    let release: () => void = () => undefined;
    const store = {
      async insertExecutions(rows: readonly ExecutionRow[]) {
        batches.push(rows.map((r) => r.execution_id));
        if (batches.length === 1) await new Promise<void>((resolve) => (release = resolve));
      },
    } as unknown as RetrieverStore;
    const history = new ExecutionHistory(store, pino({ level: 'silent' }));
    history.record(row('a'));
    history.record(row('b'));
    const first = history.flush();
    await Promise.resolve();
    // The first insert is still running: these arrive meanwhile.
    history.record(row('c'));
    history.record(row('d'));
    release();
    await first;
    expect(batches).toEqual([['a', 'b']]);
    history.record(row('e'));
    await history.flush();
    expect(batches).toEqual([['a', 'b'], ['c', 'd', 'e']]);
  });

  it('drops only a record whose retriever is gone, and keeps refused ones for the next flush', async () => {
    let down = true;
    const { store, written } = fakeStore((id) => (id === 'orphan' ? '23503' : (id === 'late' || id === 'cursor') && down ? '08006' : null));
    const history = new ExecutionHistory(store, pino({ level: 'silent' }));
    history.record(row('a'));
    history.record(row('orphan'));
    history.record(row('late'));
    await history.flush();
    expect(written).toEqual(['a']);
    await expect(history.recordNow(row('cursor'))).rejects.toThrow(/could not record execution cursor/);
    down = false;
    await history.flush();
    expect(written).toEqual(['a', 'late', 'cursor']);
  });
});
