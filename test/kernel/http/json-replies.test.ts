/**
 * Replies as a deployment sends them: without the response validation the other tests run with (which
 * wraps res.json), JSON bodies go out through the server's own single-write path (kernel/http/server.ts).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestKernel, type TestKernel } from '../../support/kernel.js';

describe('JSON replies without response validation', () => {
  let t: TestKernel;
  beforeAll(async () => {
    t = await startTestKernel({ config: { validateResponses: false } });
  });
  afterAll(async () => {
    await t.stop();
  });

  it('sends the body with its type and its length in bytes, non-ASCII text included', async () => {
    const description = 'café ✓ 検索 🔎';
    const res = await fetch(`${t.url}/v1/namespaces`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${t.adminKey}`, 'Content-Type': 'application/json' },
      body: JSON.stringify({ namespace_name: 'replies', description }),
    });
    const bytes = Buffer.from(await res.arrayBuffer());
    expect(res.status).toBe(201);
    expect(res.headers.get('content-type')).toBe('application/json; charset=utf-8');
    expect(Number(res.headers.get('content-length'))).toBe(bytes.length);
    const body = JSON.parse(bytes.toString('utf8')) as { namespace_name: string; description: string };
    expect(body).toMatchObject({ namespace_name: 'replies', description });
  });

  it('sends a large reply (encoded once, as bytes) whole, with its length in bytes', async () => {
    const headers = { Authorization: `Bearer ${t.adminKey}`, 'Content-Type': 'application/json', 'X-Namespace': 'replies' };
    // Past the 16 K characters where the reply goes out as a Buffer: 24 descriptions of 960 non-ASCII characters.
    for (let i = 0; i < 24; i++) {
      const res = await fetch(`${t.url}/v1/buckets`, {
        method: 'POST', headers, body: JSON.stringify({ bucket_name: `large-reply-${i}`, description: `${i} ${'検索✓é'.repeat(240)}` }),
      });
      expect(res.status).toBe(201);
    }
    const res = await fetch(`${t.url}/v1/buckets?limit=100`, { headers });
    const bytes = Buffer.from(await res.arrayBuffer());
    expect(res.status).toBe(200);
    expect(bytes.length).toBeGreaterThan(16 * 1024 * 2);
    expect(Number(res.headers.get('content-length'))).toBe(bytes.length);
    const listed = JSON.parse(bytes.toString('utf8')) as { results: Array<{ bucket_name: string; description: string }> };
    expect(listed.results.filter((b) => b.bucket_name.startsWith('large-reply-')).map((b) => b.description).sort())
      .toEqual(Array.from({ length: 24 }, (_, i) => `${i} ${'検索✓é'.repeat(240)}`).sort());
  });

  it('answers a submitted batch\'s status with its object ids encoded once, the same JSON each time', async () => {
    const headers = { Authorization: `Bearer ${t.adminKey}`, 'Content-Type': 'application/json', 'X-Namespace': 'replies' };
    const call = async (method: string, route: string, body?: unknown) => {
      const res = await fetch(`${t.url}${route}`, { method, headers, ...(body !== undefined ? { body: JSON.stringify(body) } : {}) });
      return { res, bytes: Buffer.from(await res.arrayBuffer()) };
    };
    expect((await call('POST', '/v1/buckets', { bucket_name: 'polled' })).res.status).toBe(201);
    const created = await call('POST', '/v1/collections/create', {
      collection_name: 'polled', source: { type: 'bucket', bucket_id: 'polled' }, feature_extractors: [{ feature_extractor_name: 'text_extractor' }],
    });
    expect(created.res.status).toBe(201);
    const objects = Array.from({ length: 30 }, (_, i) => ({ key: `ü/${i}`, blobs: [{ property: 'content', text: `text ${i}` }] }));
    const bulk = JSON.parse((await call('POST', '/v1/buckets/polled/objects/bulk', { objects })).bytes.toString('utf8')) as { results: Array<{ object_id: string }> };
    const ids = bulk.results.map((o) => o.object_id);
    const batch = JSON.parse((await call('POST', '/v1/buckets/polled/batches', { object_ids: ids })).bytes.toString('utf8')) as { batch_id: string };
    expect((await call('POST', `/v1/buckets/polled/batches/${batch.batch_id}/submit`)).res.status).toBe(202);
    const polls = [];
    for (let i = 0; i < 3; i++) polls.push(await call('GET', `/v1/buckets/polled/batches/${batch.batch_id}`));
    for (const { res, bytes } of polls) {
      expect(res.status).toBe(200);
      expect(Number(res.headers.get('content-length'))).toBe(bytes.length);
      const body = JSON.parse(bytes.toString('utf8')) as { batch_id: string; object_ids: string[]; loaded_object_ids: string[]; progress: { records_total: number } };
      expect(body).toMatchObject({ batch_id: batch.batch_id, object_ids: ids, loaded_object_ids: ids });
      // 0 until the tier is planned into chunks (the batch runs meanwhile), then every object.
      expect([0, 30]).toContain(body.progress.records_total);
    }
  });

  it('answers reads the same way, and errors as ErrorResponse', async () => {
    const me = await fetch(`${t.url}/v1/me`, { headers: { Authorization: `Bearer ${t.adminKey}` } });
    expect(me.status).toBe(200);
    expect(me.headers.get('x-request-id')).toMatch(/^req_/);
    expect(((await me.json()) as { key: { name: string } }).key.name).toBe('admin-key');
    const missing = await fetch(`${t.url}/v1/namespaces/ns_missing`, { headers: { Authorization: `Bearer ${t.adminKey}` } });
    expect(missing.status).toBe(404);
    expect(await missing.json()).toMatchObject({ success: false, status: 404 });
  });
});
