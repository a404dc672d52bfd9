import { createHash, randomBytes } from 'node:crypto';
import http from 'node:http';
import { Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TaskQueue } from '../../../../kernel/tokens.js';
import { startTestKernel, type TestKernel } from '../../../support/kernel.js';

const md5 = (b: Buffer) => createHash('md5').update(b).digest('hex');

describe('uploads', () => {
  let t: TestKernel;
  const ns = 'uploads_ns';
  beforeAll(async () => {
    t = await startTestKernel();
    await t.client().POST('/v1/namespaces', { body: { namespace_name: ns } });
    await t.request('POST', '/v1/buckets', { key: t.adminKey, headers: { 'X-Namespace': ns }, body: { bucket_name: 'files' } });
  });
  afterAll(async () => {
    await t.stop();
  });
  const api = (method: string, path: string, body?: unknown) =>
    t.request(method, path, { key: t.adminKey, ...(body !== undefined ? { body } : {}), headers: { 'X-Namespace': ns } });

  async function newUpload(extra: Record<string, unknown> = {}) {
    const res = await api('POST', '/v1/buckets/files/uploads', { filename: 'notes.txt', ...extra });
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({ status: 'PENDING', method: 'PUT' });
    return res.body as { upload_id: string; presigned_url: string; headers: Record<string, string> };
  }

  const put = (url: string, body: Buffer | Readable, headers: Record<string, string> = {}) =>
    fetch(url, { method: 'PUT', body: body as never, headers, duplex: 'half' } as RequestInit);

  it('goes PENDING → COMPLETED on a sync confirm with a matching quoted etag and size, creating the object', async () => {
    const file = Buffer.from('hello uploads\n');
    const upload = await newUpload();
    const stored = await put(upload.presigned_url, file);
    expect(stored.status).toBe(200);
    expect(stored.headers.get('etag')).toBe(`"${md5(file)}"`);

    const confirmed = await api('POST', `/v1/buckets/files/uploads/${upload.upload_id}/confirm`, {
      etag: `"${md5(file)}"`,
      file_size_bytes: file.length,
    });
    expect(confirmed.status).toBe(200);
    expect(confirmed.body).toMatchObject({ status: 'COMPLETED', etag: md5(file), file_size_bytes: file.length });
    expect(confirmed.body.object_id).toMatch(/^obj_/);
    expect(confirmed.body.file_hash).toBe(createHash('sha256').update(file).digest('hex'));

    const object = await api('GET', `/v1/buckets/files/objects/${confirmed.body.object_id}`);
    expect(object.body.blobs[0]).toMatchObject({ property: 'content', source: 'upload', content_type: 'text/plain', filename: 'notes.txt' });
    expect(Buffer.from(await (await fetch(object.body.blobs[0].url)).arrayBuffer()).equals(file)).toBe(true);

    const again = await api('POST', `/v1/buckets/files/uploads/${upload.upload_id}/confirm`, {});
    expect(again.status).toBe(409);
  });

  it('refuses a confirm with no file, a wrong etag or a wrong size with a 400, and stays PENDING', async () => {
    const file = Buffer.from('checked carefully');
    const upload = await newUpload();
    const confirmPath = `/v1/buckets/files/uploads/${upload.upload_id}/confirm`;

    const missing = await api('POST', confirmPath, {});
    expect(missing.status).toBe(400);
    expect(missing.body.error.message).toMatch(/PUT it/);

    await put(upload.presigned_url, file);
    const wrongEtag = await api('POST', confirmPath, { etag: '0123456789abcdef0123456789abcdef' });
    expect(wrongEtag.status).toBe(400);
    const wrongSize = await api('POST', confirmPath, { file_size_bytes: file.length + 1 });
    expect(wrongSize.status).toBe(400);
    expect((await api('GET', `/v1/buckets/files/uploads/${upload.upload_id}`)).body.status).toBe('PENDING');

    const zero = await api('POST', confirmPath, { file_size_bytes: 0 });
    expect(zero.status).toBe(422);

    const ok = await api('POST', confirmPath, { etag: md5(file) });
    expect(ok.status).toBe(200);
    expect(ok.body.status).toBe('COMPLETED');
  });

  it('confirms asynchronously: PROCESSING with a task_id, then COMPLETED', async () => {
    const file = randomBytes(64 * 1024);
    const upload = await newUpload({ filename: 'data.bin' });
    await put(upload.presigned_url, file);
    const accepted = await api('POST', `/v1/buckets/files/uploads/${upload.upload_id}/confirm?async=true`, { etag: md5(file) });
    expect(accepted.status).toBe(202);
    expect(accepted.body.status).toBe('PROCESSING');
    expect(accepted.body.task_id).toMatch(/^task_/);

    await t.kernel.services.get(TaskQueue).drain();
    let state = (await api('GET', `/v1/buckets/files/uploads/${upload.upload_id}`)).body;
    for (let i = 0; i < 100 && state.status === 'PROCESSING'; i++) {
      await new Promise((r) => setTimeout(r, 50));
      state = (await api('GET', `/v1/buckets/files/uploads/${upload.upload_id}`)).body;
    }
    expect(state.status).toBe('COMPLETED');
    expect(state.object_id).toMatch(/^obj_/);
  });

  it('ends an async confirm whose check fails as FAILED with the reason', async () => {
    const upload = await newUpload();
    await put(upload.presigned_url, Buffer.from('abc'));
    const accepted = await api('POST', `/v1/buckets/files/uploads/${upload.upload_id}/confirm?async=true`, { file_size_bytes: 99 });
    expect(accepted.status).toBe(202);
    await t.kernel.services.get(TaskQueue).drain();
    let state = (await api('GET', `/v1/buckets/files/uploads/${upload.upload_id}`)).body;
    for (let i = 0; i < 100 && state.status === 'PROCESSING'; i++) {
      await new Promise((r) => setTimeout(r, 50));
      state = (await api('GET', `/v1/buckets/files/uploads/${upload.upload_id}`)).body;
    }
    expect(state.status).toBe('FAILED');
    expect(state.error).toMatch(/does not match/);
  });

  it('refuses a declared size above the maximum (413) and a PUT larger than declared (413)', async () => {
    const tooBig = await api('POST', '/v1/buckets/files/uploads', { filename: 'huge.bin', file_size_bytes: 10 * 1024 ** 4 });
    expect(tooBig.status).toBe(413);
    const upload = await newUpload({ file_size_bytes: 10 });
    const res = await put(upload.presigned_url, Buffer.alloc(100, 1));
    expect(res.status).toBe(413);
  });

  it('streams a 200 MB upload without holding it in memory', async () => {
    const size = 200 * 1024 * 1024;
    const upload = await newUpload({ filename: 'big.bin', file_size_bytes: size });
    const hash = createHash('md5');
    const chunk = randomBytes(1024 * 1024);
    let sent = 0;
    const source = new Readable({
      read() {
        if (sent >= size) return this.push(null);
        sent += chunk.length;
        hash.update(chunk);
        this.push(chunk);
      },
    });
    global.gc?.();
    const baseline = process.memoryUsage();
    let peak = 0;
    const sampler = setInterval(() => {
      const m = process.memoryUsage();
      peak = Math.max(peak, m.rss - baseline.rss);
    }, 20);
    // Plain http (not fetch) so the client side buffers nothing either.
    const { port, pathname } = new URL(upload.presigned_url);
    const status = await new Promise<number>((resolve, reject) => {
      const req = http.request({ host: '127.0.0.1', port, path: pathname, method: 'PUT', headers: { 'Content-Length': size } }, (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
      });
      req.on('error', reject);
      source.pipe(req);
    });
    clearInterval(sampler);
    expect(status).toBe(200);
    expect(peak).toBeLessThan(50 * 1024 * 1024);
    const confirmed = await api('POST', `/v1/buckets/files/uploads/${upload.upload_id}/confirm`, { etag: hash.digest('hex'), file_size_bytes: size });
    expect(confirmed.status).toBe(200);
    expect(confirmed.body.status).toBe('COMPLETED');
  });

  it('lists uploads by status with cursor pagination', async () => {
    const pending = await api('GET', '/v1/buckets/files/uploads?status=PENDING&limit=2');
    expect(pending.status).toBe(200);
    expect(pending.body.results.every((u: { status: string }) => u.status === 'PENDING')).toBe(true);
    const all: string[] = [];
    let cursor: string | null = null;
    do {
      const page: { body: { results: Array<{ upload_id: string }>; next_cursor: string | null } } = await api(
        'GET',
        `/v1/buckets/files/uploads?limit=2${cursor ? `&cursor=${cursor}` : ''}`,
      );
      all.push(...page.body.results.map((u) => u.upload_id));
      cursor = page.body.next_cursor;
    } while (cursor);
    expect(new Set(all).size).toBe(all.length);
    expect(all.length).toBeGreaterThanOrEqual(6);
  });
});
