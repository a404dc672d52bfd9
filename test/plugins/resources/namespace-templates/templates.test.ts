/**
 * Namespace templates through HTTP: template CRUD and its validation, and instantiation, which copies the
 * source namespace's buckets, collections, documents, vectors and retrievers under new ids, so that the copy
 * and its source live apart from then on (changing or deleting one leaves the other as it was).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DatabaseHandle, TenantStore, VectorIndex, resolve } from '../../../../kernel/tokens.js';
import { featureIndexName } from '../../../../kernel/vectors/naming.js';
import { startTestKernel, type TestKernel } from '../../../support/kernel.js';
import { TEXTS, apiOf, populate, purged, unitVector } from './support.js';

describe('namespace templates', () => {
  let t: TestKernel;
  let api: ReturnType<typeof apiOf>;
  let source: Awaited<ReturnType<typeof populate>>;

  const ids = (documents: Array<{ document_id: string }>) => documents.map((d) => d.document_id);
  const texts = (documents: Array<{ fields?: { text?: string }; text?: string }>) => documents.map((d) => d.fields?.text ?? d.text);
  const template = (body: Record<string, unknown>, key?: string) => api('POST', '/v1/namespaces/templates', undefined, body, key);
  const instantiate = (templateId: string, body: Record<string, unknown>, key?: string) =>
    api('POST', `/v1/namespaces/templates/${templateId}/instantiate`, undefined, body, key);

  beforeAll(async () => {
    t = await startTestKernel({ config: { runTasks: false } });
    api = apiOf(t);
    source = await populate(t, 'catalog');
  }, 120_000);
  afterAll(async () => {
    await t?.stop();
  });

  describe('templates', () => {
    it('creates a template of a namespace by name or id, 201 with a tmpl_ id, active', async () => {
      const res = await template({ template_name: 'shop', description: 'a shop', source_namespace: 'catalog' });
      expect(res.status, res.text).toBe(201);
      expect(res.body).toMatchObject({
        template_name: 'shop', description: 'a shop', source_namespace_id: source.namespaceId, source_namespace_name: 'catalog', status: 'active', created_by: t.adminEmail,
      });
      expect(res.body.template_id).toMatch(/^tmpl_[0-9A-Za-z]{20}$/);
      const byId = await template({ template_name: 'shop-by-id', source_namespace: source.namespaceId });
      expect(byId.status, byId.text).toBe(201);
      expect(byId.body).toMatchObject({ description: null, source_namespace_name: 'catalog' });
    });

    it('refuses a taken name (any case) with 409, an unknown source with 404, bad input with 422', async () => {
      expect((await template({ template_name: 'SHOP', source_namespace: 'catalog' })).status).toBe(409);
      expect((await template({ template_name: 'nowhere', source_namespace: 'no-such-namespace' })).status).toBe(404);
      for (const body of [
        { template_name: 'ab', source_namespace: 'catalog' },
        { template_name: 'tmpl_looks_like_an_id', source_namespace: 'catalog' },
        { template_name: 'has space', source_namespace: 'catalog' },
        { template_name: 'ok-name' },
        { template_name: 'ok-name', source_namespace: 'catalog', extra: 1 },
        { template_name: 'ok-name', source_namespace: 'catalog', description: 'x'.repeat(501) },
      ]) {
        const res = await template(body);
        expect(res.status, JSON.stringify(body)).toBe(422);
        expect(res.body.detail).toBeInstanceOf(Array);
      }
    });

    it('lists by name with offset pagination and search; gets by id or name', async () => {
      const page = await api('GET', '/v1/namespaces/templates?limit=1&offset=1');
      expect(page.status, page.text).toBe(200);
      expect(page.body).toMatchObject({ total: 2, limit: 1, offset: 1, has_next: false });
      expect(page.body.results.map((r: { template_name: string }) => r.template_name)).toEqual(['shop-by-id']);
      const searched = await api('GET', '/v1/namespaces/templates?search=BY-ID');
      expect(searched.body.results.map((r: { template_name: string }) => r.template_name)).toEqual(['shop-by-id']);
      const byName = await api('GET', '/v1/namespaces/templates/shop');
      expect(byName.status).toBe(200);
      const byId = await api('GET', `/v1/namespaces/templates/${byName.body.template_id}`);
      expect(byId.body).toEqual(byName.body);
      expect((await api('GET', '/v1/namespaces/templates/tmpl_00000000000000000000')).status).toBe(404);
    });

    it('renames and redescribes; an empty change is a 400, a taken name a 409; deleting leaves the source', async () => {
      const renamed = await api('PATCH', '/v1/namespaces/templates/shop-by-id', undefined, { template_name: 'renamed', description: 'now described' });
      expect(renamed.status, renamed.text).toBe(200);
      expect(renamed.body).toMatchObject({ template_name: 'renamed', description: 'now described', source_namespace_name: 'catalog' });
      expect((await api('PATCH', '/v1/namespaces/templates/renamed', undefined, {})).status).toBe(400);
      expect((await api('PATCH', '/v1/namespaces/templates/renamed', undefined, { template_name: 'Shop' })).status).toBe(409);
      expect((await api('PATCH', '/v1/namespaces/templates/renamed', undefined, { source_namespace: 'x' })).status).toBe(422);
      const deleted = await api('DELETE', '/v1/namespaces/templates/renamed');
      expect(deleted.status, deleted.text).toBe(200);
      expect(deleted.body).toEqual({ template_id: renamed.body.template_id, template_name: 'renamed', deleted: true });
      expect((await api('GET', '/v1/namespaces/templates/renamed')).status).toBe(404);
      expect((await api('GET', '/v1/namespaces/catalog')).status).toBe(200);
    });

    it('keeps /v1/namespaces/templates apart from the namespace routes: no namespace may be called templates', async () => {
      expect((await api('POST', '/v1/namespaces', undefined, { namespace_name: 'Templates' })).status).toBe(422);
      // A PATCH or DELETE there reaches the namespace routes, where no namespace has that name.
      expect((await api('DELETE', '/v1/namespaces/templates')).status).toBe(404);
      expect((await api('GET', '/v1/namespaces/catalog')).body.namespace_name).toBe('catalog');
    });
  });

  describe('instantiation', () => {
    let copy: { namespace_id: string; namespace_name: string; template_id: string };

    it('creates a ready namespace holding a copy of the source, with new ids everywhere', async () => {
      const res = await instantiate('shop', { namespace_name: 'catalog-copy' });
      expect(res.status, res.text).toBe(201);
      copy = res.body;
      expect(res.body).toMatchObject({ namespace_name: 'catalog-copy', status: 'ready', copied: { buckets: 1, collections: 3, documents: 10, vectors: 5, retrievers: 2, files: 5 } });
      expect(res.body.namespace_id).toMatch(/^ns_/);
      expect(res.body.template_id).toMatch(/^tmpl_/);
      expect(new Date(res.body.created_at).toISOString()).toBe(res.body.created_at);

      const ns = await api('GET', '/v1/namespaces/catalog-copy');
      // The description defaults to the template's; metadata comes from the source.
      expect(ns.body).toMatchObject({ namespace_id: copy.namespace_id, description: 'a shop', metadata: { team: 'x' } });

      const bucket = await api('GET', '/v1/buckets/b', 'catalog-copy');
      expect(bucket.status, bucket.text).toBe(200);
      expect(bucket.body.bucket_id).not.toBe(source.bucketId);
      expect(bucket.body).toMatchObject({ namespace_id: copy.namespace_id });
      const objects = await api('POST', '/v1/buckets/b/objects/list', 'catalog-copy', {});
      expect(objects.body.results ?? []).toEqual([]);

      const collection = await api('GET', '/v1/collections/c', 'catalog-copy');
      expect(collection.body).toMatchObject({ namespace_id: copy.namespace_id, document_count: 5, source: { type: 'bucket', bucket_id: bucket.body.bucket_id } });
      expect(collection.body.collection_id).not.toBe(source.collectionId);
      const derived = await api('GET', '/v1/collections/derived', 'catalog-copy');
      expect(derived.body.source).toMatchObject({ type: 'collection', collection_id: collection.body.collection_id });

      const documents = await api('GET', '/v1/collections/c/documents?limit=10', 'catalog-copy');
      expect(documents.body.results).toHaveLength(5);
      expect(ids(documents.body.results).filter((id) => source.documentIds.includes(id))).toEqual([]);
      expect(texts(documents.body.results).sort()).toEqual([...TEXTS].sort());
      expect(documents.body.results.map((d: { key: string }) => d.key).sort()).toEqual(['d0', 'd1', 'd2', 'd3', 'd4']);

      const vectors = t.kernel.services.get(VectorIndex);
      expect(await vectors.count(featureIndexName(collection.body.collection_id, 'text_embedding'))).toBe(5);
      expect(await vectors.count(featureIndexName(source.collectionId, 'text_embedding'))).toBe(5);
    });

    it('copies retrievers that find the copied documents: feature_search and text_search, by name or by the copy id', async () => {
      const copied = (await api('GET', '/v1/collections/c/documents?limit=10', 'catalog-copy')).body.results as Array<{ document_id: string; key: string }>;
      const byKey = new Map(copied.map((d) => [d.key, d.document_id]));
      const vector = await api('POST', '/v1/retrievers/by-vector/execute', 'catalog-copy', { inputs: { vector: unitVector(2) } });
      expect(vector.status, vector.text).toBe(200);
      expect(vector.body.status).toBe('completed');
      expect(vector.body.documents[0].document_id).toBe(byKey.get('d2'));
      expect(ids(vector.body.documents).every((id) => [...byKey.values()].includes(id))).toBe(true);

      const retriever = await api('GET', '/v1/retrievers/by-text', 'catalog-copy');
      expect(retriever.body.retriever.retriever_id).not.toBe(source.textRetrieverId);
      const processed = await api('GET', '/v1/collections/p', 'catalog-copy');
      expect(processed.body.collection_id).not.toBe(source.processedId);
      expect(retriever.body.retriever.collection_ids).toEqual([processed.body.collection_id]);
      const copiedText = (await api('GET', '/v1/collections/p/documents?limit=10', 'catalog-copy')).body.results as Array<{ document_id: string; fields: { title: string } }>;
      const lamps = copiedText.filter((d) => d.fields.title.includes('lamp')).map((d) => d.document_id);
      expect(lamps).toHaveLength(2);
      const text = await api('POST', '/v1/retrievers/by-text/execute', 'catalog-copy', { inputs: { q: 'lamp' } });
      expect(text.status, text.text).toBe(200);
      expect(ids(text.body.documents).sort()).toEqual(lamps.sort());

      // The source's retrievers still find the source's documents.
      const original = await api('POST', '/v1/retrievers/by-text/execute', 'catalog', { inputs: { q: 'lamp' } });
      expect(original.body.documents).toHaveLength(2);
      expect(ids(original.body.documents).filter((id) => lamps.includes(id))).toEqual([]);
    });

    it('copies the files processed documents refer to under the copy, and keeps their lineage to the source objects', async () => {
      const read = async (namespace: string) => (await api('GET', '/v1/collections/p/documents?limit=10&return_presigned_urls=true', namespace)).body.results as Array<Record<string, any>>;
      const [original, copied] = [await read('catalog'), await read('catalog-copy')];
      const copyId = (await api('GET', '/v1/namespaces/catalog-copy')).body.namespace_id as string;
      for (const doc of copied) {
        expect(doc.fields.content.storage_key).toContain(copyId);
        expect(doc.fields.content.storage_key).not.toContain(source.namespaceId);
        // Bucket objects are not copied: the document still names the source object it was made from.
        expect(source.objectIds).toContain(doc.root_object_id);
        const twin = original.find((o) => o.root_object_id === doc.root_object_id)!;
        expect(doc.fields.content.storage_key).not.toBe(twin.fields.content.storage_key);
        const body = await fetch(doc.fields.content.url);
        expect(body.status).toBe(200);
        expect(await body.text()).toBe(`${twin.fields.title}, described`);
      }
    });

    it('keeps the copy and the source apart: changing the copy does not change the source', async () => {
      const copied = (await api('GET', '/v1/collections/c/documents?limit=10', 'catalog-copy')).body.results as Array<{ document_id: string; key: string }>;
      const d0 = copied.find((d) => d.key === 'd0')!.document_id;
      expect((await api('PATCH', `/v1/collections/c/documents/${d0}`, 'catalog-copy', { metadata: { changed: true } })).status).toBe(200);
      const d1 = copied.find((d) => d.key === 'd1')!.document_id;
      expect((await api('DELETE', `/v1/collections/c/documents/${d1}`, 'catalog-copy')).status).toBe(200);
      const written = await api('POST', '/v1/collections/c/documents', 'catalog-copy', { key: 'new', fields: { text: 'a new lamp' }, vectors: { text_embedding: unitVector(9) } });
      expect(written.status, written.text).toBe(201);
      expect((await api('PATCH', '/v1/retrievers/by-vector', 'catalog-copy', { description: 'changed' })).status).toBe(200);

      const original = await api('GET', `/v1/collections/c/documents/${source.documentIds[0]}`, 'catalog');
      expect(original.body.metadata).toEqual({ n: 0 });
      expect((await api('GET', `/v1/collections/c/documents/${source.documentIds[1]}`, 'catalog')).status).toBe(200);
      expect((await api('GET', '/v1/collections/c', 'catalog')).body.document_count).toBe(5);
      expect((await api('GET', '/v1/retrievers/by-vector', 'catalog')).body.retriever.description).toBeNull();
      const vectors = t.kernel.services.get(VectorIndex);
      expect(await vectors.count(featureIndexName(source.collectionId, 'text_embedding'))).toBe(5);
      // A source document's id means nothing in the copy.
      expect((await api('GET', `/v1/collections/c/documents/${source.documentIds[0]}`, 'catalog-copy')).status).toBe(404);
    });

    it('refuses a taken namespace name with 409, a reserved one with 422, and takes an explicit (null) description', async () => {
      const taken = await instantiate('shop', { namespace_name: 'CATALOG' });
      expect(taken.status).toBe(409);
      expect(taken.body.error.message).toMatch(/already exists/);
      expect((await instantiate('shop', { namespace_name: 'templates' })).status).toBe(422);
      expect((await instantiate('shop', { namespace_name: 'x' })).status).toBe(422);
      expect((await instantiate('shop', {})).status).toBe(422);
      expect((await instantiate('tmpl_00000000000000000000', { namespace_name: 'nowhere' })).status).toBe(404);
      const plain = await instantiate('shop', { namespace_name: 'plain-copy', description: null });
      expect(plain.status, plain.text).toBe(201);
      expect((await api('GET', '/v1/namespaces/plain-copy')).body.description).toBeNull();
    });

    it('lets the copy be deleted without touching the source', async () => {
      expect((await api('DELETE', '/v1/namespaces/plain-copy')).status).toBe(200);
      const plainId = (await api('GET', '/v1/organizations/audit-log?action=namespace_deleted')).body.results[0].resource_id as string;
      await purged(t, plainId);
      const run = await api('POST', '/v1/retrievers/by-vector/execute', 'catalog', { inputs: { vector: unitVector(3) } });
      expect(run.body.documents[0].document_id).toBe(source.documentIds[3]);
      expect((await api('GET', '/v1/collections/c', 'catalog')).body.document_count).toBe(5);
      expect((await api('GET', '/v1/collections/p', 'catalog')).body.document_count).toBe(5);
      expect(await t.kernel.services.get(VectorIndex).count(featureIndexName(source.collectionId, 'text_embedding'))).toBe(5);
    });

    it('lets the source be deleted without touching the copy; the template is then inactive and instantiating it a 409', async () => {
      expect((await api('DELETE', '/v1/namespaces/catalog')).status).toBe(200);
      await purged(t, source.namespaceId);
      const run = await api('POST', '/v1/retrievers/by-vector/execute', 'catalog-copy', { inputs: { vector: unitVector(4) } });
      expect(run.body.status).toBe('completed');
      const d4 = (await api('GET', '/v1/collections/c/documents?limit=10', 'catalog-copy')).body.results.find((d: { key: string }) => d.key === 'd4');
      expect(run.body.documents[0].document_id).toBe(d4.document_id);
      expect((await api('POST', '/v1/retrievers/by-text/execute', 'catalog-copy', { inputs: { q: 'lamp' } })).body.documents).toHaveLength(2);

      const inactive = await api('GET', '/v1/namespaces/templates/shop');
      expect(inactive.body).toMatchObject({ status: 'inactive', source_namespace_name: null, source_namespace_id: source.namespaceId });
      const refused = await instantiate('shop', { namespace_name: 'too-late' });
      expect(refused.status).toBe(409);
      expect(refused.body.error.message).toMatch(/inactive/);
      expect((await api('GET', '/v1/namespaces/too-late')).status).toBe(404);
      // A namespace made from a copy is a copy like any other.
      expect((await template({ template_name: 'from-copy', source_namespace: 'catalog-copy' })).status).toBe(201);
      const again = await instantiate('from-copy', { namespace_name: 'second-generation' });
      expect(again.status, again.text).toBe(201);
      expect(again.body.copied).toMatchObject({ documents: 10, collections: 3, retrievers: 2, files: 5 });
    });
  });

  describe('isolation', () => {
    it('another organization sees none of these templates (404) and cannot instantiate them', async () => {
      const org = await resolve(t.kernel.container, TenantStore).createOrganization({ name: 'other', ownerEmail: 'other@example.test' });
      const key = org.adminKeyPlaintext;
      const mine = (await api('GET', '/v1/namespaces/templates/from-copy')).body.template_id as string;
      expect((await api('GET', '/v1/namespaces/templates', undefined, undefined, key)).body.results).toEqual([]);
      expect((await api('GET', `/v1/namespaces/templates/${mine}`, undefined, undefined, key)).status).toBe(404);
      expect((await instantiate(mine, { namespace_name: 'stolen' }, key)).status).toBe(404);
      expect((await api('PATCH', `/v1/namespaces/templates/${mine}`, undefined, { description: 'x' }, key)).status).toBe(404);
      expect((await api('DELETE', `/v1/namespaces/templates/${mine}`, undefined, undefined, key)).status).toBe(404);
      // Nor can it make a template of this organization's namespace.
      expect((await template({ template_name: 'theirs', source_namespace: 'catalog-copy' }, key)).status).toBe(404);
      const copyId = (await api('GET', '/v1/namespaces/catalog-copy')).body.namespace_id as string;
      expect((await template({ template_name: 'theirs', source_namespace: copyId }, key)).status).toBe(404);
    });

    it('a scoped key cannot use a template to reach a namespace outside its scopes', async () => {
      const makeKey = async (name: string, scopes: unknown[]) => {
        const res = await api('POST', `/v1/organizations/users/${encodeURIComponent(t.adminEmail)}/api-keys`, undefined, { name, permissions: ['read', 'write'], scopes });
        expect(res.status, res.text).toBe(201);
        return res.body.key as string;
      };
      // May create namespaces named sandbox-*, and read nothing else.
      const sandboxed = await makeKey('sandboxed', [{ resource_type: 'namespace', resource_id: 'sandbox-*' }]);
      const mine = (await api('GET', '/v1/namespaces/templates/from-copy')).body.template_id as string;
      expect((await api('GET', '/v1/namespaces/templates', undefined, undefined, sandboxed)).body).toMatchObject({ results: [], total: 0 });
      expect((await api('GET', `/v1/namespaces/templates/${mine}`, undefined, undefined, sandboxed)).status).toBe(404);
      expect((await instantiate(mine, { namespace_name: 'sandbox-1' }, sandboxed)).status).toBe(404);
      expect((await api('GET', '/v1/namespaces/sandbox-1')).status).toBe(404);
      expect((await template({ template_name: 'peek', source_namespace: 'catalog-copy' }, sandboxed)).status).toBe(403);

      // Given the source too, it may; and it still may not create a namespace outside its scopes.
      const widened = await makeKey('widened', [
        { resource_type: 'namespace', resource_id: 'sandbox-*' },
        { resource_type: 'namespace', resource_id: 'catalog-copy', operations: ['read_data'] },
      ]);
      expect((await api('GET', '/v1/namespaces/templates', undefined, undefined, widened)).body.results.map((r: { template_name: string }) => r.template_name)).toEqual(['from-copy']);
      expect((await instantiate(mine, { namespace_name: 'elsewhere' }, widened)).status).toBe(403);
      const made = await instantiate(mine, { namespace_name: 'sandbox-2' }, widened);
      expect(made.status, made.text).toBe(201);
      const documents = await api('GET', '/v1/collections/c/documents', 'sandbox-2', undefined, widened);
      expect(documents.body.results).toHaveLength(5);
    });
  });

  it('writes one audit entry naming the template for each instantiation', async () => {
    const entries = (await api('GET', '/v1/organizations/audit-log?action=namespace_created')).body.results as Array<{ resource_name: string; changes: Record<string, unknown> }>;
    const copy = entries.find((e) => e.resource_name === 'catalog-copy');
    expect(copy?.changes).toMatchObject({ template_id: expect.stringMatching(/^tmpl_/), source_namespace_id: source.namespaceId });
    const db = t.kernel.services.get(DatabaseHandle).db;
    // Every template row carries its organization.
    expect(await db('namespace_templates').whereNull('organization_id')).toEqual([]);
  });
});
