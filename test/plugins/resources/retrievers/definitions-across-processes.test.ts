/**
 * Two API processes on one PostgreSQL database (TEST_DATABASE_URL): each keeps the definitions an execute
 * reads (the retriever, its collections) in memory instead of reading them on every request, and a change
 * made through one is seen by the other a moment later (kernel/db/pg-notices.ts). With
 * TESSERA_DEFINITION_CACHE off, every execute reads them from the database.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openKernelCore } from '../../../../kernel/app.js';
import { CrossProcessNotices, DatabaseHandle } from '../../../../kernel/tokens.js';
import builtins from '../../../../plugins/index.js';
import { silentLogger } from '../../../support/logs.js';
import { startTestKernel, type TestKernel } from '../../../support/kernel.js';

const NS = 'definitions_shared';

describe.skipIf(!process.env.TEST_DATABASE_URL)('retriever definitions across two API processes on one PostgreSQL database', () => {
  let a: TestKernel;
  let b: TestKernel;
  let uncached: TestKernel;

  const api = (k: TestKernel, method: string, path: string, body?: unknown) =>
    k.request(method, path, { key: a.adminKey, headers: { 'X-Namespace': NS }, ...(body !== undefined ? { body } : {}) });

  /** The statements `k` sends to the definitions' tables while `work` runs. */
  async function definitionReads(k: TestKernel, work: () => Promise<void>): Promise<number> {
    const db = k.kernel.services.get(DatabaseHandle).db;
    let reads = 0;
    const seen = (q: { sql: string }) => void (/from "(retrievers|collections)"/.test(q.sql) && reads++);
    db.on('query', seen);
    try {
      await work();
    } finally {
      db.off('query', seen);
    }
    return reads;
  }

  async function eventually(check: () => Promise<boolean>, what: string): Promise<void> {
    const deadline = Date.now() + 5_000;
    while (!(await check())) {
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }

  beforeAll(async () => {
    a = await startTestKernel({ config: { runTasks: false } });
    b = await startTestKernel({ config: { runTasks: false, databaseUrl: a.config.databaseUrl!, adminKey: a.adminKey } });
    uncached = await startTestKernel({ config: { runTasks: false, databaseUrl: a.config.databaseUrl!, adminKey: a.adminKey, definitionCache: false } });
    await a.client().POST('/v1/namespaces', { body: { namespace_name: NS } });
    expect((await api(a, 'POST', '/v1/buckets', { bucket_name: 'src' })).status).toBe(201);
    expect((await api(a, 'POST', '/v1/collections/create', { collection_name: 'things', source: { type: 'bucket', bucket_id: 'src' } })).status).toBe(201);
    expect((await api(a, 'POST', '/v1/collections/things/documents', { key: 'one', fields: { title: 'one', n: 1 } })).status).toBe(201);
    const created = await api(a, 'POST', '/v1/retrievers', {
      retriever_name: 'shared', collection_identifiers: ['things'],
      stages: [{ stage_name: 'all', config: { stage_id: 'attribute_filter', parameters: { filters: { AND: [{ field: 'n', operator: 'gte', value: 0 }] } } } }],
    });
    expect(created.status, created.text).toBe(201);
  }, 120_000);
  afterAll(async () => {
    await uncached?.stop();
    await b?.stop();
    await a?.stop();
  });

  const execute = async (k: TestKernel, name: string) => {
    const res = await api(k, 'POST', `/v1/retrievers/${name}/execute`, { inputs: {} });
    expect(res.status, res.text).toBe(200);
    return res.body.documents.map((d: { document_id: string }) => d.document_id) as string[];
  };

  it('answers repeated executes without reading the definitions again', async () => {
    await execute(b, 'shared');
    expect(await definitionReads(b, async () => {
      for (let i = 0; i < 5; i++) expect(await execute(b, 'shared')).toHaveLength(1);
    })).toBe(0);
    // The switch: every execute reads them.
    await execute(uncached, 'shared');
    expect(await definitionReads(uncached, async () => {
      for (let i = 0; i < 5; i++) await execute(uncached, 'shared');
    })).toBeGreaterThanOrEqual(10);
  });

  it("sees another process's rename, and its delete, a moment later", async () => {
    await execute(b, 'shared');
    const renamed = await api(a, 'PATCH', '/v1/retrievers/shared', { retriever_name: 'renamed' });
    expect(renamed.status, renamed.text).toBe(200);
    await eventually(async () => (await api(b, 'GET', '/v1/retrievers/renamed')).status === 200, 'the new name at b');
    await eventually(async () => (await api(b, 'POST', '/v1/retrievers/shared/execute', { inputs: {} })).status === 404, 'the old name gone at b');
    expect(await execute(b, 'renamed')).toHaveLength(1);

    expect((await api(a, 'DELETE', '/v1/retrievers/renamed')).status).toBe(200);
    await eventually(async () => (await api(b, 'POST', '/v1/retrievers/renamed/execute', { inputs: {} })).status === 404, 'the delete at b');
  });

  it("sees another process's new collection and retriever at once (nothing cached for them yet)", async () => {
    expect((await api(a, 'POST', '/v1/collections/create', { collection_name: 'later', source: { type: 'bucket', bucket_id: 'src' } })).status).toBe(201);
    const created = await api(a, 'POST', '/v1/retrievers', {
      retriever_name: 'later', collection_identifiers: ['later'],
      stages: [{ stage_name: 'all', config: { stage_id: 'attribute_filter', parameters: { filters: { AND: [{ field: 'n', operator: 'gte', value: 0 }] } } } }],
    });
    expect(created.status, created.text).toBe(201);
    expect(await execute(b, 'later')).toEqual([]);
  });

  it("an operator command's kernel sends its changes' notices but opens no listening connection", async () => {
    const core = await openKernelCore({
      config: { ...a.config, port: 0 },
      plugins: builtins.map((plugin) => ({ plugin, origin: 'test' })),
      overrides: { logger: silentLogger() },
    });
    try {
      const notices = core.services.get(CrossProcessNotices);
      expect(notices.listening).toBe(false);
      expect(a.kernel.services.get(CrossProcessNotices).listening).toBe(true);
      // What it changes still reaches the running processes: b forgets the retriever it holds.
      await execute(b, 'later');
      await core.services.get(DatabaseHandle).db('retrievers').where({ retriever_name: 'later' }).update({ retriever_name: 'later-by-operator' });
      notices.notify('cache:retrievers', null); // what its retriever store sends after a write
      await eventually(async () => (await api(b, 'GET', '/v1/retrievers/later-by-operator')).status === 200, 'the change at b');
    } finally {
      await core.stop();
    }
  });
});
