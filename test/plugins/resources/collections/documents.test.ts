import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Documents } from '../../../../plugins/resources/collections/index.js';
import { startTestKernel, type TestKernel, organizationMe } from '../../../support/kernel.js';

describe('documents', () => {
  let t: TestKernel;
  let collection: { collection_id: string; namespace_id: string; organization_id?: string };
  let organizationId: string;

  const api = (method: string, path: string, body?: unknown, key = t.adminKey) =>
    t.request(method, path, { key, headers: { 'X-Namespace': 'docs' }, ...(body !== undefined ? { body } : {}) });

  async function write(sourceKey: string, fields: Record<string, unknown>, extra: Record<string, unknown> = {}) {
    return t.kernel.services.get(Documents).upsert({
      organizationId,
      namespaceId: collection.namespace_id,
      collectionId: collection.collection_id,
      sourceKey,
      rootObjectId: 'obj_root',
      sourceCollectionId: null,
      sourceDocumentId: null,
      processingTier: 0,
      fields,
      ...extra,
    });
  }

  beforeAll(async () => {
    t = await startTestKernel();
    organizationId = organizationMe((await t.client().GET('/v1/me', {})).data).organization.organization_id;
    await t.client().POST('/v1/namespaces', { body: { namespace_name: 'docs' } });
    await api('POST', '/v1/buckets', { bucket_name: 'src' });
    collection = (await api('POST', '/v1/collections/create', { collection_name: 'pages', source: { type: 'bucket', bucket_id: 'src' } })).body;
    for (let i = 0; i < 6; i++) {
      await write(`obj_root:page:${i}`, { page: i, topic: i % 2 === 0 ? 'Lamps' : 'chairs' }, i === 5 ? { ownerPrincipal: 'alice' } : {});
    }
  });
  afterAll(async () => {
    await t.stop();
  });

  it('writes idempotently by source key and keeps the collection count', async () => {
    const again = await write('obj_root:page:0', { page: 0, topic: 'Lamps', revised: true });
    const first = (await api('POST', '/v1/collections/pages/documents/list', { filters: { AND: [{ field: 'page', operator: 'eq', value: 0 }] } })).body;
    expect(first.results).toHaveLength(1);
    expect(first.results[0]).toMatchObject({ document_id: again.document_id, fields: { revised: true } });
    expect((await api('GET', '/v1/collections/pages')).body.document_count).toBe(6);
  });

  it('lists with filters on fields, sort and cursor pagination', async () => {
    const lamps = await api('POST', '/v1/collections/pages/documents/list', {
      filters: { AND: [{ field: 'topic', operator: 'eq', value: 'lamps' }] },
      sort: { field: 'created_at', direction: 'asc' },
    });
    expect(lamps.body.results.map((d: { fields: { page: number } }) => d.fields.page)).toEqual([0, 2, 4]);
    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const page: { body: { results: Array<{ document_id: string }>; next_cursor: string | null } } = await api(
        'GET',
        `/v1/collections/pages/documents?limit=4${cursor ? `&cursor=${cursor}` : ''}`,
      );
      seen.push(...page.body.results.map((d) => d.document_id));
      cursor = page.body.next_cursor;
    } while (cursor);
    expect(new Set(seen).size).toBe(6);
  });

  it('gets, patches metadata and deletes one document', async () => {
    const doc = (await api('POST', '/v1/collections/pages/documents/list', { filters: { AND: [{ field: 'page', operator: 'eq', value: 1 }] } })).body.results[0];
    const patched = await api('PATCH', `/v1/collections/pages/documents/${doc.document_id}`, { metadata: { reviewed: true } });
    expect(patched.body.metadata).toEqual({ reviewed: true });
    const byMeta = await api('POST', '/v1/collections/pages/documents/list', { filters: { AND: [{ field: 'metadata.reviewed', operator: 'eq', value: true }] } });
    expect(byMeta.body.results.map((d: { document_id: string }) => d.document_id)).toEqual([doc.document_id]);
    expect((await api('DELETE', `/v1/collections/pages/documents/${doc.document_id}`)).status).toBe(200);
    expect((await api('GET', `/v1/collections/pages/documents/${doc.document_id}`)).status).toBe(404);
    expect((await api('GET', '/v1/collections/pages')).body.document_count).toBe(5);
  });

  it('shows a user-scoped key only the documents its principal owns or was granted', async () => {
    const created = await t.request('POST', `/v1/organizations/users/${t.adminEmail}/api-keys`, {
      key: t.adminKey,
      body: { name: 'alice-key', principal_id: 'alice', permissions: ['read'] },
    });
    expect(created.body.key).toMatch(/^usr_sk_/);
    const visible = await api('GET', '/v1/collections/pages/documents', undefined, created.body.key);
    expect(visible.body.results.map((d: { fields: { page: number } }) => d.fields.page)).toEqual([5]);
    const hidden = (await api('POST', '/v1/collections/pages/documents/list', { filters: { AND: [{ field: 'page', operator: 'eq', value: 2 }] } })).body.results[0];
    expect((await api('GET', `/v1/collections/pages/documents/${hidden.document_id}`, undefined, created.body.key)).status).toBe(404);
    const tree = await api('GET', '/v1/objects/obj_root/decomposition-tree', undefined, created.body.key);
    expect(tree.body.total_documents).toBe(1);
  });

  it('deletes by filter (never with an empty filter) and builds the decomposition tree across tiers', async () => {
    expect((await api('POST', '/v1/collections/pages/documents/delete', { filters: {} })).status).toBe(400);
    const deleted = await api('POST', '/v1/collections/pages/documents/delete', { filters: { AND: [{ field: 'topic', operator: 'eq', value: 'chairs' }] } });
    expect(deleted.body.deleted).toBe(2);
    const parent = (await api('GET', '/v1/collections/pages/documents')).body.results[0];
    const child = (await api('POST', '/v1/collections/create', { collection_name: 'summaries', source: { type: 'collection', collection_id: 'pages' } })).body;
    await t.kernel.services.get(Documents).upsert({
      organizationId,
      namespaceId: child.namespace_id,
      collectionId: child.collection_id,
      sourceKey: `${parent.document_id}:summary`,
      rootObjectId: 'obj_root',
      sourceCollectionId: collection.collection_id,
      sourceDocumentId: parent.document_id,
      processingTier: 1,
      fields: { summary: 'short' },
    });
    const tree = await api('GET', '/v1/objects/obj_root/decomposition-tree');
    expect(tree.status).toBe(200);
    expect(tree.body.total_documents).toBe(4);
    const root = tree.body.roots.find((n: { document_id: string }) => n.document_id === parent.document_id);
    expect(root.children).toHaveLength(1);
    expect(root.children[0]).toMatchObject({ collection_id: child.collection_id, processing_tier: 1 });
  });
});
