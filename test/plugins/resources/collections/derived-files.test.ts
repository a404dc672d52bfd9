/**
 * Derived files reachable: images processed by a batch (image_extractor, its model in a spawned inference
 * worker), then read back through the documents API with `return_presigned_urls` (the thumbnail URL
 * downloads the JPEG the extractor saved) and `return_vectors` (the vectors the index holds), on one
 * document and on list pages; user-scoped keys see URLs and vectors only for documents they may read.
 */
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BlobStore, VectorIndex } from '../../../../kernel/tokens.js';
import { featureIndexName } from '../../../../kernel/vectors/naming.js';
import { startTestKernel, type TestKernel } from '../../../support/kernel.js';
import { solidImage } from '../../../support/media/images.js';

const MODELS = [path.resolve(__dirname, '../../../../plugins/models/image-descriptor/index.ts')];
const TERMINAL = ['COMPLETED', 'COMPLETED_WITH_ERRORS', 'FAILED', 'CANCELED'];
const JPEG_MAGIC = Buffer.from([0xff, 0xd8, 0xff]);

type Doc = Record<string, any>;

describe('derived files and vectors on document reads', () => {
  let t: TestKernel;
  const keys: Record<'alice' | 'bob', string> = { alice: '', bob: '' };
  /** Documents by object key: `red.png` (no owner), `alice.png` (alice's), `gone.png` (its thumbnail is deleted). */
  const docs: Record<string, Doc> = {};
  let collectionId: string;

  const api = (method: string, p: string, body?: unknown, key = t.adminKey) =>
    t.request(method, p, { key, headers: { 'X-Namespace': 'derived' }, ...(body !== undefined ? { body } : {}) });
  const documentPath = (doc: Doc) => `/v1/collections/pictures/documents/${doc.document_id}`;

  async function downloaded(url: string): Promise<Buffer> {
    const res = await fetch(url);
    expect(res.status).toBe(200);
    return Buffer.from(await res.arrayBuffer());
  }

  async function storedVector(documentId: string): Promise<number[]> {
    const [record] = await t.kernel.services.get(VectorIndex).get(featureIndexName(collectionId, 'image_embedding'), [documentId]);
    return Array.from(record!.vector);
  }

  beforeAll(async () => {
    t = await startTestKernel({ inferencePlugins: MODELS, config: { inferenceWorkers: 1, batchHealthIntervalMs: 0 } });
    expect((await t.request('POST', '/v1/namespaces', { key: t.adminKey, body: { namespace_name: 'derived' } })).status).toBe(201);
    expect((await api('POST', '/v1/buckets', { bucket_name: 'pics' })).status).toBe(201);
    for (const principal of ['alice', 'bob'] as const) {
      const res = await t.request('POST', `/v1/organizations/users/${encodeURIComponent(t.adminEmail)}/api-keys`, {
        key: t.adminKey,
        body: { name: `user-${principal}`, principal_id: principal, permissions: ['read', 'write'] },
      });
      expect(res.status).toBe(201);
      keys[principal] = res.body.key;
    }
    const created = await api('POST', '/v1/collections/create', {
      collection_name: 'pictures',
      source: { type: 'bucket', bucket_id: 'pics' },
      feature_extractors: [{ feature_extractor_name: 'image_extractor', parameters: { enable_ocr: false, thumbnail_size: 32 } }],
    });
    expect(created.status, created.text).toBe(201);
    collectionId = created.body.collection_id;
    const images: Array<[string, string, string | null]> = [
      ['red.png', '#d01010', null],
      ['alice.png', '#1030d0', 'alice'],
      ['gone.png', '#10b030', null],
    ];
    const objectKeys = new Map<string, string>();
    for (const [key, colour, owner] of images) {
      const bytes = await solidImage(64, 48, colour).png().toBuffer();
      const res = await api('POST', '/v1/buckets/pics/objects', { key, blobs: [{ property: 'content', base64: bytes.toString('base64') }], ...(owner ? { owner_principal: owner } : {}) });
      expect(res.status, res.text).toBe(201);
      objectKeys.set(res.body.object_id, key);
    }
    const batch = await api('POST', '/v1/buckets/pics/batches', { object_ids: [...objectKeys.keys()] });
    expect((await api('POST', `/v1/buckets/pics/batches/${batch.body.batch_id}/submit`)).status).toBe(202);
    for (let i = 0; ; i++) {
      const res = await api('GET', `/v1/buckets/pics/batches/${batch.body.batch_id}`);
      if (TERMINAL.includes(res.body.status)) {
        expect(res.body.status, res.text).toBe('COMPLETED');
        break;
      }
      if (i > 1200) throw new Error('batch did not finish');
      await new Promise((r) => setTimeout(r, 100));
    }
    const listed = await api('GET', '/v1/collections/pictures/documents');
    expect(listed.body.results).toHaveLength(3);
    for (const doc of listed.body.results as Doc[]) docs[objectKeys.get(doc.root_object_id)!] = doc;
  }, 240_000);

  afterAll(async () => {
    await t?.stop();
  });

  it('gives the thumbnail a URL that downloads the JPEG the extractor saved, only when asked', async () => {
    const plain = await api('GET', documentPath(docs['red.png']!));
    expect(plain.status).toBe(200);
    expect(plain.body.fields.thumbnail).toEqual({ storage_key: expect.stringContaining(collectionId), content_type: 'image/jpeg', size_bytes: expect.any(Number) });
    expect(plain.body.vectors).toBeUndefined();
    expect((await api('GET', `${documentPath(docs['red.png']!)}?return_presigned_urls=false`)).body.fields.thumbnail.url).toBeUndefined();

    const signed = await api('GET', `${documentPath(docs['red.png']!)}?return_presigned_urls=true`);
    expect(signed.status, signed.text).toBe(200);
    const thumbnail = signed.body.fields.thumbnail;
    expect(thumbnail).toMatchObject({ ...plain.body.fields.thumbnail, url: expect.stringMatching(/^http/), url_expires_at: expect.any(String) });
    expect(Date.parse(thumbnail.url_expires_at)).toBeGreaterThan(Date.now());
    const bytes = await downloaded(thumbnail.url);
    expect(bytes.subarray(0, 3).equals(JPEG_MAGIC)).toBe(true);
    expect(bytes.length).toBe(thumbnail.size_bytes);
    const { body } = await t.kernel.services.get(BlobStore).get(thumbnail.storage_key);
    const chunks: Buffer[] = [];
    for await (const chunk of body) chunks.push(chunk as Buffer);
    expect(bytes.equals(Buffer.concat(chunks))).toBe(true);
    // Everything else about the document is as a plain read shows it.
    expect({ ...signed.body, fields: { ...signed.body.fields, thumbnail: plain.body.fields.thumbnail } }).toEqual(plain.body);
  });

  it('returns the vectors the index holds, by feature name, of the feature dims', async () => {
    const res = await api('GET', `${documentPath(docs['red.png']!)}?return_vectors=true`);
    expect(res.status, res.text).toBe(200);
    expect(Object.keys(res.body.vectors)).toEqual(['image_embedding']);
    const vector = res.body.vectors.image_embedding as number[];
    expect(vector).toHaveLength(256);
    const stored = await storedVector(docs['red.png']!.document_id);
    expect(vector.map((v) => Math.fround(v))).toEqual(stored.map((v) => Math.fround(v)));
    expect(res.body.fields.thumbnail.url).toBeUndefined();
  });

  it('signs and reads vectors for whole list pages, GET and POST alike', async () => {
    const pages = [
      await api('GET', '/v1/collections/pictures/documents?return_presigned_urls=true&return_vectors=true&limit=2'),
      await api('POST', '/v1/collections/pictures/documents/list', { return_presigned_urls: true, return_vectors: true, limit: 2 }),
    ];
    for (const page of pages) {
      expect(page.status, page.text).toBe(200);
      expect(page.body.results).toHaveLength(2);
      for (const doc of page.body.results as Doc[]) {
        expect(doc.fields.thumbnail.url).toMatch(/^http/);
        expect((await downloaded(doc.fields.thumbnail.url)).subarray(0, 3).equals(JPEG_MAGIC)).toBe(true);
        expect(doc.vectors.image_embedding.map((v: number) => Math.fround(v))).toEqual((await storedVector(doc.document_id)).map((v) => Math.fround(v)));
      }
      const next = page.body.next_cursor as string;
      const rest =
        page === pages[0]
          ? await api('GET', `/v1/collections/pictures/documents?return_vectors=true&cursor=${encodeURIComponent(next)}`)
          : await api('POST', '/v1/collections/pictures/documents/list', { return_vectors: true, cursor: next });
      expect(rest.body.results).toHaveLength(1);
      expect(rest.body.results[0].vectors.image_embedding).toHaveLength(256);
      expect(rest.body.results[0].fields.thumbnail.url).toBeUndefined();
    }
    const plain = await api('POST', '/v1/collections/pictures/documents/list', {});
    for (const doc of plain.body.results as Doc[]) {
      expect(doc.vectors).toBeUndefined();
      expect(doc.fields.thumbnail.url).toBeUndefined();
    }
  });

  it('reads a page with one vector index read per feature and one HEAD and presign per blob, not more', async () => {
    const vectors = t.kernel.services.get(VectorIndex);
    const blobs = t.kernel.services.get(BlobStore);
    const calls = { vectors: [] as string[], head: 0, presign: 0 };
    const originals = { get: vectors.get, head: blobs.head, presignGet: blobs.presignGet };
    vectors.get = (index, ids) => (calls.vectors.push(index), originals.get.call(vectors, index, ids));
    blobs.head = (key) => ((calls.head += 1), originals.head.call(blobs, key));
    blobs.presignGet = (key, options) => ((calls.presign += 1), originals.presignGet.call(blobs, key, options));
    try {
      const page = await api('POST', '/v1/collections/pictures/documents/list', { return_presigned_urls: true, return_vectors: true });
      expect(page.body.results).toHaveLength(3);
    } finally {
      Object.assign(vectors, { get: originals.get });
      Object.assign(blobs, { head: originals.head, presignGet: originals.presignGet });
    }
    // Two features (image_embedding, and ocr_text_embedding, never written with OCR off): one read each for the page.
    expect(calls.vectors.sort()).toEqual([featureIndexName(collectionId, 'image_embedding'), featureIndexName(collectionId, 'ocr_text_embedding')].sort());
    expect(calls).toMatchObject({ head: 3, presign: 3 });
  });

  it('gives a user-scoped key URLs and vectors only for documents its principal may read', async () => {
    const own = await api('GET', `${documentPath(docs['alice.png']!)}?return_presigned_urls=true&return_vectors=true`, undefined, keys.alice);
    expect(own.status, own.text).toBe(200);
    expect((await downloaded(own.body.fields.thumbnail.url)).subarray(0, 3).equals(JPEG_MAGIC)).toBe(true);
    expect(own.body.vectors.image_embedding).toHaveLength(256);

    expect((await api('GET', `${documentPath(docs['alice.png']!)}?return_presigned_urls=true&return_vectors=true`, undefined, keys.bob)).status).toBe(404);
    for (const listed of [
      await api('GET', '/v1/collections/pictures/documents?return_presigned_urls=true&return_vectors=true', undefined, keys.bob),
      await api('POST', '/v1/collections/pictures/documents/list', { return_presigned_urls: true, return_vectors: true }, keys.bob),
    ]) {
      expect(listed.status).toBe(200);
      expect(listed.body.results).toEqual([]);
    }
    const alices = await api('POST', '/v1/collections/pictures/documents/list', { return_presigned_urls: true, return_vectors: true }, keys.alice);
    expect(alices.body.results.map((d: Doc) => d.document_id)).toEqual([docs['alice.png']!.document_id]);

    // Bob writes a document of his own that points at Alice's thumbnail: he gets no URL for it.
    const { url: _url, url_expires_at: _expires, ...reference } = own.body.fields.thumbnail;
    const forged = await api(
      'POST',
      '/v1/collections/pictures/documents',
      { key: 'forged', fields: { thumbnail: reference, stolen: { storage_key: reference.storage_key, content_type: 'image/jpeg' } } },
      keys.bob,
    );
    expect(forged.status, forged.text).toBe(201);
    const read = await api('GET', `/v1/collections/pictures/documents/${forged.body.document_id}?return_presigned_urls=true&return_vectors=true`, undefined, keys.bob);
    expect(read.status).toBe(200);
    expect(read.body.fields.thumbnail.url).toBeUndefined();
    expect(read.body.fields.stolen.url).toBeUndefined();
    expect(read.body.vectors).toEqual({});

    // Nor through a retriever: his execute finds his forged document, with no URL for Alice's blob.
    const executed = await api('POST', '/v1/retrievers/execute', {
      collection_identifiers: ['pictures'],
      input_schema: {},
      inputs: {},
      stages: [{ stage_name: 'only', config: { stage_id: 'attribute_filter', parameters: { filters: { AND: [{ field: 'document_id', operator: 'eq', value: forged.body.document_id }] } } } }],
      return_presigned_urls: true,
    }, keys.bob);
    expect(executed.status, executed.text).toBe(200);
    expect(executed.body.documents.map((d: Doc) => d.document_id)).toEqual([forged.body.document_id]);
    expect(JSON.stringify(executed.body.documents)).not.toContain('"url"');
  });

  it('refuses flags that are not booleans', async () => {
    for (const query of ['return_vectors=maybe', 'return_presigned_urls=yes-please']) {
      for (const p of [`${documentPath(docs['red.png']!)}?${query}`, `/v1/collections/pictures/documents?${query}`]) {
        const res = await api('GET', p);
        expect(res.status, `${p}: ${res.text}`).toBe(422);
        expect(JSON.stringify(res.body.detail)).toContain(query.split('=')[0]);
      }
    }
    for (const body of [{ return_vectors: 'maybe' }, { return_presigned_urls: 1 }]) {
      const res = await api('POST', '/v1/collections/pictures/documents/list', body);
      expect(res.status, res.text).toBe(422);
    }
  });

  it('gives a blob that is gone no URL rather than an error', async () => {
    const before = await api('GET', `${documentPath(docs['gone.png']!)}?return_presigned_urls=true`);
    await t.kernel.services.get(BlobStore).delete(before.body.fields.thumbnail.storage_key);
    const after = await api('GET', `${documentPath(docs['gone.png']!)}?return_presigned_urls=true`);
    expect(after.status, after.text).toBe(200);
    expect(after.body.fields.thumbnail).toEqual({ storage_key: before.body.fields.thumbnail.storage_key, content_type: 'image/jpeg', size_bytes: expect.any(Number) });
    const listed = await api('POST', '/v1/collections/pictures/documents/list', { return_presigned_urls: true });
    const processed = (listed.body.results as Doc[]).filter((d) => d.key === null);
    const urls = processed.map((d) => [d.document_id, d.fields.thumbnail.url !== undefined]);
    expect(Object.fromEntries(urls)).toEqual({
      [docs['red.png']!.document_id]: true,
      [docs['alice.png']!.document_id]: true,
      [docs['gone.png']!.document_id]: false,
    });
  });

  it('deletes a document of a collection whose OCR index was never written (OCR off)', async () => {
    const deleted = await api('DELETE', documentPath(docs['gone.png']!));
    expect(deleted.status, deleted.text).toBe(200);
    expect((await api('GET', documentPath(docs['gone.png']!))).status).toBe(404);
  });
});
