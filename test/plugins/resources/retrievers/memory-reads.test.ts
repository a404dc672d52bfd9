/**
 * The execute path's reads kept in memory on the embedded default (kernel/db/local-read-cache.ts): the
 * retriever's definition, its collections and the documents a search returns. Every write through the API
 * is seen by the next execute (rename, delete, document write, metadata, delete, grants, collection delete);
 * and on PGlite the memory is shown to be real — a document changed *around* the write paths (straight into
 * the database, which tells no cache) keeps its old fields — while on PostgreSQL (several processes may
 * write) every read goes to the database and sees the change.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DatabaseHandle } from '../../../../kernel/tokens.js';
import { startTestKernel, type TestKernel } from '../../../support/kernel.js';

const NS = 'memreads';
const DIMS = 384;
const FEATURE = 'tessera://text_extractor@1.0/text_embedding';

type Doc = { document_id: string; payload: { fields: { title: string }; metadata: Record<string, unknown> } };
const titles = (body: { documents: Doc[] }) => body.documents.map((d) => d.payload.fields.title).sort();

describe('execute reads kept in memory', () => {
  let t: TestKernel;
  const keys: Record<'alice' | 'bob', string> = {} as never;

  const api = (method: string, path: string, body?: unknown, key = t.adminKey) =>
    t.request(method, path, { key, headers: { 'X-Namespace': NS }, ...(body !== undefined ? { body } : {}) });
  const run = async (name: string, key = t.adminKey) => {
    const res = await api('POST', `/v1/retrievers/${name}/execute`, { inputs: {} }, key);
    expect(res.status, res.text).toBe(200);
    return res.body as { documents: Doc[] };
  };
  const vector = (i: number) => Array.from({ length: DIMS }, (_, d) => (d === i % DIMS ? 1 : 0.1));
  const write = (documents: unknown[], key = t.adminKey) => api('POST', '/v1/collections/items/documents/bulk', { documents }, key);
  const define = (name: string, collection = 'items') =>
    api('POST', '/v1/retrievers', {
      retriever_name: name,
      collection_identifiers: [collection],
      stages: [{ stage_name: 'search', stage_type: 'filter', config: { stage_id: 'feature_search', parameters: { searches: [{ feature_uri: FEATURE, query: { vector: vector(0) }, top_k: 50 }] } } }],
    });
  const onlyWriter = () => t.kernel.services.get(DatabaseHandle).kind === 'pglite';

  beforeAll(async () => {
    t = await startTestKernel({ config: { runTasks: false } });
    await t.client().POST('/v1/namespaces', { body: { namespace_name: NS } });
    await api('POST', '/v1/buckets', { bucket_name: 'src' });
    for (const name of ['items', 'spare']) {
      const created = await api('POST', '/v1/collections/create', {
        collection_name: name, source: { type: 'bucket', bucket_id: 'src' }, feature_extractors: [{ feature_extractor_name: 'text_extractor' }],
      });
      expect(created.status, created.text).toBe(201);
    }
    for (const principal of ['alice', 'bob'] as const) {
      keys[principal] = (await t.request('POST', `/v1/organizations/users/${encodeURIComponent(t.adminEmail)}/api-keys`, {
        key: t.adminKey, body: { name: principal, principal_id: principal, permissions: ['read', 'write', 'delete'] },
      })).body.key;
    }
    const written = await write(['one', 'two', 'three'].map((title, i) => ({ key: title, fields: { title }, vectors: { text_embedding: vector(i) } })));
    expect(written.status, written.text).toBe(200);
    expect((await define('search')).status).toBe(201);
  }, 120_000);
  afterAll(async () => {
    await t?.stop();
  });

  it('serves hits from memory on the embedded database, from the database on a shared one', async () => {
    const before = await run('search');
    expect(titles(before)).toEqual(['one', 'three', 'two']);
    const one = before.documents.find((d) => d.payload.fields.title === 'one')!;
    // Straight into the database: no cache hears of it.
    await t.kernel.services.get(DatabaseHandle).db('documents').where({ document_id: one.document_id }).update({ fields: JSON.stringify({ title: 'one-around' }) });
    const after = await run('search');
    const seen = after.documents.find((d) => d.document_id === one.document_id)!.payload.fields.title;
    expect(seen).toBe(onlyWriter() ? 'one' : 'one-around');
    // A write through the API is seen at once either way (and puts the store and the answer back in step).
    expect((await write([{ key: 'one', fields: { title: 'one' }, vectors: { text_embedding: vector(0) } }])).status).toBe(200);
    expect(titles(await run('search'))).toEqual(['one', 'three', 'two']);
  });

  it('sees every document write, metadata change and delete at the next execute', async () => {
    await run('search');
    expect((await write([{ key: 'two', fields: { title: 'two-v2' }, vectors: { text_embedding: vector(1) } }])).status).toBe(200);
    expect(titles(await run('search'))).toEqual(['one', 'three', 'two-v2']);

    const three = (await run('search')).documents.find((d) => d.payload.fields.title === 'three')!;
    const patched = await api('PATCH', `/v1/collections/items/documents/${three.document_id}`, { metadata: { colour: 'red' } });
    expect(patched.status, patched.text).toBe(200);
    expect((await run('search')).documents.find((d) => d.document_id === three.document_id)!.payload.metadata).toMatchObject({ colour: 'red' });

    expect((await api('DELETE', `/v1/collections/items/documents/${three.document_id}`)).status).toBe(200);
    expect(titles(await run('search'))).toEqual(['one', 'two-v2']);
  });

  it('sees grants given and taken back at the next execute of a user-scoped key', async () => {
    const mine = await write([{ key: 'alice-note', fields: { title: 'alice-note' }, vectors: { text_embedding: vector(2) } }], keys.alice);
    expect(mine.status, mine.text).toBe(200);
    expect(titles(await run('search', keys.alice))).toEqual(['alice-note']);
    expect(titles(await run('search', keys.bob))).toEqual([]);
    const note = (await run('search', keys.alice)).documents[0]!;
    // The document is in memory now (read by alice and the admin key); bob still must not see it.
    await run('search');
    expect(titles(await run('search', keys.bob))).toEqual([]);
    const path = `/v1/collections/items/documents/${note.document_id}/grants`;
    expect((await api('POST', path, { principal_ids: ['bob'] }, keys.alice)).status).toBe(200);
    expect(titles(await run('search', keys.bob))).toEqual(['alice-note']);
    expect((await api('DELETE', `${path}/bob`, undefined, keys.alice)).status).toBe(200);
    expect(titles(await run('search', keys.bob))).toEqual([]);
  });

  it('sees a rename, a metadata change and a delete of the retriever at the next execute', async () => {
    expect((await define('renamed-later')).status).toBe(201);
    await run('renamed-later');
    const renamed = await api('PATCH', '/v1/retrievers/renamed-later', { retriever_name: 'renamed-now', description: 'after' });
    expect(renamed.status, renamed.text).toBe(200);
    expect((await api('POST', '/v1/retrievers/renamed-later/execute', { inputs: {} })).status).toBe(404);
    await run('renamed-now');
    const history = await api('GET', '/v1/retrievers/renamed-now/executions?limit=10');
    expect(history.status, history.text).toBe(200);
    // The execution ran the renamed definition, version 2.
    expect(history.body.results[0].retriever_version).toBe(2);
    expect((await api('DELETE', '/v1/retrievers/renamed-now')).status).toBe(200);
    expect((await api('POST', '/v1/retrievers/renamed-now/execute', { inputs: {} })).status).toBe(404);
  });

  it('answers a search with the documents a read returns, whichever write made them and whatever they hold', async () => {
    const created = await api('POST', '/v1/collections/create', {
      collection_name: 'mirror', source: { type: 'bucket', bucket_id: 'src' }, feature_extractors: [{ feature_extractor_name: 'text_extractor' }],
    });
    expect(created.status, created.text).toBe(201);
    // Keys out of jsonb's order (it keeps shorter keys first), nested metadata, a field too large for the
    // index's payload (the document is then read from the database), a list.
    const written = await api('POST', '/v1/collections/mirror/documents/bulk', { documents: [
      { key: 'ordered', fields: { zeta: 1.5, title: 'ordered', a: true, nothing: null }, metadata: { zz: { b: 1, a: [{ d: 1, c: 2 }] }, y: 'x' }, vectors: { text_embedding: vector(3) } },
      { key: 'large', fields: { title: 'large', body: 'y'.repeat(3000), tags: ['b', 'a'] }, vectors: { text_embedding: vector(4) } },
      { key: 'plain', fields: { title: 'plain' }, vectors: { text_embedding: vector(5) } },
    ] }, keys.alice);
    expect(written.status, written.text).toBe(200);
    expect((await define('mirror', 'mirror')).status).toBe(201);
    const idOf = async (title: string) => (await run('mirror')).documents.find((d) => d.payload.fields.title === title)!.document_id;
    const ordered = await idOf('ordered');
    expect((await api('PATCH', `/v1/collections/mirror/documents/${ordered}`, { metadata: { b: { d: 2, c: 1 }, a: 0 } })).status).toBe(200);
    expect((await api('POST', `/v1/collections/mirror/documents/${await idOf('plain')}/grants`, { principal_ids: ['bob'] }, keys.alice)).status).toBe(200);
    for (const key of [t.adminKey, keys.alice, keys.bob]) {
      const found = await run('mirror', key);
      expect(found.documents.length).toBe(key === keys.bob ? 1 : 3);
      for (const doc of found.documents) {
        const read = await api('GET', `/v1/collections/mirror/documents/${doc.document_id}`, undefined, key);
        expect(read.status, read.text).toBe(200);
        // The same text: same values, same key order, same timestamps to the millisecond.
        expect(JSON.stringify(doc.payload)).toBe(JSON.stringify(read.body));
      }
    }
  });

  it('sees a collection deleted and another made under its name', async () => {
    expect((await define('over-spare', 'spare')).status).toBe(201);
    expect((await api('POST', '/v1/collections/spare/documents/bulk', { documents: [{ key: 's', fields: { title: 'spare-doc' }, vectors: { text_embedding: vector(0) } }] })).status).toBe(200);
    expect(titles(await run('over-spare'))).toEqual(['spare-doc']);
    // Saved retrievers guard the collection; once they are gone it can go, and the name can be reused.
    expect((await api('DELETE', '/v1/retrievers/over-spare')).status).toBe(200);
    expect((await api('DELETE', '/v1/collections/spare')).status).toBe(200);
    const again = await api('POST', '/v1/collections/create', {
      collection_name: 'spare', source: { type: 'bucket', bucket_id: 'src' }, feature_extractors: [{ feature_extractor_name: 'text_extractor' }],
    });
    expect(again.status, again.text).toBe(201);
    expect((await define('over-spare', 'spare')).status).toBe(201);
    expect(titles(await run('over-spare'))).toEqual([]);
  });
});
