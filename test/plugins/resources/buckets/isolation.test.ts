import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../../../kernel/clock.js';
import { BlobStore, ReferenceRegistry, TaskQueue, TenantStore } from '../../../../kernel/tokens.js';
import { startTestKernel, type TestKernel } from '../../../support/kernel.js';

describe('bucket isolation, scopes and lifecycle', () => {
  let t: TestKernel;
  let otherOrgKey: string;
  const clock = new ManualClock(new Date('2026-03-01T10:00:00Z'));
  let files: http.Server;
  let filesUrl: string;

  beforeAll(async () => {
    t = await startTestKernel({ clock, config: { allowPrivateUrlFetch: true, uploadCleanupIntervalMs: 0 } });
    for (const name of ['alpha', 'beta']) await t.client().POST('/v1/namespaces', { body: { namespace_name: name } });
    for (const ns of ['alpha', 'beta']) {
      await t.request('POST', '/v1/buckets', { key: t.adminKey, headers: { 'X-Namespace': ns }, body: { bucket_name: 'shared-name' } });
    }
    const other = await t.kernel.services.get(TenantStore).createOrganization({ name: 'other', ownerEmail: 'o@other.test' });
    otherOrgKey = other.adminKeyPlaintext;
    files = http.createServer((req, res) => {
      if (req.url === '/hello.txt') {
        res.writeHead(200, { 'Content-Type': 'text/plain' });
        res.end('hello from a URL');
      } else if (req.url === '/redirect') {
        res.writeHead(302, { Location: '/hello.txt' });
        res.end();
      } else {
        res.writeHead(404).end();
      }
    });
    await new Promise<void>((r) => files.listen(0, '127.0.0.1', r));
    filesUrl = `http://127.0.0.1:${(files.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    files.close();
    await t.stop();
  });

  const api = (method: string, path: string, ns: string, body?: unknown, key = t.adminKey) =>
    t.request(method, path, { key, headers: { 'X-Namespace': ns }, ...(body !== undefined ? { body } : {}) });

  it('keeps buckets of the same name apart per namespace, and invisible across organizations', async () => {
    const a = await api('POST', '/v1/buckets/shared-name/objects', 'alpha', { blobs: [{ property: 'content', text: 'in alpha' }] });
    expect(a.status).toBe(201);
    expect((await api('GET', `/v1/buckets/shared-name/objects/${a.body.object_id}`, 'beta')).status).toBe(404);
    expect((await api('GET', '/v1/buckets/shared-name', 'alpha', undefined, otherOrgKey)).status).toBe(404);
    const alphaBucket = (await api('GET', '/v1/buckets/shared-name', 'alpha')).body;
    expect((await api('GET', `/v1/buckets/${alphaBucket.bucket_id}`, 'beta')).status).toBe(404);
    expect((await t.request('GET', '/v1/buckets', { key: t.adminKey })).status).toBe(422);
  });

  it('applies namespace and bucket scopes', async () => {
    const make = async (name: string, scopes: unknown[], permissions = ['read', 'write', 'delete']) =>
      (await t.request('POST', `/v1/organizations/users/${t.adminEmail}/api-keys`, { key: t.adminKey, body: { name, scopes, permissions } })).body
        .key as string;
    const alphaOnly = await make('alpha-only', [{ resource_type: 'namespace', resource_id: 'alpha' }]);
    expect((await api('GET', '/v1/buckets', 'alpha', undefined, alphaOnly)).status).toBe(200);
    expect((await api('GET', '/v1/buckets', 'beta', undefined, alphaOnly)).status).toBe(403);

    const bucket = (await api('GET', '/v1/buckets/shared-name', 'beta')).body;
    const oneBucketReadOnly = await make('one-bucket', [{ resource_type: 'bucket', resource_id: bucket.bucket_id, operations: ['read_data'] }]);
    expect((await api('GET', '/v1/buckets/shared-name', 'beta', undefined, oneBucketReadOnly)).status).toBe(200);
    expect((await api('GET', '/v1/buckets/shared-name/objects', 'beta', undefined, oneBucketReadOnly)).status).toBe(200);
    const write = await api('POST', '/v1/buckets/shared-name/objects', 'beta', { blobs: [{ property: 'content', text: 'x' }] }, oneBucketReadOnly);
    expect(write.status).toBe(403);
    expect((await api('GET', '/v1/buckets/shared-name', 'alpha', undefined, oneBucketReadOnly)).status).toBe(403);

    const reader = await make('reader', [], ['read']);
    expect((await api('POST', '/v1/buckets', 'alpha', { bucket_name: 'nope' }, reader)).status).toBe(403);
  });

  it('fetches URL blobs (following redirects) when private addresses are allowed by the setting', async () => {
    const created = await api('POST', '/v1/buckets/shared-name/objects', 'alpha', { blobs: [{ property: 'content', url: `${filesUrl}/redirect` }] });
    expect(created.status).toBe(201);
    expect(created.body.blobs[0]).toMatchObject({ source: 'url', source_url: `${filesUrl}/hello.txt`, filename: 'hello.txt', content_type: 'text/plain' });
    const missing = await api('POST', '/v1/buckets/shared-name/objects', 'alpha', { blobs: [{ property: 'content', url: `${filesUrl}/nothing` }] });
    expect(missing.status).toBe(400);
    const ftp = await api('POST', '/v1/buckets/shared-name/objects', 'alpha', { blobs: [{ property: 'content', url: 'ftp://example.test/a' }] });
    expect(ftp.status).toBe(400);
  });

  it('refuses to delete a bucket something still reads unless forced, and purges its blobs', async () => {
    await api('POST', '/v1/buckets', 'alpha', { bucket_name: 'guarded' });
    const bucket = (await api('GET', '/v1/buckets/guarded', 'alpha')).body;
    // base64: a blob with a file of its own (small inline text stays in the object row until a file is asked for).
    const obj = await api('POST', '/v1/buckets/guarded/objects', 'alpha', { blobs: [{ property: 'content', base64: Buffer.from('keep me?').toString('base64') }] });
    t.kernel.services.get(ReferenceRegistry).register('bucket', async (_org, id) =>
      id === bucket.bucket_id ? [{ resource_type: 'collection', resource_id: 'col_1', resource_name: 'reader', relation: 'source' }] : [],
    );
    const refused = await api('DELETE', '/v1/buckets/guarded', 'alpha');
    expect(refused.status).toBe(409);
    expect(refused.body.error.message).toMatch(/collection 'reader'/);
    const store = t.kernel.services.get(BlobStore);
    const blobsOfBucket = async () => {
      const keys: string[] = [];
      for await (const b of store.list('')) if (b.key.includes(bucket.bucket_id)) keys.push(b.key);
      return keys;
    };
    expect(await blobsOfBucket()).toHaveLength(1);
    const forced = await api('DELETE', '/v1/buckets/guarded?force=true', 'alpha');
    expect(forced.status).toBe(200);
    expect(forced.body).toMatchObject({ deleted: true, objects_deleted: 1 });
    expect((await api('GET', `/v1/buckets/guarded/objects/${obj.body.object_id}`, 'alpha')).status).toBe(404);
    // The purge runs as a background task (this drain, or the kernel's own runner): wait for it.
    let left = await blobsOfBucket();
    for (let i = 0; i < 200 && left.length > 0; i++) {
      await t.kernel.services.get(TaskQueue).drain();
      await new Promise((r) => setTimeout(r, 10));
      left = await blobsOfBucket();
    }
    expect(left).toEqual([]);
  });

  it('cleans up uploads nobody confirmed before they expired, removing their files', async () => {
    const upload = (await api('POST', '/v1/buckets/shared-name/uploads', 'alpha', { filename: 'late.txt', expires_in_seconds: 60 })).body;
    const put = await fetch(upload.presigned_url, { method: 'PUT', body: 'too late' });
    expect(put.status).toBe(200);
    clock.advance(2 * 60 * 1000);
    const tasks = t.kernel.services.get(TaskQueue);
    const cleanup = await tasks.enqueue('uploads.cleanup', {});
    for (let i = 0; i < 200 && (await tasks.get(cleanup.task_id))?.status !== 'COMPLETED'; i++) {
      await tasks.drain();
      await new Promise((r) => setTimeout(r, 10));
    }
    const after = (await api('GET', `/v1/buckets/shared-name/uploads/${upload.upload_id}`, 'alpha')).body;
    expect(after.status).toBe('CANCELED');
    expect((await api('POST', `/v1/buckets/shared-name/uploads/${upload.upload_id}/confirm`, 'alpha', {})).status).toBe(409);
  });

  it('removes the buckets, objects and blobs of a deleted namespace', async () => {
    await t.client().POST('/v1/namespaces', { body: { namespace_name: 'doomed' } });
    await api('POST', '/v1/buckets', 'doomed', { bucket_name: 'b' });
    const obj = await api('POST', '/v1/buckets/b/objects', 'doomed', { blobs: [{ property: 'content', text: 'bye' }] });
    expect(obj.status).toBe(201);
    const ns = (await t.client().GET('/v1/namespaces/{name}', { params: { path: { name: 'doomed' } } })).data!;
    await t.client().DELETE('/v1/namespaces/{name}', { params: { path: { name: 'doomed' } } });
    const tasks = t.kernel.services.get(TaskQueue);
    const store = t.kernel.services.get(BlobStore);
    let remaining = 1;
    for (let i = 0; i < 100 && remaining > 0; i++) {
      await tasks.drain();
      remaining = 0;
      for await (const b of store.list('')) if (b.key.includes(ns.namespace_id)) remaining += 1;
      if (remaining > 0) await new Promise((r) => setTimeout(r, 20));
    }
    expect(remaining).toBe(0);
  });
});
