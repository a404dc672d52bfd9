/**
 * A presigned upload URL does one thing, once: it fills a PENDING upload. After confirm it cannot
 * replace the object's bytes, after its bucket is deleted it cannot write a file, and a PUT still
 * streaming when confirm runs is refused at commit instead of changing what confirm checked.
 */
import { createHash } from 'node:crypto';
import { Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BlobStore } from '../../../../kernel/tokens.js';
import { startTestKernel, type TestKernel } from '../../../support/kernel.js';

const md5 = (b: Buffer) => createHash('md5').update(b).digest('hex');
const sha256 = (b: Buffer) => createHash('sha256').update(b).digest('hex');

describe('presigned upload URLs', () => {
  let t: TestKernel;
  const ns = 'upload_urls_ns';
  beforeAll(async () => {
    t = await startTestKernel();
    await t.client().POST('/v1/namespaces', { body: { namespace_name: ns } });
    await api('POST', '/v1/buckets', { bucket_name: 'files' });
  });
  afterAll(async () => {
    await t.stop();
  });
  const api = (method: string, path: string, body?: unknown) =>
    t.request(method, path, { key: t.adminKey, ...(body !== undefined ? { body } : {}), headers: { 'X-Namespace': ns } });
  const put = (url: string, body: Buffer | Readable, headers: Record<string, string> = {}) =>
    fetch(url, { method: 'PUT', body: body as never, headers, duplex: 'half' } as RequestInit);

  async function newUpload(bucket = 'files') {
    const res = await api('POST', `/v1/buckets/${bucket}/uploads`, { filename: 'notes.txt' });
    expect(res.status).toBe(201);
    return res.body as { upload_id: string; presigned_url: string };
  }

  async function objectBytes(objectId: string, bucket = 'files') {
    const object = await api('GET', `/v1/buckets/${bucket}/objects/${objectId}`);
    expect(object.status).toBe(200);
    const blob = object.body.blobs[0];
    return { blob, bytes: Buffer.from(await (await fetch(blob.url)).arrayBuffer()) };
  }

  it('refuses a used URL after confirm (409) and leaves the object, its content type and hashes unchanged', async () => {
    const original = Buffer.from('the confirmed text\n');
    const upload = await newUpload();
    // A second PUT while the upload is still PENDING replaces the pending bytes: allowed.
    expect((await put(upload.presigned_url, Buffer.from('first draft'))).status).toBe(200);
    expect((await put(upload.presigned_url, original)).status).toBe(200);
    const confirmed = await api('POST', `/v1/buckets/files/uploads/${upload.upload_id}/confirm`, {});
    expect(confirmed.status).toBe(200);
    expect(confirmed.body).toMatchObject({ etag: md5(original), file_hash: sha256(original) });

    const replaced = await put(upload.presigned_url, Buffer.from('%PDF-1.4 not what was confirmed'), { 'Content-Type': 'application/pdf' });
    expect(replaced.status).toBe(409);
    const body = (await replaced.json()) as { success: boolean; status: number; error: { type: string; message: string; details: Record<string, unknown> } };
    expect(body).toMatchObject({ success: false, status: 409, error: { type: 'ConflictError', details: { reason: 'confirmed', upload_id: upload.upload_id } } });
    expect(body.error.message).toMatch(/request a new upload/i);

    const { blob, bytes } = await objectBytes(confirmed.body.object_id);
    expect(bytes.equals(original)).toBe(true);
    expect(blob).toMatchObject({ content_type: 'text/plain', md5: md5(original), sha256: sha256(original) });
  });

  it('refuses a PUT after DELETE /v1/buckets/{id}?force=true (410) and writes no file', async () => {
    await api('POST', '/v1/buckets', { bucket_name: 'doomed' });
    const bucket = (await api('GET', '/v1/buckets/doomed')).body as { bucket_id: string };
    const upload = await newUpload('doomed');
    expect((await api('DELETE', '/v1/buckets/doomed?force=true')).status).toBe(200);

    const res = await put(upload.presigned_url, Buffer.from('orphan bytes'));
    expect(res.status).toBe(410);
    const body = (await res.json()) as { error: { type: string; message: string } };
    expect(body.error.type).toBe('GoneError');
    expect(body.error.message).toMatch(/request a new upload/i);

    const store = t.kernel.services.get(BlobStore);
    const left = [];
    for await (const info of store.list(`${bucket.bucket_id}`)) left.push(info.key);
    const orgPrefixed = [];
    for await (const info of store.list('')) if (info.key.includes(bucket.bucket_id)) orgPrefixed.push(info.key);
    expect([...left, ...orgPrefixed]).toEqual([]);
  });

  it('refuses at commit a PUT that was still streaming when confirm ran; confirm kept the bytes it checked', async () => {
    const checked = Buffer.from('bytes that confirm checked');
    const upload = await newUpload();
    expect((await put(upload.presigned_url, checked)).status).toBe(200);

    // A second PUT starts while PENDING (so it passes the first check) and is still sending its body.
    let finish!: () => void;
    const released = new Promise<void>((resolve) => (finish = resolve));
    const slow = Readable.from(
      (async function* () {
        yield Buffer.from('late bytes, part one; ');
        await released;
        yield Buffer.from('part two');
      })(),
    );
    const late = put(upload.presigned_url, slow);
    // Give the slow PUT time to be admitted and start streaming (not a timing assertion: either way it must not win).
    await new Promise((resolve) => setTimeout(resolve, 200));

    const confirmed = await api('POST', `/v1/buckets/files/uploads/${upload.upload_id}/confirm`, {});
    expect(confirmed.status).toBe(200);
    finish();
    expect((await late).status).toBe(409);

    const { blob, bytes } = await objectBytes(confirmed.body.object_id);
    expect(bytes.equals(checked)).toBe(true);
    expect(blob).toMatchObject({ md5: md5(checked), sha256: sha256(checked) });
  });

  it('keeps accepting PUTs after a failed sync confirm, which leaves the upload PENDING', async () => {
    const upload = await newUpload();
    expect((await put(upload.presigned_url, Buffer.from('wrong'))).status).toBe(200);
    const wrong = await api('POST', `/v1/buckets/files/uploads/${upload.upload_id}/confirm`, { etag: '0123456789abcdef0123456789abcdef' });
    expect(wrong.status).toBe(400);
    const fixed = Buffer.from('right');
    expect((await put(upload.presigned_url, fixed)).status).toBe(200);
    const ok = await api('POST', `/v1/buckets/files/uploads/${upload.upload_id}/confirm`, { etag: md5(fixed) });
    expect(ok.status).toBe(200);
  });
});
