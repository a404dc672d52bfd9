/**
 * `tessera serve` on the embedded database runs its tasks in a thread beside the HTTP one
 * (kernel/tasks/task-thread.ts): a batch is processed there, its events reach the API thread's bus, and
 * documents it rewrites are forgotten by the API thread's caches before the batch reads as finished; it
 * runs at a lower CPU priority than the API.
 */
import { readlinkSync } from 'node:fs';
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DatabaseHandle, EventBus } from '../../../kernel/tokens.js';
import { startTestKernel, type TestKernel } from '../../support/kernel.js';

const TERMINAL = ['COMPLETED', 'COMPLETED_WITH_ERRORS', 'FAILED', 'CANCELED'];

describe('task thread (embedded database)', () => {
  let t: TestKernel;
  const events: string[] = [];
  let objectId: string;
  let retrieverId: string;

  const api = (method: string, p: string, body?: unknown) =>
    t.request(method, p, { key: t.adminKey, headers: { 'X-Namespace': 'threads' }, ...(body !== undefined ? { body } : {}) });

  async function runBatch(ids = [objectId]): Promise<Record<string, any>> {
    const created = await api('POST', '/v1/buckets/docs/batches', { object_ids: ids });
    expect(created.status).toBe(201);
    expect((await api('POST', `/v1/buckets/docs/batches/${created.body.batch_id}/submit`)).status).toBe(202);
    for (let i = 0; i < 600; i++) {
      const res = await api('GET', `/v1/buckets/docs/batches/${created.body.batch_id}`);
      if (TERMINAL.includes(res.body.status)) return res.body;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    throw new Error('the batch did not finish');
  }

  const search = async (q = 'lighthouse lamps') => {
    const res = await api('POST', `/v1/retrievers/${retrieverId}/execute`, { inputs: { q } });
    expect(res.status).toBe(200);
    return res.body.documents as Array<Record<string, any>>;
  };

  beforeAll(async () => {
    t = await startTestKernel({
      inferencePlugins: [path.resolve(__dirname, '../../../plugins/models/hashed-ngram-text/index.ts')],
      taskThreadPlugins: [path.resolve(__dirname, '../../../plugins/index.ts')],
      config: { inferenceWorkers: 1, batchHealthIntervalMs: 0 },
      // Also in the PostgreSQL + NATS run: the task thread exists only on the embedded database.
      embedded: true,
    });
    t.kernel.services.get(EventBus).subscribe('batch.*', (event) => void events.push(event.type));
    expect((await t.client().POST('/v1/namespaces', { body: { namespace_name: 'threads' } })).response.status).toBe(201);
    expect((await api('POST', '/v1/buckets', { bucket_name: 'docs' })).status).toBe(201);
    const object = await api('POST', '/v1/buckets/docs/objects', {
      key: 'lighthouse.txt',
      blobs: [{ property: 'content', text: 'Lighthouses guide ships along rocky coasts. Their lamps turn all night.' }],
    });
    expect(object.status).toBe(201);
    objectId = object.body.object_id;
    const collection = await api('POST', '/v1/collections/create', {
      collection_name: 'texts',
      source: { type: 'bucket', bucket_id: 'docs' },
      feature_extractors: [{ feature_extractor_name: 'text_extractor' }],
    });
    expect(collection.status).toBe(201);
    const retriever = await api('POST', '/v1/retrievers', {
      retriever_name: 'find',
      collection_identifiers: ['texts'],
      input_schema: { q: { type: 'string', required: true } },
      stages: [
        {
          stage_name: 'search',
          stage_type: 'filter',
          config: { stage_id: 'feature_search', parameters: { searches: [{ feature_uri: 'tessera://text_extractor@1.0/text_embedding', query: { text: '{{inputs.q}}' }, top_k: 5 }] } },
        },
      ],
    });
    expect(retriever.status).toBe(201);
    retrieverId = retriever.body.retriever.retriever_id;
  }, 120_000);

  afterAll(async () => {
    await t?.stop();
  });

  it('processes a batch in the task thread, its events reaching the API thread', async () => {
    const batch = await runBatch();
    expect(batch.status).toBe('COMPLETED');
    const documents = await search();
    expect(documents).toHaveLength(1);
    expect(documents[0]!.payload.fields.text).toMatch(/^Lighthouses/);
    await expect.poll(() => events).toContain('batch.completed');
    // The thread is the one taking tasks: only a worker's heartbeat, no API process runner's.
    const db = t.kernel.services.get(DatabaseHandle).db;
    const roles = ((await db('task_worker_heartbeats').select('role')) as Array<{ role: string }>).map((row) => row.role);
    expect(roles).toEqual(['worker']);
  }, 120_000);

  it.runIf(process.platform === 'linux')('runs batch work at a lower CPU priority than the API (nice 10)', async () => {
    // /proc/self/task: one entry per thread of this process, field 19 of its stat line is the nice value.
    const niceOf = async (task: string) => {
      const stat = await readFile(`/proc/self/task/${task}/stat`, 'utf8').catch(() => '');
      return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[16]);
    };
    const tasks = await readdir('/proc/self/task');
    const nice = await Promise.all(tasks.map(niceOf));
    expect(nice).toContain(10);
    expect(await niceOf(readlinkSync('/proc/thread-self').split('/').pop()!)).toBe(0);
  });

  it('makes the API thread forget a document the task thread rewrote, before the batch reads as finished', async () => {
    const before = await search(); // the API thread now holds the document in its cache
    const written = before[0]!.payload.updated_at as string;
    await search();
    expect((await runBatch()).status).toBe('COMPLETED');
    // Processing the object again rewrites its document (same id, new updated_at), in the task thread.
    const after = await search();
    expect(after).toHaveLength(1);
    expect(after[0]!.document_id).toBe(before[0]!.document_id);
    expect(Date.parse(after[0]!.payload.updated_at as string)).toBeGreaterThan(Date.parse(written));
  }, 120_000);

  it('finds in the API thread the vectors the task thread wrote after the API thread built its graph', async () => {
    expect(await search()).toHaveLength(1); // the API thread's in-process graph holds the one document
    const object = await api('POST', '/v1/buckets/docs/objects', {
      key: 'glacier.txt',
      blobs: [{ property: 'content', text: 'Glaciers carve valleys over thousands of years.' }],
    });
    expect(object.status).toBe(201);
    expect((await runBatch([object.body.object_id])).status).toBe('COMPLETED');
    const found = await search('glaciers carve valleys');
    expect(found.map((d) => d.payload.fields.text as string).sort()).toEqual([
      'Glaciers carve valleys over thousands of years.',
      'Lighthouses guide ships along rocky coasts. Their lamps turn all night.',
    ]);
  }, 120_000);
});
