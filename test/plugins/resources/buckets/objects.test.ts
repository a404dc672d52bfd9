import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestKernel, type TestKernel } from '../../../support/kernel.js';

// A 1×1 PNG.
const PNG = Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==', 'base64');
const md5 = (b: Buffer) => createHash('md5').update(b).digest('hex');
const sha256 = (b: Buffer) => createHash('sha256').update(b).digest('hex');

describe('buckets and objects', () => {
  let t: TestKernel;
  const ns = 'media';
  beforeAll(async () => {
    t = await startTestKernel();
    await t.client().POST('/v1/namespaces', { body: { namespace_name: ns } });
  });
  afterAll(async () => {
    await t.stop();
  });
  const api = (method: string, path: string, body?: unknown, key = t.adminKey, namespace = ns) =>
    t.request(method, path, { key, ...(body !== undefined ? { body } : {}), headers: { 'X-Namespace': namespace } });

  it('creates a bucket with a schema and stores inline text, JSON and base64 blobs with sniffed types and digests', async () => {
    const bucket = await api('POST', '/v1/buckets', {
      bucket_name: 'catalog',
      schema: {
        properties: {
          title: { type: 'string', required: true },
          price: { type: 'number' },
          photo: { type: 'image' },
          body: { type: 'text' },
          spec: { type: 'json' },
        },
      },
    });
    expect(bucket.status).toBe(201);
    expect(bucket.body.bucket_id).toMatch(/^bkt_/);

    const created = await api('POST', '/v1/buckets/catalog/objects', {
      key: 'products/lamp',
      metadata: { title: 'Lamp', price: 12.5 },
      blobs: [
        { property: 'photo', base64: PNG.toString('base64'), filename: 'lamp.png' },
        { property: 'body', text: 'A warm desk lamp.' },
        { property: 'spec', json: { watts: 40 } },
      ],
    });
    expect(created.status).toBe(201);
    const blobs = Object.fromEntries(created.body.blobs.map((b: { property: string }) => [b.property, b]));
    expect(blobs.photo).toMatchObject({ type: 'image', content_type: 'image/png', size_bytes: PNG.length, md5: md5(PNG), sha256: sha256(PNG) });
    expect(blobs.body).toMatchObject({ type: 'text', content_type: 'text/plain' });
    expect(blobs.spec).toMatchObject({ type: 'json', content_type: 'application/json' });

    const fetched = await api('GET', `/v1/buckets/catalog/objects/${created.body.object_id}`);
    expect(fetched.status).toBe(200);
    const photoUrl = fetched.body.blobs.find((b: { property: string }) => b.property === 'photo').url;
    const download = await fetch(photoUrl);
    expect(download.status).toBe(200);
    expect(download.headers.get('content-type')).toBe('image/png');
    expect(Buffer.from(await download.arrayBuffer()).equals(PNG)).toBe(true);

    const after = await api('GET', '/v1/buckets/catalog');
    expect(after.body).toMatchObject({ object_count: 1, total_size_bytes: created.body.size_bytes });
  });

  it('refuses an image property given a PDF, and metadata that breaks the schema, writing nothing', async () => {
    const before = (await api('GET', '/v1/buckets/catalog')).body.object_count;
    const pdf = Buffer.from('%PDF-1.4\n%âãÏÓ\n1 0 obj\n<<>>\nendobj\ntrailer\n<<>>\n%%EOF\n', 'latin1');
    const wrongType = await api('POST', '/v1/buckets/catalog/objects', {
      metadata: { title: 'x' },
      blobs: [{ property: 'photo', base64: pdf.toString('base64') }],
    });
    expect(wrongType.status).toBe(422);
    expect(wrongType.body.detail[0].loc).toEqual(['body', 'blobs', 0]);
    expect(wrongType.body.detail[0].msg).toBe("property 'photo' holds image content, but this blob is application/pdf");
    // `base64 -w0 missing.png` prints nothing: the blob arrives empty, and the answer says so.
    const empty = await api('POST', '/v1/buckets/catalog/objects', { metadata: { title: 'x' }, blobs: [{ property: 'photo', base64: '' }] });
    expect(empty.status).toBe(422);
    expect(empty.body.detail[0].msg).toBe("property 'photo' holds image content, but this blob is empty (0 bytes): send the file's content");

    const badMeta = await api('POST', '/v1/buckets/catalog/objects', { metadata: { title: 3, color: 'red' } });
    expect(badMeta.status).toBe(422);
    expect(badMeta.body.detail.map((d: { loc: unknown[] }) => d.loc)).toEqual(
      expect.arrayContaining([
        ['body', 'metadata', 'title'],
        ['body', 'metadata', 'color'],
      ]),
    );
    const missing = await api('POST', '/v1/buckets/catalog/objects', { metadata: { price: 1 } });
    expect(missing.status).toBe(422);
    expect((await api('GET', '/v1/buckets/catalog')).body.object_count).toBe(before);
  });

  it('lists with filters, sort and cursor pagination', async () => {
    await api('POST', '/v1/buckets', { bucket_name: 'notes' });
    for (let i = 0; i < 7; i++) {
      const r = await api('POST', '/v1/buckets/notes/objects', {
        key: `n/${i}`,
        metadata: { rank: i, tag: i % 2 === 0 ? 'Even' : 'odd' },
        blobs: [{ property: 'content', text: `note ${i}` }],
      });
      expect(r.status).toBe(201);
    }
    const even = await api('POST', '/v1/buckets/notes/objects/list', {
      filters: { AND: [{ field: 'metadata.tag', operator: 'eq', value: 'even' }, { field: 'metadata.rank', operator: 'gte', value: 2 }] },
      sort: { field: 'key', direction: 'asc' },
    });
    expect(even.status).toBe(200);
    expect(even.body.results.map((o: { key: string }) => o.key)).toEqual(['n/2', 'n/4', 'n/6']);

    const sensitive = await api('POST', '/v1/buckets/notes/objects/list', {
      filters: { AND: [{ field: 'metadata.tag', operator: 'eq', value: 'even' }], case_sensitive: true },
    });
    expect(sensitive.body.results).toHaveLength(0);

    const seen: string[] = [];
    let cursor: string | undefined;
    do {
      const page = await api('GET', `/v1/buckets/notes/objects?limit=3${cursor ? `&cursor=${cursor}` : ''}`);
      expect(page.status).toBe(200);
      seen.push(...page.body.results.map((o: { key: string }) => o.key));
      cursor = page.body.next_cursor ?? undefined;
    } while (cursor);
    expect(seen).toHaveLength(7);
    expect(new Set(seen).size).toBe(7);

    const badField = await api('POST', '/v1/buckets/notes/objects/list', { filters: { AND: [{ field: 'nope', operator: 'eq', value: 1 }] } });
    expect(badField.status).toBe(422);
  });

  it('deletes an object and its blobs', async () => {
    const created = await api('POST', '/v1/buckets/notes/objects', { blobs: [{ property: 'content', text: 'bye' }] });
    const url = (await api('GET', `/v1/buckets/notes/objects/${created.body.object_id}`)).body.blobs[0].url;
    expect((await fetch(url)).status).toBe(200);
    const deleted = await api('DELETE', `/v1/buckets/notes/objects/${created.body.object_id}`);
    expect(deleted.status).toBe(200);
    expect((await api('GET', `/v1/buckets/notes/objects/${created.body.object_id}`)).status).toBe(404);
    expect((await fetch(url)).status).toBe(404);
  });

  it('checks a blob\'s declared type against the schema, and against the content in a schemaless bucket', async () => {
    const mismatch = await api('POST', '/v1/buckets/catalog/objects', {
      metadata: { title: 't' },
      blobs: [{ property: 'body', type: 'image', text: 'words' }],
    });
    expect(mismatch.status).toBe(422);
    expect(mismatch.body.detail[0].loc).toEqual(['body', 'blobs', 0, 'type']);
    const notAnImage = await api('POST', '/v1/buckets/notes/objects', { blobs: [{ property: 'picture', type: 'image', text: 'words' }] });
    expect(notAnImage.status).toBe(422);
    const image = await api('POST', '/v1/buckets/notes/objects', { blobs: [{ property: 'picture', type: 'image', base64: PNG.toString('base64') }] });
    expect(image.status).toBe(201);
    expect(image.body.blobs[0]).toMatchObject({ type: 'image', content_type: 'image/png' });
  });

  it('refuses a URL blob pointing at 127.0.0.1 by default', async () => {
    const res = await api('POST', '/v1/buckets/notes/objects', { blobs: [{ property: 'content', url: `${t.url}/v1/health` }] });
    expect(res.status).toBe(400);
    expect(res.body.error.message).toMatch(/private or loopback/);
  });
});
