/**
 * Small inline text and JSON blobs stay in the object row (plugins/resources/buckets/ingest.ts): creating
 * them writes no file, and a batch extracts them without reading the blob store. A file is written only
 * when something needs one — a download URL, a document that references the blob — and then holds exactly
 * the bytes given. Larger content and base64 content get their file at once.
 */
import { createHash } from 'node:crypto';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BlobStore } from '../../../../kernel/tokens.js';
import { INLINE_MAX_BYTES } from '../../../../plugins/resources/buckets/ingest.js';
import { startTestKernel, type TestKernel } from '../../../support/kernel.js';

const MODELS = [path.resolve(__dirname, '../../../../plugins/models/hashed-ngram-text/index.ts')];
const TERMINAL = ['COMPLETED', 'COMPLETED_WITH_ERRORS', 'FAILED', 'CANCELED'];
const md5 = (text: string) => createHash('md5').update(Buffer.from(text, 'utf8')).digest('hex');

describe('inline blobs', () => {
  let t: TestKernel;
  const api = (method: string, p: string, body?: unknown) =>
    t.request(method, p, { key: t.adminKey, headers: { 'X-Namespace': 'inline' }, ...(body !== undefined ? { body } : {}) });

  /** The blob files the store holds for an object. */
  async function filesOf(objectId: string): Promise<string[]> {
    const keys: string[] = [];
    for await (const blob of t.kernel.services.get(BlobStore).list('')) if (blob.key.includes(objectId)) keys.push(blob.key);
    return keys;
  }

  async function runBatch(bucket: string, objectIds: string[]): Promise<void> {
    const batch = await api('POST', `/v1/buckets/${bucket}/batches`, { object_ids: objectIds });
    expect(batch.status, batch.text).toBe(201);
    expect((await api('POST', `/v1/buckets/${bucket}/batches/${batch.body.batch_id}/submit`)).status).toBe(202);
    for (let i = 0; i < 1200; i++) {
      const res = await api('GET', `/v1/buckets/${bucket}/batches/${batch.body.batch_id}`);
      if (TERMINAL.includes(res.body.status)) {
        expect(res.body.status, res.text).toBe('COMPLETED');
        return;
      }
      await new Promise((r) => setTimeout(r, 100));
    }
    throw new Error('batch did not finish');
  }

  beforeAll(async () => {
    t = await startTestKernel({ inferencePlugins: MODELS, config: { inferenceWorkers: 1, batchHealthIntervalMs: 0 } });
    expect((await t.request('POST', '/v1/namespaces', { key: t.adminKey, body: { namespace_name: 'inline' } })).status).toBe(201);
    for (const bucket_name of ['notes', 'texts', 'copies']) expect((await api('POST', '/v1/buckets', { bucket_name })).status).toBe(201);
  }, 60_000);

  afterAll(async () => {
    await t?.stop();
  });

  it('keeps small text and JSON in the row; large and base64 content get a file at once', async () => {
    const small = 'Lamps turn all night. Ünïcödé ✓';
    const created = await api('POST', '/v1/buckets/notes/objects/bulk', {
      objects: [
        { key: 'small', blobs: [{ property: 'content', text: small }] },
        { key: 'json', blobs: [{ property: 'content', json: { watts: 40 } }] },
        { key: 'large', blobs: [{ property: 'content', text: 'x'.repeat(INLINE_MAX_BYTES + 1) }] },
        { key: 'base64', blobs: [{ property: 'content', base64: Buffer.from('plain words').toString('base64') }] },
      ],
    });
    expect(created.status, created.text).toBe(201);
    const ids = Object.fromEntries(created.body.results.map((o: { key: string; object_id: string }) => [o.key, o.object_id]));
    expect(await filesOf(ids.small)).toEqual([]);
    expect(await filesOf(ids.json)).toEqual([]);
    for (const key of ['large', 'base64']) expect(await filesOf(ids[key]), key).toHaveLength(1);
    // The object reads the same either way: digests and size of the bytes given.
    const smallBlob = created.body.results[0].blobs[0];
    expect(smallBlob).toMatchObject({ content_type: 'text/plain', size_bytes: Buffer.byteLength(small), md5: md5(small), source: 'inline' });

    // A download URL: the file is written on the first ask and holds exactly the text.
    const fetched = await api('GET', `/v1/buckets/notes/objects/${ids.small}?return_presigned_urls=true`);
    expect(fetched.status).toBe(200);
    const download = await fetch(fetched.body.blobs[0].url);
    expect(download.status).toBe(200);
    expect(download.headers.get('content-type')).toMatch(/^text\/plain/);
    expect(await download.text()).toBe(small);
    expect(await filesOf(ids.small)).toHaveLength(1);
    // Asked again: the same file, still the same bytes.
    const again = await api('GET', `/v1/buckets/notes/objects/${ids.small}?return_presigned_urls=true`);
    expect(await (await fetch(again.body.blobs[0].url)).text()).toBe(small);

    // An object whose blob never had a file deletes cleanly.
    expect((await api('DELETE', `/v1/buckets/notes/objects/${ids.json}`)).status).toBe(200);
    expect((await api('GET', `/v1/buckets/notes/objects/${ids.json}`)).status).toBe(404);
  });

  it('extracts inline text without a file, and gives a document that references the blob a file its URL downloads', async () => {
    const text = 'Glaciers carve valleys over thousands of years.';
    expect((await api('POST', '/v1/collections/create', {
      collection_name: 'embedded', source: { type: 'bucket', bucket_id: 'texts' }, feature_extractors: [{ feature_extractor_name: 'text_extractor' }],
    })).status).toBe(201);
    expect((await api('POST', '/v1/collections/create', {
      collection_name: 'copied', source: { type: 'bucket', bucket_id: 'copies' }, feature_extractors: [{ feature_extractor_name: 'passthrough_extractor' }],
    })).status).toBe(201);

    const extracted = await api('POST', '/v1/buckets/texts/objects', { key: 'glacier', blobs: [{ property: 'text', text }] });
    expect(extracted.status, extracted.text).toBe(201);
    await runBatch('texts', [extracted.body.object_id]);
    const documents = await api('GET', '/v1/collections/embedded/documents');
    expect(documents.body.results).toHaveLength(1);
    expect(documents.body.results[0].fields.text).toBe(text);
    expect(await filesOf(extracted.body.object_id)).toEqual([]);

    const copied = await api('POST', '/v1/buckets/copies/objects', { key: 'glacier', blobs: [{ property: 'content', text }] });
    expect(copied.status, copied.text).toBe(201);
    await runBatch('copies', [copied.body.object_id]);
    expect(await filesOf(copied.body.object_id)).toHaveLength(1);
    const listed = await api('GET', '/v1/collections/copied/documents?return_presigned_urls=true');
    expect(listed.status).toBe(200);
    const reference = listed.body.results[0].fields.content;
    expect(reference).toMatchObject({ content_type: 'text/plain', size_bytes: Buffer.byteLength(text) });
    expect(await (await fetch(reference.url)).text()).toBe(text);
  }, 120_000);
});
