/**
 * Execution features of saved and ad hoc retrievers, through HTTP: Server-Sent Events (event order, a
 * failing stage, the Accept form, errors before the stream, a client hanging up), cursor and keyset
 * pagination under concurrent writes (and cursors that are not the caller's), `settings.limit`, and presigned
 * download URLs for the blobs documents reference.
 */
import { setImmediate as nextTurn } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { artifactPrefix } from '../../../../kernel/blobs/artifacts.js';
import { ManualClock } from '../../../../kernel/clock.js';
import { InputError } from '../../../../kernel/errors.js';
import { PageCursors } from '../../../../kernel/retrieval/page-cursors.js';
import { keysetStart } from '../../../../kernel/retrieval/pagination.js';
import { BlobStore } from '../../../../kernel/tokens.js';
import builtins from '../../../../plugins/index.js';
import { Documents } from '../../../../plugins/resources/collections/index.js';
import { startTestKernel, type TestKernel, organizationMe } from '../../../support/kernel.js';
import { counterStage, gateStage, stageGate } from '../../../support/plugins/gate-stage.js';

const NS = 'streams';

interface StreamEvent {
  event_type: string;
  execution_id: string;
  stage_name: string | null;
  stage_index: number | null;
  total_stages: number;
  statistics?: { input_count?: number; output_count?: number; duration_ms?: number };
  documents?: Array<{ document_id: string; payload: { fields: Record<string, unknown> } }>;
  status?: string;
  error?: string | null;
  pagination?: Record<string, unknown>;
}

/** The `data:` lines of an event stream, parsed; the closing `[DONE]` stays a string. */
function eventsOf(text: string): Array<StreamEvent | '[DONE]'> {
  return text
    .split('\n\n')
    .filter((block) => block.trim() !== '')
    .map((block) => {
      expect(block.startsWith('data: ')).toBe(true);
      const data = block.slice('data: '.length);
      return data === '[DONE]' ? '[DONE]' : (JSON.parse(data) as StreamEvent);
    });
}

describe('retriever execution: streaming, cursor and keyset pages, presigned URLs', () => {
  let t: TestKernel;
  let organizationId: string;
  let collection: { collection_id: string; namespace_id: string };
  let aliceKey: string;

  const api = (method: string, path: string, body?: unknown, options: { key?: string; headers?: Record<string, string> } = {}) =>
    t.request(method, path, { key: options.key ?? t.adminKey, headers: { 'X-Namespace': NS, ...options.headers }, ...(body !== undefined ? { body } : {}) });

  const titles = (docs: Array<{ payload: { fields: Record<string, unknown> } }>) => docs.map((d) => d.payload.fields.title as string);
  const filterStage = (category: string) => ({
    stage_name: 'filter', config: { stage_id: 'attribute_filter', parameters: { filters: { AND: [{ field: 'category', operator: 'eq', value: category }] } } },
  });
  const sortStage = { stage_name: 'sort', config: { stage_id: 'sort_attribute', parameters: { field: 'price', direction: 'asc' } } };
  const failingSearch = {
    stage_name: 'search',
    config: { stage_id: 'feature_search', parameters: { searches: [{ feature_uri: 'tessera://text_extractor@1.0/text_embedding', query: { text: 'lamp' } }] } },
  };
  const addDocument = async (title: string, category: string, price: number) => {
    const res = await api('POST', '/v1/collections/products/documents', { key: title, fields: { title, category, price } });
    expect(res.status, res.text).toBe(201);
    return res.body.document_id as string;
  };

  beforeAll(async () => {
    t = await startTestKernel({ config: { runTasks: false }, plugins: [...builtins, gateStage, counterStage] });
    organizationId = organizationMe((await t.client().GET('/v1/me', {})).data).organization.organization_id;
    await t.client().POST('/v1/namespaces', { body: { namespace_name: NS } });
    await api('POST', '/v1/buckets', { bucket_name: 'src' });
    collection = (await api('POST', '/v1/collections/create', { collection_name: 'products', source: { type: 'bucket', bucket_id: 'src' } })).body;
    for (let i = 1; i <= 9; i++) await addDocument(`lamp-${i}`, 'lamps', i * 10);
    await addDocument('chair-1', 'chairs', 15);
    const created = await api('POST', '/v1/retrievers', {
      retriever_name: 'lamps', collection_identifiers: ['products'],
      input_schema: { category: { type: 'string', required: true } },
      stages: [{ ...filterStage('{{inputs.category}}') }, sortStage],
    });
    expect(created.status, created.text).toBe(201);
    aliceKey = (await t.request('POST', `/v1/organizations/users/${t.adminEmail}/api-keys`, {
      key: t.adminKey, body: { name: 'alice', principal_id: 'alice', permissions: ['read'] },
    })).body.key;
  }, 120_000);
  afterAll(async () => {
    await t?.stop();
  });

  describe('streaming', () => {
    it('streams each stage as it starts and ends, then the result, closed by [DONE]; the execution is in the history', async () => {
      const res = await api('POST', '/v1/retrievers/lamps/execute', { inputs: { category: 'lamps' }, stream: true, pagination: { limit: 3 } });
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
      expect(res.headers.get('cache-control')).toBe('no-cache');
      const events = eventsOf(res.text);
      expect(events.at(-1)).toBe('[DONE]');
      const typed = events.slice(0, -1) as StreamEvent[];
      expect(typed.map((e) => [e.event_type, e.stage_name, e.stage_index])).toEqual([
        ['stage_start', 'filter', 0], ['stage_complete', 'filter', 0], ['stage_start', 'sort', 1], ['stage_complete', 'sort', 1], ['execution_complete', null, null],
      ]);
      const executionId = typed[0]!.execution_id;
      expect(executionId).toMatch(/^exec_/);
      expect(typed.every((e) => e.execution_id === executionId && e.total_stages === 2)).toBe(true);
      expect(typed[1]!.statistics).toMatchObject({ input_count: 0, output_count: 9, duration_ms: expect.any(Number) });
      expect(typed[2]!.statistics).toEqual({ input_count: 9 });
      expect(typed[3]!.statistics).toMatchObject({ input_count: 9, output_count: 9 });
      const done = typed[4]!;
      expect(done).toMatchObject({ status: 'completed', error: null, pagination: { method: 'offset', total: 9, limit: 3, has_next: true } });
      expect(titles(done.documents!)).toEqual(['lamp-1', 'lamp-2', 'lamp-3']);
      const recorded = await api('GET', `/v1/retrievers/lamps/executions/${executionId}`);
      expect(recorded.status).toBe(200);
      expect(recorded.body).toMatchObject({ status: 'completed', total_results: 9 });
    });

    it('answers events to Accept: text/event-stream (ad hoc, marked anonymous)', async () => {
      const res = await api('POST', '/v1/retrievers/execute', { collection_identifiers: ['products'], input_schema: {}, inputs: {}, stages: [filterStage('chairs')] }, {
        headers: { Accept: 'text/event-stream' },
      });
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
      expect(res.headers.get('x-execution-mode')).toBe('anonymous');
      const events = eventsOf(res.text);
      expect(events.map((e) => (e === '[DONE]' ? e : e.event_type))).toEqual(['stage_start', 'stage_complete', 'execution_complete', '[DONE]']);
      expect(titles((events[2] as StreamEvent).documents!)).toEqual(['chair-1']);
    });

    it('reports a failing stage as stage_error, then execution_error, and skips the rest', async () => {
      // optimize: false — the optimizer would fold the first filter into the search, and this checks every written stage's events.
      const res = await api('POST', '/v1/retrievers/execute', {
        collection_identifiers: ['products'], input_schema: {}, inputs: {}, stream: true, optimize: false, stages: [filterStage('lamps'), failingSearch, sortStage],
      });
      expect(res.status).toBe(200);
      const events = eventsOf(res.text);
      expect(events.map((e) => (e === '[DONE]' ? e : `${e.event_type}:${e.stage_name ?? ''}`))).toEqual([
        'stage_start:filter', 'stage_complete:filter', 'stage_start:search', 'stage_error:search', 'execution_error:', '[DONE]',
      ]);
      const stageError = events[3] as StreamEvent;
      expect(stageError.error).toContain('indexes');
      expect(events[4]).toMatchObject({ status: 'failed', error: expect.stringMatching(/^Stage 'search' \(feature_search\) failed/), documents: [] });
    });

    it('answers problems found before the run as ordinary JSON errors', async () => {
      const missing = await api('POST', '/v1/retrievers/lamps/execute', { inputs: {}, stream: true });
      expect(missing.status).toBe(422);
      expect(missing.headers.get('content-type')).toMatch(/^application\/json/);
      expect(missing.body.detail[0].loc).toEqual(['body', 'inputs', 'category']);
      const unknown = await api('POST', '/v1/retrievers/nope/execute', { inputs: {} }, { headers: { Accept: 'text/event-stream' } });
      expect(unknown.status).toBe(404);
      expect(unknown.body).toMatchObject({ success: false, error: { type: 'NotFoundError' } });
    });

    it('stops the run when the client hangs up mid-stream, and keeps serving', async () => {
      stageGate.reset();
      const client = new AbortController();
      const res = await fetch(`${t.url}/v1/retrievers/execute`, {
        method: 'POST',
        signal: client.signal,
        headers: { Authorization: `Bearer ${t.adminKey}`, 'X-Namespace': NS, 'Content-Type': 'application/json' },
        body: JSON.stringify({
          collection_identifiers: ['products'], input_schema: {}, inputs: {}, stream: true,
          stages: [filterStage('lamps'), { stage_name: 'gate', config: { stage_id: 'test_gate', parameters: {} } }, { stage_name: 'count', config: { stage_id: 'test_counter', parameters: {} } }],
        }),
      });
      expect(res.status).toBe(200);
      const reader = res.body!.getReader();
      let seen = '';
      // Read until the gate stage has started (its stage_start event arrived while it waits).
      while (!seen.includes('"stage_name":"gate"')) {
        const { value, done } = await reader.read();
        expect(done).toBe(false);
        seen += Buffer.from(value!).toString('utf8');
      }
      await stageGate.entered;
      client.abort();
      // The server notices the closed connection and aborts the execution: the waiting stage sees it.
      expect(await stageGate.ended).toBe('aborted');
      await nextTurn();
      stageGate.open();
      await nextTurn();
      expect(stageGate.counted).toBe(0);
      expect((await t.request('GET', '/v1/health')).status).toBe(200);
      const chairs = await api('POST', '/v1/retrievers/execute', { collection_identifiers: ['products'], input_schema: {}, inputs: {}, stages: [filterStage('chairs')] });
      expect(titles(chairs.body.documents)).toEqual(['chair-1']);
      expect(t.logs.filter((line) => line.includes('"level":50'))).toEqual([]);
    });
    it('records a saved retriever\'s execution the client hung up on, as stopped where it left', async () => {
      stageGate.reset();
      const created = await api('POST', '/v1/retrievers', {
        retriever_name: 'gated', collection_identifiers: ['products'],
        stages: [filterStage('lamps'), { stage_name: 'gate', config: { stage_id: 'test_gate', parameters: {} } }, { stage_name: 'count', config: { stage_id: 'test_counter', parameters: {} } }],
      });
      expect(created.status, created.text).toBe(201);
      const client = new AbortController();
      const res = await fetch(`${t.url}/v1/retrievers/gated/execute`, {
        method: 'POST',
        signal: client.signal,
        headers: { Authorization: `Bearer ${t.adminKey}`, 'X-Namespace': NS, 'Content-Type': 'application/json' },
        body: JSON.stringify({ inputs: {}, stream: true }),
      });
      expect(res.status).toBe(200);
      const reader = res.body!.getReader();
      let seen = '';
      while (!seen.includes('"stage_name":"gate"')) {
        const { value, done } = await reader.read();
        expect(done).toBe(false);
        seen += Buffer.from(value!).toString('utf8');
      }
      const executionId = /"execution_id":"(exec_[A-Za-z0-9]+)"/.exec(seen)![1]!;
      await stageGate.entered;
      client.abort();
      expect(await stageGate.ended).toBe('aborted');
      stageGate.open();
      // The record is written behind the answer: wait for it.
      let recorded: { status: number; body: Record<string, unknown> } = { status: 0, body: {} };
      for (let i = 0; i < 100 && recorded.status !== 200; i++) {
        recorded = await api('GET', `/v1/retrievers/gated/executions/${executionId}`);
        if (recorded.status !== 200) await new Promise((r) => setTimeout(r, 50));
      }
      expect(recorded.status).toBe(200);
      expect(recorded.body).toMatchObject({ status: 'failed', error: "Stopped before stage 'count': the client closed the connection" });
      const stages = (recorded.body.stage_statistics as { stages: Record<string, { status: string }> }).stages;
      // The gate stage saw the abort and returned; the stage after it never ran.
      expect(stages.filter!.status).toBe('completed');
      expect(stages.gate!.status).toBe('completed');
      expect(stages.count!.status).toBe('skipped');
      expect(stageGate.counted).toBe(0);
      expect(t.logs.filter((line) => line.includes('"level":50'))).toEqual([]);
    });
  });

  describe('pagination', () => {
    it('takes settings.limit as the page size', async () => {
      const res = await api('POST', '/v1/retrievers/lamps/execute', { inputs: { category: 'lamps' }, settings: { limit: 4 } });
      expect(res.body.pagination).toMatchObject({ method: 'offset', limit: 4, total: 9, has_next: true });
      expect(res.body.documents).toHaveLength(4);
    });

    it('cursor pages come from the first execution\'s recorded ranking: writes in between never duplicate or skip a document', async () => {
      const before = (await api('GET', '/v1/retrievers/lamps/executions')).body.total as number;
      const first = await api('POST', '/v1/retrievers/lamps/execute', { inputs: { category: 'lamps' }, pagination: { method: 'cursor', page_size: 3 } });
      expect(first.status, first.text).toBe(200);
      expect(first.body.pagination).toEqual({ method: 'cursor', cursor: expect.any(String), has_next: true, page_size: 3 });
      const seen = titles(first.body.documents);
      expect(seen).toEqual(['lamp-1', 'lamp-2', 'lamp-3']);

      // Between pages: a document of the next page is deleted, and a new one that would rank first is added.
      const ids = new Map((await api('POST', '/v1/retrievers/lamps/execute', { inputs: { category: 'lamps' }, pagination: { limit: 100 } })).body.documents
        .map((d: { document_id: string; payload: { fields: { title: string } } }) => [d.payload.fields.title, d.document_id]));
      expect((await api('DELETE', `/v1/collections/products/documents/${ids.get('lamp-5')}`)).status).toBe(200);
      const added = await addDocument('lamp-0', 'lamps', 1);

      let cursor: string | null = first.body.pagination.cursor;
      while (cursor) {
        const page = await api('POST', '/v1/retrievers/lamps/execute', { inputs: { category: 'lamps' }, pagination: { method: 'cursor', cursor } });
        expect(page.status, page.text).toBe(200);
        expect(page.body.execution_id).toBe(first.body.execution_id);
        seen.push(...titles(page.body.documents));
        cursor = page.body.pagination.cursor;
        expect(page.body.pagination.has_next).toBe(cursor !== null);
      }
      expect(seen).toEqual(['lamp-1', 'lamp-2', 'lamp-3', 'lamp-4', 'lamp-6', 'lamp-7', 'lamp-8', 'lamp-9']);
      // Later pages ran nothing: only the first page (and the id lookup above) were executions.
      expect((await api('GET', '/v1/retrievers/lamps/executions')).body.total).toBe(before + 2);
      await api('DELETE', `/v1/collections/products/documents/${added}`);
      await addDocument('lamp-5', 'lamps', 50);
    });

    it('refuses a cursor of other inputs, another retriever, another principal, or altered, with a 400 that says so', async () => {
      await api('POST', '/v1/retrievers', {
        retriever_name: 'lamps-2', collection_identifiers: ['products'], input_schema: { category: { type: 'string', required: true } }, stages: [filterStage('{{inputs.category}}'), sortStage],
      });
      const first = await api('POST', '/v1/retrievers/lamps/execute', { inputs: { category: 'lamps' }, pagination: { method: 'cursor', page_size: 2 } });
      const cursor = first.body.pagination.cursor as string;
      const refusals = [
        await api('POST', '/v1/retrievers/lamps/execute', { inputs: { category: 'chairs' }, pagination: { method: 'cursor', cursor } }),
        await api('POST', '/v1/retrievers/lamps-2/execute', { inputs: { category: 'lamps' }, pagination: { method: 'cursor', cursor } }),
        await api('POST', '/v1/retrievers/lamps/execute', { inputs: { category: 'lamps' }, pagination: { method: 'cursor', cursor } }, { key: aliceKey }),
        await api('POST', '/v1/retrievers/lamps/execute', { inputs: { category: 'lamps' }, pagination: { method: 'cursor', cursor: `${cursor.slice(0, -2)}${cursor.endsWith('AA') ? 'BB' : 'AA'}` } }),
        await api('POST', '/v1/retrievers/lamps/execute', { inputs: { category: 'lamps' }, pagination: { method: 'keyset', cursor } }),
        await api('POST', '/v1/retrievers/lamps/execute', { inputs: { category: 'lamps' }, pagination: { method: 'cursor', cursor: 'not-a-cursor' } }),
      ];
      for (const res of refusals) {
        expect(res.status, res.text).toBe(400);
        expect(res.body).toMatchObject({ success: false, status: 400, error: { type: 'InputError', message: expect.stringContaining('cursor') } });
      }
      expect(refusals[0]!.body.error.message).toContain('not issued for this retriever, API key principal and inputs');
      const adHoc = await api('POST', '/v1/retrievers/execute', { collection_identifiers: ['products'], input_schema: {}, inputs: {}, stages: [sortStage], pagination: { method: 'cursor' } });
      expect(adHoc.status).toBe(422);
      expect(adHoc.body.detail[0]).toMatchObject({ loc: ['body', 'pagination', 'method'], msg: expect.stringContaining('keyset') });
    });

    it('keyset pages re-run the pipeline and continue after the previous page, even when its last document is deleted', async () => {
      const body = (cursor?: string) => ({
        collection_identifiers: ['products'], input_schema: {}, inputs: {}, stages: [filterStage('lamps'), sortStage], pagination: { method: 'keyset', limit: 3, ...(cursor ? { cursor } : {}) },
      });
      const first = await api('POST', '/v1/retrievers/execute', body());
      expect(first.status, first.text).toBe(200);
      expect(first.body.pagination).toEqual({ method: 'keyset', next_cursor: expect.any(String), has_next: true });
      expect(titles(first.body.documents)).toEqual(['lamp-1', 'lamp-2', 'lamp-3']);
      // The page's last document goes; a new one ranking after the key appears (keyset results are live).
      expect((await api('DELETE', `/v1/collections/products/documents/${first.body.documents[2].document_id}`)).status).toBe(200);
      const added = await addDocument('lamp-4b', 'lamps', 45);
      const second = await api('POST', '/v1/retrievers/execute', body(first.body.pagination.next_cursor));
      expect(second.status, second.text).toBe(200);
      expect(titles(second.body.documents)).toEqual(['lamp-4', 'lamp-4b', 'lamp-5']);
      const third = await api('POST', '/v1/retrievers/execute', body(second.body.pagination.next_cursor));
      expect(titles(third.body.documents)).toEqual(['lamp-6', 'lamp-7', 'lamp-8']);
      const last = await api('POST', '/v1/retrievers/execute', body(third.body.pagination.next_cursor));
      expect(titles(last.body.documents)).toEqual(['lamp-9']);
      expect(last.body.pagination).toEqual({ method: 'keyset', next_cursor: null, has_next: false });
      // A keyset cursor is bound to its pipeline: another ad hoc pipeline cannot use it.
      const other = await api('POST', '/v1/retrievers/execute', { ...body(first.body.pagination.next_cursor), stages: [filterStage('lamps')] });
      expect(other.status).toBe(400);
      await api('DELETE', `/v1/collections/products/documents/${added}`);
      await addDocument('lamp-3', 'lamps', 30);
    });

    it('pages a saved retriever by keyset, and streams a recorded cursor page as one execution_complete event', async () => {
      const first = await api('POST', '/v1/retrievers/lamps/execute', { inputs: { category: 'lamps' }, pagination: { method: 'keyset', page_size: 5 } });
      expect(titles(first.body.documents)).toEqual(['lamp-1', 'lamp-2', 'lamp-3', 'lamp-4', 'lamp-5']);
      const second = await api('POST', '/v1/retrievers/lamps/execute', { inputs: { category: 'lamps' }, pagination: { method: 'keyset', cursor: first.body.pagination.next_cursor } });
      expect(titles(second.body.documents)).toEqual(['lamp-6', 'lamp-7', 'lamp-8', 'lamp-9']);
      expect(second.body.pagination).toEqual({ method: 'keyset', next_cursor: null, has_next: false });

      const snapshot = await api('POST', '/v1/retrievers/lamps/execute', { inputs: { category: 'lamps' }, pagination: { method: 'cursor', page_size: 7 } });
      const streamed = await api('POST', '/v1/retrievers/lamps/execute', { inputs: { category: 'lamps' }, stream: true, pagination: { method: 'cursor', cursor: snapshot.body.pagination.cursor } });
      const events = eventsOf(streamed.text);
      expect(events.map((e) => (e === '[DONE]' ? e : e.event_type))).toEqual(['execution_complete', '[DONE]']);
      expect(events[0]).toMatchObject({ execution_id: snapshot.body.execution_id, pagination: { method: 'cursor', cursor: null, has_next: false, page_size: 7 } });
      expect(titles((events[0] as StreamEvent).documents!)).toEqual(['lamp-8', 'lamp-9']);
    });

    it('places a keyset page by (score, document_id) when every remembered document is gone, and expires cursors', () => {
      const docs = [
        { document_id: 'doc_a', score: 0.9 }, { document_id: 'doc_c', score: 0.7 }, { document_id: 'doc_b', score: 0.7 }, { document_id: 'doc_d', score: 0.5 },
      ].sort((x, y) => y.score - x.score || x.document_id.localeCompare(y.document_id));
      expect(keysetStart(docs, { ids: ['doc_x'], document_id: 'doc_x', score: 0.8, served: 1 })).toBe(1);
      expect(keysetStart(docs, { ids: ['doc_bb'], document_id: 'doc_bb', score: 0.7, served: 2 })).toBe(2);
      expect(keysetStart(docs, { ids: ['doc_c', 'doc_gone'], document_id: 'doc_gone', score: 0.1, served: 2 })).toBe(3);
      expect(keysetStart(docs, { ids: ['doc_gone'], document_id: 'doc_gone', score: null, served: 2 })).toBe(2);

      const clock = new ManualClock(new Date('2026-01-01T00:00:00Z'));
      const cursors = new PageCursors(Buffer.from('secret'), clock, 60);
      const binding = { organizationId: 'org_a', namespaceId: 'ns_a', retriever: 'ret_a', principalId: null, inputs: { q: 1 } };
      const raw = cursors.issueSnapshot(binding, { executionId: 'exec_x', offset: 4, pageSize: 2 });
      expect(cursors.readSnapshot(raw, { ...binding, inputs: { q: 1 } })).toEqual({ executionId: 'exec_x', offset: 4, pageSize: 2 });
      expect(() => cursors.readSnapshot(raw, { ...binding, principalId: 'p' })).toThrow(InputError);
      clock.advance(61_000);
      expect(() => cursors.readSnapshot(raw, binding)).toThrow(/expired/);
    });
  });

  describe('presigned URLs', () => {
    it('gives each blob a returned document references a fresh URL that downloads its bytes, only for blobs of the namespace', async () => {
      const blobs = t.kernel.services.get(BlobStore);
      const bytes = Buffer.from('a tiny jpeg thumbnail, as image_extractor saves one');
      const key = `${artifactPrefix(organizationId, collection.collection_id)}obj_thumb/thumbnail.jpg`;
      const info = await blobs.put(key, bytes, { contentType: 'image/jpeg' });
      const thumbnail = { storage_key: key, content_type: 'image/jpeg', size_bytes: info.size };
      await t.kernel.services.get(Documents).upsert({
        organizationId, namespaceId: collection.namespace_id, collectionId: collection.collection_id, sourceKey: 'thumb', rootObjectId: 'obj_thumb',
        sourceCollectionId: null, sourceDocumentId: null, processingTier: 0,
        fields: {
          title: 'photo', category: 'photos', price: 1, thumbnail,
          // A hand-written reference to a blob outside the namespace is never signed.
          forged: { storage_key: 'org_other/ns_other/bkt/secret', content_type: 'text/plain', size_bytes: 3 },
          // A key in the namespace that no blob store accepts: no URL, and the execution still answers.
          odd: { storage_key: `${organizationId}/${collection.namespace_id}/a\\b`, content_type: 'text/plain', size_bytes: 3 },
        },
      });
      const stages = [filterStage('photos')];
      const plain = await api('POST', '/v1/retrievers/execute', { collection_identifiers: ['products'], input_schema: {}, inputs: {}, stages });
      expect(plain.body.documents[0].payload.fields.thumbnail).toEqual(thumbnail);

      for (const [path, body] of [
        ['/v1/retrievers/execute', { collection_identifiers: ['products'], input_schema: {}, inputs: {}, stages, return_presigned_urls: true }],
        ['/v1/retrievers/execute?return_presigned_urls=true', { collection_identifiers: ['products'], input_schema: {}, inputs: {}, stages }],
      ] as const) {
        const res = await api('POST', path, body);
        expect(res.status, res.text).toBe(200);
        const fields = res.body.documents[0].payload.fields;
        expect(fields.thumbnail).toMatchObject({ ...thumbnail, url: expect.stringMatching(/^http/), url_expires_at: expect.any(String) });
        expect(fields.forged.url).toBeUndefined();
        expect(fields.odd.url).toBeUndefined();
        const download = await fetch(fields.thumbnail.url);
        expect(download.status).toBe(200);
        expect(Buffer.from(await download.arrayBuffer()).equals(bytes)).toBe(true);
      }
    });
  });
});
