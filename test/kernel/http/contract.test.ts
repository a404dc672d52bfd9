/** What the contract promises beyond single resources: interactive docs at /docs, null cursors, public 4xx. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestKernel, type TestKernel } from '../../support/kernel.js';

describe('the contract', () => {
  let t: TestKernel;

  beforeAll(async () => {
    t = await startTestKernel();
  });
  afterAll(async () => {
    await t.stop();
  });

  describe('/docs', () => {
    it('serves a Swagger UI page that loads only this origin’s assets and reads /v1/openapi.json', async () => {
      const res = await fetch(`${t.url}/docs`);
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toMatch(/^text\/html/);
      const html = await res.text();
      expect(html).not.toMatch(/https?:\/\//);
      const assets = [...html.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1]!);
      expect(assets).toEqual(expect.arrayContaining(['/docs/swagger-ui-bundle.js', '/docs/swagger-ui.css', '/docs/initializer.js']));
      for (const asset of assets) {
        expect(asset.startsWith('/docs/'), asset).toBe(true);
        const served = await fetch(`${t.url}${asset}`);
        expect(served.status, asset).toBe(200);
        expect(served.headers.get('x-content-type-options')).toBe('nosniff');
        expect((await served.arrayBuffer()).byteLength, asset).toBeGreaterThan(0);
      }
      const initializer = await (await fetch(`${t.url}/docs/initializer.js`)).text();
      expect(initializer).toContain('"/v1/openapi.json"');
      expect(initializer).toContain('validatorUrl: null');
      expect(initializer).not.toMatch(/https?:\/\//);
    });

    it('sends a Content-Security-Policy that allows this origin only and no inline script', async () => {
      const policy = (await fetch(`${t.url}/docs/`)).headers.get('content-security-policy') ?? '';
      const directives = new Map(policy.split(';').map((d) => d.trim().split(/\s+/)).map(([name, ...values]) => [name!, values]));
      expect(directives.get('default-src')).toEqual(["'none'"]);
      expect(directives.get('script-src')).toEqual(["'self'"]);
      expect(directives.get('connect-src')).toEqual(["'self'"]);
      expect(directives.get('frame-ancestors')).toEqual(["'none'"]);
    });

    it('serves nothing else from the package and leaves the API routes alone', async () => {
      expect((await fetch(`${t.url}/docs/package.json`)).status).toBe(404);
      expect((await fetch(`${t.url}/docs/../package.json`)).status).toBe(404);
      expect((await fetch(`${t.url}/v1/openapi.json`)).status).toBe(200);
    });
  });

  describe('cursor: null', () => {
    const api = (method: string, path: string, body?: unknown) =>
      t.request(method, path, { key: t.adminKey, headers: { 'X-Namespace': 'cursors' }, ...(body !== undefined ? { body } : {}) });

    beforeAll(async () => {
      expect((await t.client().POST('/v1/namespaces', { body: { namespace_name: 'cursors' } })).response.status).toBe(201);
      expect((await api('POST', '/v1/buckets', { bucket_name: 'src' })).status).toBe(201);
      expect((await api('POST', '/v1/collections/create', { collection_name: 'pages', source: { type: 'bucket', bucket_id: 'src' } })).status).toBe(201);
    });

    it('is the first page of an object list, as the next_cursor of a last page says', async () => {
      const first = await api('POST', '/v1/buckets/src/objects/list', { limit: 10 });
      expect(first.body.next_cursor).toBeNull();
      const again = await api('POST', '/v1/buckets/src/objects/list', { limit: 10, cursor: first.body.next_cursor });
      expect(again.status).toBe(200);
      expect(again.body).toMatchObject({ results: [], next_cursor: null });
    });

    it('is the first page of a document list', async () => {
      const res = await api('POST', '/v1/collections/pages/documents/list', { limit: 10, cursor: null });
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({ results: [], next_cursor: null });
    });
  });

  it('answers a Range outside a blob with 416, its size in Content-Range and an ErrorResponse body', async () => {
    const headers = { 'X-Namespace': 'cursors' };
    const object = await t.request('POST', '/v1/buckets/src/objects', {
      key: t.adminKey,
      headers,
      body: { key: 'range.txt', blobs: [{ property: 'content', text: 'twelve bytes' }] },
    });
    expect(object.status).toBe(201);
    const got = await t.request('GET', `/v1/buckets/src/objects/${object.body.object_id}?return_presigned_urls=true`, { key: t.adminKey, headers });
    const res = await fetch(got.body.blobs[0].url, { headers: { Range: 'bytes=100-200' } });
    expect(res.status).toBe(416);
    expect(res.headers.get('content-range')).toBe('bytes */12');
    expect(await res.json()).toMatchObject({ success: false, status: 416, error: { type: 'RangeNotSatisfiableError', message: expect.any(String) } });
  });

  it('answers an unknown query parameter on a public route with the documented 422', async () => {
    const res = await t.request('GET', '/v1/health?verbose=1');
    expect(res.status).toBe(422);
    expect(res.body.detail[0]).toMatchObject({ loc: expect.any(Array), msg: expect.any(String), type: expect.any(String) });
  });
});
