/**
 * Input that used to get a 500 (or worse) gets a documented 4xx: JSON nested past the stack, forged
 * cursors, date-times JavaScript or PostgreSQL cannot hold, database errors caused by values. Every
 * response says nosniff, `Origin: null` is never granted, and a presigned token never reaches the logs.
 */
import { request as httpRequest } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mapError } from '../../../kernel/http/error-mapper.js';
import { encodeCursor } from '../../../kernel/http/cursor.js';
import { startTestKernel, type TestKernel } from '../../support/kernel.js';

/** A GET with a JSON body (fetch refuses to send one). */
function getWithBody(url: string, body: string): Promise<{ status: number; body: any }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, { method: 'GET', headers: { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () => resolve({ status: res.statusCode!, body: JSON.parse(Buffer.concat(chunks).toString('utf8')) }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

const deep = (levels: number) => `${'['.repeat(levels)}${']'.repeat(levels)}`;
const deepObject = (levels: number) => `${'{"a":'.repeat(levels)}1${'}'.repeat(levels)}`;

describe('hostile input', () => {
  let t: TestKernel;
  let bucketId: string;
  let collectionId: string;
  const ns = { 'X-Namespace': 'hostile' };
  const api = (method: string, path: string, body?: unknown, headers: Record<string, string> = ns) =>
    t.request(method, path, { key: t.adminKey, headers, ...(body !== undefined ? { body } : {}) });

  beforeAll(async () => {
    t = await startTestKernel();
    expect((await api('POST', '/v1/namespaces', { namespace_name: 'hostile' }, {})).status).toBe(201);
    bucketId = (await api('POST', '/v1/buckets', { bucket_name: 'hostile-bucket' })).body.bucket_id;
    const collection = await api('POST', '/v1/collections/create', {
      collection_name: 'hostile-collection',
      source: { type: 'bucket', bucket_id: bucketId },
      feature_extractors: [{ feature_extractor_name: 'passthrough_extractor' }],
    });
    expect(collection.status).toBe(201);
    collectionId = collection.body.collection_id;
  });
  afterAll(async () => {
    await t.stop();
  });

  describe('arrays past their maxItems', () => {
    it('are refused with that one problem, before any item is validated', async () => {
      // 10,001 wrong items used to cost seconds of the event loop (ajv copies every item's errors).
      const res = await api('POST', '/v1/buckets/hostile-bucket/objects/bulk', { objects: Array.from({ length: 10_001 }, () => 'x') });
      expect(res.status).toBe(422);
      expect(res.body.detail).toEqual([{ loc: ['body', 'objects'], msg: 'must NOT have more than 1000 items', type: 'maxItems' }]);
    });

    it('are found in any operation, and arrays within their limits are validated as before', async () => {
      const nested = await api('POST', '/v1/retrievers/execute', {
        collection_identifiers: Array.from({ length: 5_000 }, () => 'hostile-collection'), inputs: {},
        stages: [{ stage_name: 'f', config: { stage_id: 'attribute_filter', parameters: {} } }],
      });
      expect(nested.status).toBe(422);
      expect(nested.body.detail).toHaveLength(1);
      expect(nested.body.detail[0]).toMatchObject({ loc: ['body', 'collection_identifiers'], type: 'maxItems' });
      const within = await api('POST', '/v1/buckets/hostile-bucket/objects/bulk', { objects: ['x', 'y'] });
      expect(within.status).toBe(422);
      expect(within.body.detail.map((d: { loc: unknown[] }) => d.loc)).toEqual([['body', 'objects', 0], ['body', 'objects', 1]]);
    });
  });

  describe('deeply nested JSON', () => {
    it.each([
      ['arrays, 100,000 levels', deep(100_000)],
      ['objects, 20,000 levels', deepObject(20_000)],
      ['65 levels', deep(65)],
    ])('is a 422 on GET /v1/health without a key (%s)', async (_name, body) => {
      const res = await getWithBody(`${t.url}/v1/health`, body);
      expect(res.status).toBe(422);
      expect(res.body.detail).toEqual([expect.objectContaining({ loc: ['body'], type: 'json_too_deep' })]);
    });

    it('is a 422 on an operation with a key, before authorization or validation walk it', async () => {
      const res = await api('POST', `/v1/buckets/${bucketId}/objects/list`, `{"filters":{"AND":[${deep(50_000)}]}}`);
      expect(res.status).toBe(422);
      expect(res.body.detail[0].loc).toEqual(['body']);
    });

    it('accepts 64 levels (brackets inside strings do not count)', async () => {
      const metadata = JSON.parse(`${'{"a":'.repeat(63)}"${'['.repeat(500)}"${'}'.repeat(63)}`) as Record<string, unknown>;
      const res = await api('POST', `/v1/buckets/${bucketId}/objects`, { key: 'deep', metadata });
      expect(res.status).toBe(201);
    });

    it('refuses JSON in a charset other than UTF-8 with a 415', async () => {
      const res = await t.request('POST', '/v1/health', { body: '{}', headers: { 'Content-Type': 'application/json; charset=utf-16le' } });
      expect(res.status).toBeGreaterThanOrEqual(400);
      expect(res.status).toBeLessThan(500);
    });

    it('does not nest query strings', async () => {
      const res = await t.request('GET', `/v1/health?${'a'}${'[b]'.repeat(5000)}=1`);
      expect(res.status).toBeLessThan(500);
    });
  });

  describe('free-form JSON', () => {
    const sized = (bytes: number) => ({ note: 'x'.repeat(bytes - '{"note":""}'.length) });

    it('metadata over 64 KiB is a 422 naming where, and nothing is created', async () => {
      const big = await api('POST', '/v1/buckets', { bucket_name: 'too-much', metadata: sized(65_537) });
      expect(big.status).toBe(422);
      expect(big.body.detail).toEqual([expect.objectContaining({ loc: ['body', 'metadata'], type: 'json_too_large', msg: expect.stringMatching(/at most 65536 bytes/) })]);
      expect((await api('GET', '/v1/buckets/too-much')).status).toBe(404);
      expect((await api('POST', '/v1/buckets', { bucket_name: 'just-enough', metadata: sized(65_536) })).status).toBe(201);
      const bulk = await api('POST', `/v1/buckets/${bucketId}/objects/bulk`, { objects: [{ key: 'fine' }, { key: 'heavy', metadata: sized(70_000) }] });
      expect(bulk.status).toBe(422);
      expect(bulk.body.detail[0]).toMatchObject({ loc: ['body', 'objects', 1, 'metadata'], type: 'json_too_large' });
      const listed = await api('POST', `/v1/buckets/${bucketId}/objects/list`, {});
      expect(listed.status, listed.text).toBe(200);
      expect(listed.body.results.map((o: { key: string }) => o.key)).not.toContain('fine');
    });

    it('a query snapshot over 16 KiB is a 422', async () => {
      const retriever = await api('POST', '/v1/retrievers', {
        retriever_name: 'snapshots', collection_identifiers: ['hostile-collection'], input_schema: { q: { type: 'string' } },
        stages: [{ stage_name: 'sort', config: { stage_id: 'sort_attribute', parameters: { field: 'n', direction: 'asc' } } }],
      });
      expect(retriever.status, retriever.text).toBe(201);
      const path = `/v1/retrievers/${retriever.body.retriever.retriever_id}/interactions`;
      const big = await api('POST', path, { interactions: [{ document_id: 'd', interaction_type: ['CLICK'], query_snapshot: sized(16_385) }] });
      expect(big.status).toBe(422);
      expect(big.body.detail[0]).toMatchObject({ loc: ['body', 'interactions', 0, 'query_snapshot'], type: 'json_too_large' });
      expect((await api('POST', path, { document_id: 'd', interaction_type: ['CLICK'], query_snapshot: sized(16_384) })).status).toBe(200);
    });

    it("a number past a double's range is a 422, not a silent null", async () => {
      const huge = await api('POST', `/v1/buckets/${bucketId}/objects`, '{"key": "huge", "metadata": {"price": [1, 2e400]}}');
      expect(huge.status).toBe(422);
      expect(huge.body.detail).toEqual([expect.objectContaining({ loc: ['body', 'metadata', 'price', 1], type: 'number_out_of_range' })]);
      const digits = `1${'0'.repeat(400)}`;
      expect((await api('POST', `/v1/buckets/${bucketId}/objects`, `{"key": "long", "metadata": {"n": ${digits}}}`)).status).toBe(422);
      // At the edge of the range, and in strings, such spellings are fine.
      const fine = await api('POST', `/v1/buckets/${bucketId}/objects`, `{"key": "edge", "metadata": {"max": 1.7976931348623157e308, "text": "1e400 ${digits}"}}`);
      expect(fine.status, fine.text).toBe(201);
      expect(fine.body.metadata).toEqual({ max: 1.7976931348623157e308, text: `1e400 ${digits}` });
    });
  });

  describe('forged cursors', () => {
    const forged = [
      encodeCursor({ t: { $gt: 1 }, id: 'upl_x' }),
      encodeCursor({ t: '0000-01-01T00:00:00Z', id: 'btch_x' }),
      encodeCursor({ t: 'yesterday', id: 'x' }),
      encodeCursor({ s: 'created_at', d: 'desc', v: 'not-a-date', id: 'obj_x' }),
      encodeCursor({ s: 'created_at', d: 'desc', v: ['2026-01-01T00:00:00Z'], id: 'obj_x' }),
      encodeCursor({ s: 'created_at', d: 'desc', v: '2026-01-01T00:00:00Z', id: 42 }),
      encodeCursor({ seq: 1e300 }),
      encodeCursor({ seq: '1; drop table x' }),
      encodeCursor([1, 2]),
      'not base64 at all!',
      Buffer.from('not json').toString('base64url'),
    ];
    const listings = (cursor: string): Array<[string, string, unknown?]> => [
      ['GET', `/v1/buckets/${bucketId}/uploads?cursor=${encodeURIComponent(cursor)}`],
      ['GET', `/v1/buckets/${bucketId}/batches?cursor=${encodeURIComponent(cursor)}`],
      ['GET', `/v1/buckets/${bucketId}/objects?cursor=${encodeURIComponent(cursor)}`],
      ['POST', `/v1/buckets/${bucketId}/objects/list`, { cursor }],
      ['POST', `/v1/buckets/${bucketId}/objects/list`, { cursor, sort: { field: 'size_bytes' } }],
      ['GET', `/v1/collections/${collectionId}/documents?cursor=${encodeURIComponent(cursor)}`],
      ['POST', `/v1/collections/${collectionId}/documents/list`, { cursor }],
      ['GET', `/v1/organizations/audit-log?cursor=${encodeURIComponent(cursor)}`],
    ];

    it.each(forged.map((c) => [c] as const))('%s is a 4xx on every listing', async (cursor) => {
      for (const [method, path, body] of listings(cursor)) {
        const res = await api(method, path, body);
        expect({ path, status: res.status }).toEqual({ path, status: res.status < 500 && res.status >= 400 ? res.status : 'a 4xx' });
        if (res.status === 400) expect(res.body.error.type).toBe('InputError');
      }
    });

    it('a cursor of one sort is refused by another', async () => {
      for (let i = 0; i < 3; i++) await api('POST', `/v1/buckets/${bucketId}/objects`, { key: `page-${i}`, metadata: {} });
      const page = await api('POST', `/v1/buckets/${bucketId}/objects/list`, { limit: 1, sort: { field: 'size_bytes', direction: 'asc' } });
      expect(page.status).toBe(200);
      expect(page.body.next_cursor).toEqual(expect.any(String));
      const next = await api('POST', `/v1/buckets/${bucketId}/objects/list`, { limit: 1, cursor: page.body.next_cursor, sort: { field: 'size_bytes', direction: 'asc' } });
      expect(next.status).toBe(200);
      const wrong = await api('POST', `/v1/buckets/${bucketId}/objects/list`, { limit: 1, cursor: page.body.next_cursor });
      expect(wrong.status).toBe(400);
    });

    it('accepts cursor: null where responses return next_cursor: null', async () => {
      expect((await api('POST', `/v1/buckets/${bucketId}/objects/list`, { cursor: null })).status).toBe(200);
      expect((await api('POST', `/v1/collections/${collectionId}/documents/list`, { cursor: null })).status).toBe(200);
    });
  });

  describe('date-times', () => {
    const bad = ['0000-01-01T00:00:00Z', '2026-06-30T23:59:60Z', '2026-02-30T00:00:00Z', '1', '2026-01-01T00:00:00', '9999-12-31T23:59:59-01:00'];

    it.each(bad.map((v) => [v] as const))('usage window start %s is a 422 at the field', async (value) => {
      const res = await api('GET', `/v1/organizations/usage?start=${encodeURIComponent(value)}`, undefined, {});
      expect(res.status).toBe(422);
      expect(res.body.detail[0].loc).toEqual(['query', 'start']);
    });

    it.each(bad.map((v) => [v] as const))('audit-log end %s is a 422', async (value) => {
      const res = await api('GET', `/v1/organizations/audit-log?end=${encodeURIComponent(value)}`, undefined, {});
      expect(res.status).toBe(422);
    });

    it.each(bad.map((v) => [v] as const))('api key expires_at %s is a 422 at the field', async (value) => {
      const res = await api('POST', `/v1/organizations/users/${encodeURIComponent(t.adminEmail)}/api-keys`, { name: `k-${value.length}`, expires_at: value }, {});
      expect(res.status).toBe(422);
      expect(res.body.detail[0].loc).toEqual(['body', 'expires_at']);
    });

    it.each(bad.map((v) => [v] as const))('a timestamp filter value %s is a 422', async (value) => {
      const res = await api('POST', `/v1/buckets/${bucketId}/objects/list`, { filters: { AND: [{ field: 'created_at', operator: 'gt', value }] } });
      expect(res.status).toBe(422);
      expect(res.body.detail[0].msg).toMatch(/RFC 3339/);
    });

    it('accepts the edges and offsets', async () => {
      const ok = await api('GET', `/v1/organizations/usage?start=${encodeURIComponent('2025-06-01T00:00:00-09:30')}&end=${encodeURIComponent('2026-01-01T01:00:00.123456+01:00')}`, undefined, {});
      expect(ok.status).toBe(200);
      // Usage windows span at most 366 days; the audit log takes the whole range.
      const edge = await api('GET', `/v1/organizations/audit-log?start=${encodeURIComponent('0001-01-01T00:00:00Z')}&end=${encodeURIComponent('9999-12-31T23:59:59.999Z')}`, undefined, {});
      expect(edge.status).toBe(200);
      const filtered = await api('POST', `/v1/buckets/${bucketId}/objects/list`, {
        filters: { AND: [{ field: 'created_at', operator: 'gt', value: '0001-01-01T00:00:00+00:00' }] },
      });
      expect(filtered.status).toBe(200);
    });

    it('may be typed as they are written: colons need no percent-encoding', async () => {
      for (const path of ['/v1/organizations/usage', '/v1/organizations/audit-log']) {
        const raw = await api('GET', `${path}?start=2026-01-01T00:00:00Z&end=2026-01-02T12:30:00.5Z`, undefined, {});
        expect(raw.status, `${path}: ${raw.text}`).toBe(200);
      }
      const usage = await api('GET', '/v1/organizations/usage?start=2026-01-01T00:00:00%2B01:00&end=2026-01-02T00:00:00Z', undefined, {});
      expect(usage.status, usage.text).toBe(200);
      expect(usage.body.start).toBe('2025-12-31T23:00:00.000Z');
    });
  });

  describe('database errors', () => {
    it('map to a 400 naming the problem, without the SQL or its values', () => {
      const err = Object.assign(new Error('select * from "objects" where "created_at" > $1 - date/time field value out of range: "secret-value"'), {
        code: '22008',
        severity: 'ERROR',
        routine: 'DateTimeParseError',
        params: ['secret-value'],
      });
      const reply = mapError(err);
      expect(reply.status).toBe(400);
      expect(JSON.stringify(reply.body)).not.toMatch(/select|secret-value|\$1/);
      expect(JSON.stringify(reply.logged)).not.toMatch(/secret-value/);
    });

    it('an unknown database failure is a generic 500, logged without bound values', () => {
      const err = Object.assign(new Error('insert into "x" values ($1) - relation "x" does not exist'), {
        code: '42P01',
        severity: 'ERROR',
        params: ['secret-value'],
      });
      const reply = mapError(err);
      expect(reply.status).toBe(500);
      expect(JSON.stringify(reply.body)).not.toMatch(/insert|relation/);
      expect(JSON.stringify(reply.logged)).not.toMatch(/secret-value/);
    });
  });

  describe('headers', () => {
    it('every response says X-Content-Type-Options: nosniff', async () => {
      const object = await api('POST', `/v1/buckets/${bucketId}/objects`, { key: 'sniff', blobs: [{ property: 'content', text: '<script>alert(1)</script>' }] });
      expect(object.status).toBe(201);
      const fetched = await api('GET', `/v1/buckets/${bucketId}/objects/${object.body.object_id}`);
      const download = await fetch(fetched.body.blobs[0].url);
      expect(download.status).toBe(200);
      const responses = [
        object,
        await t.request('GET', '/v1/health'),
        await t.request('GET', '/v1/nowhere'),
        await t.request('DELETE', '/v1/health'),
        await t.request('GET', '/v1/me'),
        await t.request('OPTIONS', '/v1/me', { headers: { Origin: 'https://app.example.com', 'Access-Control-Request-Method': 'GET' } }),
        await api('POST', `/v1/buckets/${bucketId}/objects/list`, { limit: 'x' }),
      ];
      for (const res of responses) expect(res.headers.get('x-content-type-options')).toBe('nosniff');
      expect(download.headers.get('x-content-type-options')).toBe('nosniff');
    });

    it('never reflects Origin: null', async () => {
      const preflight = await t.request('OPTIONS', '/v1/me', { headers: { Origin: 'null', 'Access-Control-Request-Method': 'GET' } });
      expect(preflight.headers.get('access-control-allow-origin')).toBeNull();
      const me = await t.request('GET', '/v1/me', { key: t.adminKey, headers: { Origin: 'null' } });
      expect(me.headers.get('access-control-allow-origin')).toBeNull();
      const web = await t.request('GET', '/v1/me', { key: t.adminKey, headers: { Origin: 'https://app.example.com' } });
      expect(web.headers.get('access-control-allow-origin')).toBe('https://app.example.com');
    });
  });

  describe('presigned tokens', () => {
    it('never reach the logs, on success or failure', async () => {
      const object = await api('POST', `/v1/buckets/${bucketId}/objects`, { key: 'token', blobs: [{ property: 'content', text: 'hello' }] });
      const fetched = await api('GET', `/v1/buckets/${bucketId}/objects/${object.body.object_id}`);
      const url = new URL(fetched.body.blobs[0].url as string);
      const token = url.pathname.split('/').at(-1)!;
      expect((await fetch(url)).status).toBe(200);
      expect((await fetch(`${url.href}/more`)).status).toBe(404);
      expect((await fetch(url, { method: 'PUT', body: 'x' })).status).toBeGreaterThanOrEqual(400);
      await new Promise((resolve) => setTimeout(resolve, 50));
      const logged = t.logs.join('\n');
      expect(logged).toContain('/v1/storage/blobs/[redacted]');
      expect(logged).not.toContain(token);
      expect(logged).not.toContain(token.split('.')[1]!);
    });
  });
});
