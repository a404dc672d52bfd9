/**
 * What an instantiation refuses, and that a refused or failed one leaves nothing behind: sources past the
 * clone limits (a 400 naming the limit), and a failure after the vectors and files were already copied.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import builtins from '../../../../plugins/index.js';
import defaultTemplates, { namespaceTemplates } from '../../../../plugins/resources/namespace-templates/index.js';
import { DEFAULT_CLONE_LIMITS } from '../../../../plugins/resources/namespace-templates/limits.js';
import { BlobStore, DatabaseHandle, TextIndex, VectorIndex } from '../../../../kernel/tokens.js';
import { startTestKernel, type TestKernel } from '../../../support/kernel.js';
import { apiOf, populate } from './support.js';

describe('namespace template limits and failures', () => {
  let t: TestKernel;
  let api: ReturnType<typeof apiOf>;
  const counts = async () => {
    const db = t.kernel.services.get(DatabaseHandle).db;
    const out: Record<string, number> = {};
    for (const table of ['namespaces', 'buckets', 'collections', 'documents', 'retrievers', 'text_documents']) {
      out[table] = Number((await db(table).count('* as n'))[0]!.n);
    }
    let blobs = 0;
    for await (const _ of t.kernel.services.get(BlobStore).list('')) blobs += 1;
    out.blobs = blobs;
    return out;
  };

  beforeAll(async () => {
    const plugins = builtins.map((plugin) => (plugin === defaultTemplates ? namespaceTemplates({ ...DEFAULT_CLONE_LIMITS, documents: 10, retrievers: 2 }) : plugin));
    t = await startTestKernel({ plugins, config: { runTasks: false } });
    api = apiOf(t);
    await populate(t, 'source');
    expect((await api('POST', '/v1/namespaces/templates', undefined, { template_name: 'tpl', source_namespace: 'source' })).status).toBe(201);
  }, 120_000);
  afterAll(async () => {
    await t?.stop();
  });

  it('refuses a source past a limit with a 400 naming it, at instantiation and when a template is made', async () => {
    const before = await counts();
    expect((await api('POST', '/v1/collections/c/documents', 'source', { key: 'one-more', fields: { text: 'x' } })).status).toBe(201);
    const refused = await api('POST', '/v1/namespaces/templates/tpl/instantiate', undefined, { namespace_name: 'too-big' });
    expect(refused.status, refused.text).toBe(400);
    expect(refused.body.error.message).toMatch(/11 documents, the limit is 10/);
    expect(refused.body.error.details).toMatchObject({ limit: 'documents', value: 11, max: 10 });
    expect((await api('POST', '/v1/namespaces/templates', undefined, { template_name: 'tpl2', source_namespace: 'source' })).status).toBe(400);
    const after = await counts();
    expect(after).toEqual({ ...before, documents: before.documents! + 1 });
    expect((await api('GET', '/v1/namespaces/too-big')).status).toBe(404);
    const list = await api('GET', '/v1/collections/c/documents?limit=20', 'source');
    const extra = list.body.results.find((d: { key: string }) => d.key === 'one-more');
    expect((await api('DELETE', `/v1/collections/c/documents/${extra.document_id}`, 'source')).status).toBe(200);
  });

  it('leaves nothing behind when the copy fails after its vectors and files were written', async () => {
    const before = await counts();
    const vectors = t.kernel.services.get(VectorIndex);
    const made: string[] = [];
    const ensureIndex = vectors.ensureIndex.bind(vectors);
    vectors.ensureIndex = async (spec) => {
      made.push(spec.name);
      return ensureIndex(spec);
    };
    // The text index is written last, inside the rows' transaction: failing there undoes everything.
    const text = t.kernel.services.get(TextIndex);
    const index = text.index.bind(text);
    text.index = async () => {
      throw new Error('disk full');
    };
    try {
      const failed = await api('POST', '/v1/namespaces/templates/tpl/instantiate', undefined, { namespace_name: 'half-made' });
      expect(failed.status).toBe(500);
    } finally {
      text.index = index;
      vectors.ensureIndex = ensureIndex;
    }
    expect(made.length).toBeGreaterThan(0);
    for (const name of made) await expect(vectors.count(name)).rejects.toThrow(/not found/);
    expect(await counts()).toEqual(before);
    expect((await api('GET', '/v1/namespaces/half-made')).status).toBe(404);

    // And the same instantiation then succeeds.
    const ok = await api('POST', '/v1/namespaces/templates/tpl/instantiate', undefined, { namespace_name: 'half-made' });
    expect(ok.status, ok.text).toBe(201);
    expect(ok.body.copied).toMatchObject({ documents: 10, vectors: 5, files: 5 });
  });
});
