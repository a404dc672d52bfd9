/**
 * The BlobStore contract: every implementation runs this same suite (local.test.ts, s3.test.ts).
 * Each run works under its own random key prefix, so it can share a bucket or folder with others.
 */
import { createHash, randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BlobInfo, BlobStore } from '../../../kernel/blobs/blob-store.js';
import { InputError, NotFoundError, PayloadTooLargeError } from '../../../kernel/errors.js';
import { randomBase62 } from '../../../kernel/ids.js';

export interface BlobStoreSubject {
  store: BlobStore;
  /** Performs a request on a presigned URL; defaults to the global fetch. */
  fetchUrl?: (url: string, init?: RequestInit) => Promise<Response>;
  cleanup(): Promise<void>;
}

const MiB = 1024 * 1024;

function md5(data: Buffer): string {
  return createHash('md5').update(data).digest('hex');
}
function sha256(data: Buffer): string {
  return createHash('sha256').update(data).digest('hex');
}

/** A stream of `total` random bytes in 1 MiB chunks, hashing them as they go out; no Buffer of the whole. */
function generated(total: number): { stream: Readable; expected: () => { md5: string; sha256: string } } {
  const m = createHash('md5');
  const s = createHash('sha256');
  async function* chunks(): AsyncGenerator<Buffer> {
    for (let sent = 0; sent < total; ) {
      const chunk = randomBytes(Math.min(MiB, total - sent));
      m.update(chunk);
      s.update(chunk);
      sent += chunk.length;
      yield chunk;
    }
  }
  return { stream: Readable.from(chunks()), expected: () => ({ md5: m.digest('hex'), sha256: s.digest('hex') }) };
}

async function readAll(body: NodeJS.ReadableStream): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const chunk of body) parts.push(Buffer.from(chunk as Buffer));
  return Buffer.concat(parts);
}

/** Hashes a stream without keeping it. */
async function digestStream(body: NodeJS.ReadableStream): Promise<{ size: number; md5: string; sha256: string }> {
  const m = createHash('md5');
  const s = createHash('sha256');
  let size = 0;
  for await (const chunk of body) {
    const buf = chunk as Buffer;
    size += buf.length;
    m.update(buf);
    s.update(buf);
  }
  return { size, md5: m.digest('hex'), sha256: s.digest('hex') };
}

async function collect(iterable: AsyncIterable<BlobInfo>): Promise<BlobInfo[]> {
  const out: BlobInfo[] = [];
  for await (const info of iterable) out.push(info);
  return out;
}

export function runBlobStoreContract(name: string, factory: () => Promise<BlobStoreSubject>): void {
  describe(`BlobStore contract: ${name}`, () => {
    let subject: BlobStoreSubject;
    let store: BlobStore;
    const root = `contract_${randomBase62(10)}/`;
    const key = (rest: string): string => root + rest;
    const fetchUrl = (url: string, init?: RequestInit): Promise<Response> => (subject.fetchUrl ?? fetch)(url, init);

    beforeAll(async () => {
      subject = await factory();
      store = subject.store;
    });
    afterAll(async () => {
      if (!subject) return;
      await store.deletePrefix(root).catch(() => undefined);
      await subject.cleanup();
    });

    it('answers the health probe', async () => {
      await expect(store.ping()).resolves.toBeUndefined();
    });

    it('round-trips a Buffer with size, content type and digests', async () => {
      const data = Buffer.from('hello, tessera\n');
      const info = await store.put(key('rt/buffer.txt'), data, { contentType: 'text/plain' });
      expect(info).toMatchObject({ key: key('rt/buffer.txt'), size: data.length, contentType: 'text/plain', md5: md5(data), sha256: sha256(data) });
      expect(info.createdAt).toBeInstanceOf(Date);
      const got = await store.get(key('rt/buffer.txt'));
      expect(await readAll(got.body)).toEqual(data);
      expect(got.info).toMatchObject({ size: data.length, contentType: 'text/plain', md5: md5(data), sha256: sha256(data) });
      const head = await store.head(key('rt/buffer.txt'));
      expect(head).toMatchObject({ key: key('rt/buffer.txt'), size: data.length, md5: md5(data), sha256: sha256(data) });
      expect(head!.createdAt.getTime()).toBe(info.createdAt.getTime());
    });

    it('round-trips a stream and defaults the content type', async () => {
      const parts = [Buffer.from('abc'), Buffer.from('def'), randomBytes(1000)];
      const info = await store.put(key('rt/stream.bin'), Readable.from(parts));
      const all = Buffer.concat(parts);
      expect(info).toMatchObject({ size: all.length, contentType: 'application/octet-stream', md5: md5(all), sha256: sha256(all) });
      expect(await readAll((await store.get(key('rt/stream.bin'))).body)).toEqual(all);
    });

    it('stores an empty blob', async () => {
      const info = await store.put(key('rt/empty'), Buffer.alloc(0));
      expect(info).toMatchObject({ size: 0, md5: md5(Buffer.alloc(0)), sha256: sha256(Buffer.alloc(0)) });
      const got = await store.get(key('rt/empty'));
      expect(got.info.size).toBe(0);
      expect((await readAll(got.body)).length).toBe(0);
    });

    it('keeps keys with spaces and non-ASCII characters', async () => {
      const k = key('odd names/ü 名 (1)+x=y.txt');
      await store.put(k, Buffer.from('odd'));
      expect(await readAll((await store.get(k)).body)).toEqual(Buffer.from('odd'));
      expect((await collect(store.list(key('odd names/')))).map((i) => i.key)).toEqual([k]);
    });

    it('streams 50 MB through put and get without holding it whole', async () => {
      const total = 50 * MiB;
      const { stream, expected } = generated(total);
      const info = await store.put(key('big/50mb.bin'), stream, { contentType: 'application/x-test' });
      const want = expected();
      expect(info).toMatchObject({ size: total, md5: want.md5, sha256: want.sha256 });
      const got = await store.get(key('big/50mb.bin'));
      expect(got.info).toMatchObject({ size: total, md5: want.md5, sha256: want.sha256, contentType: 'application/x-test' });
      expect(await digestStream(got.body)).toEqual({ size: total, ...want });
    });

    it('serves inclusive byte ranges and reports the whole size', async () => {
      const data = Buffer.from('abcdefghij');
      await store.put(key('range/abc'), data);
      const middle = await store.get(key('range/abc'), { start: 2, end: 5 });
      expect((await readAll(middle.body)).toString()).toBe('cdef');
      expect(middle.info.size).toBe(10);
      expect((await readAll((await store.get(key('range/abc'), { start: 7 })).body)).toString()).toBe('hij');
      expect((await readAll((await store.get(key('range/abc'), { start: 8, end: 100 })).body)).toString()).toBe('ij');
      expect((await readAll((await store.get(key('range/abc'), { start: 0, end: 0 })).body)).toString()).toBe('a');
      await expect(store.get(key('range/abc'), { start: 10 })).rejects.toBeInstanceOf(InputError);
      await expect(store.get(key('range/abc'), { start: -1 })).rejects.toBeInstanceOf(InputError);
      await expect(store.get(key('range/abc'), { start: 5, end: 4 })).rejects.toBeInstanceOf(InputError);
    });

    it('answers head of a missing key with undefined and get with NotFoundError', async () => {
      expect(await store.head(key('missing/nothing'))).toBeUndefined();
      await expect(store.get(key('missing/nothing'))).rejects.toBeInstanceOf(NotFoundError);
      await expect(store.get(key('missing/nothing'), { start: 0 })).rejects.toBeInstanceOf(NotFoundError);
      await expect(store.ensureDigests(key('missing/nothing'))).rejects.toBeInstanceOf(NotFoundError);
    });

    it('deletes idempotently', async () => {
      await store.put(key('del/one'), Buffer.from('1'));
      await store.delete(key('del/one'));
      expect(await store.head(key('del/one'))).toBeUndefined();
      await expect(store.delete(key('del/one'))).resolves.toBeUndefined();
      await expect(store.delete(key('del/never/was'))).resolves.toBeUndefined();
    });

    it('lets a key and keys below it coexist', async () => {
      await store.put(key('nest/a'), Buffer.from('outer'));
      await store.put(key('nest/a/b'), Buffer.from('inner'));
      expect(await readAll((await store.get(key('nest/a'))).body)).toEqual(Buffer.from('outer'));
      expect(await readAll((await store.get(key('nest/a/b'))).body)).toEqual(Buffer.from('inner'));
      await store.delete(key('nest/a'));
      expect(await store.head(key('nest/a/b'))).toBeDefined();
    });

    it('lists by plain string prefix, in key order, with full info', async () => {
      const keys = ['list/a/2', 'list/a/1', 'list/a/sub/3', 'list/ab/4', 'list/b/5'].map(key);
      for (const k of keys) await store.put(k, Buffer.from(k), { contentType: 'text/plain' });
      const underA = await collect(store.list(key('list/a/')));
      expect(underA.map((i) => i.key)).toEqual(['list/a/1', 'list/a/2', 'list/a/sub/3'].map(key));
      expect(underA[0]).toMatchObject({ size: Buffer.byteLength(key('list/a/1')), contentType: 'text/plain', md5: md5(Buffer.from(key('list/a/1'))) });
      expect((await collect(store.list(key('list/a')))).map((i) => i.key)).toEqual(['list/a/1', 'list/a/2', 'list/a/sub/3', 'list/ab/4'].map(key));
      expect((await collect(store.list(key('list/')))).length).toBe(5);
      expect(await collect(store.list(key('list/zzz')))).toEqual([]);
      expect(await collect(store.list(key('nothing-here/')))).toEqual([]);
    });

    it('deletes by prefix and counts what it removed', async () => {
      for (const k of ['dp/x/1', 'dp/x/2', 'dp/x/deep/3', 'dp/xy/4'].map(key)) await store.put(k, Buffer.from('d'));
      expect(await store.deletePrefix(key('dp/x/'))).toBe(3);
      expect((await collect(store.list(key('dp/')))).map((i) => i.key)).toEqual([key('dp/xy/4')]);
      expect(await store.deletePrefix(key('dp/x/'))).toBe(0);
      expect(await store.deletePrefix(key('dp/x'))).toBe(1);
      expect(await collect(store.list(key('dp/')))).toEqual([]);
    });

    it('refuses a body over maxBytes with PayloadTooLargeError and stores nothing', async () => {
      await expect(store.put(key('max/buf'), Buffer.alloc(11), { maxBytes: 10 })).rejects.toBeInstanceOf(PayloadTooLargeError);
      expect(await store.head(key('max/buf'))).toBeUndefined();
      await expect(store.put(key('max/stream'), Readable.from([Buffer.alloc(6), Buffer.alloc(6)]), { maxBytes: 10 })).rejects.toBeInstanceOf(
        PayloadTooLargeError,
      );
      expect(await store.head(key('max/stream'))).toBeUndefined();
      // Past the first chunks too: big enough that a store streaming in parts has started sending.
      const { stream } = generated(12 * MiB);
      await expect(store.put(key('max/large'), stream, { maxBytes: 10 * MiB })).rejects.toBeInstanceOf(PayloadTooLargeError);
      expect(await store.head(key('max/large'))).toBeUndefined();
      expect(await collect(store.list(key('max/')))).toEqual([]);
      // Exactly at the limit is fine.
      await expect(store.put(key('max/exact'), Buffer.alloc(10), { maxBytes: 10 })).resolves.toMatchObject({ size: 10 });
    });

    it('keeps the previous blob when a replacement fails', async () => {
      await store.put(key('keep/blob'), Buffer.from('original'));
      await expect(store.put(key('keep/blob'), Buffer.alloc(100), { maxBytes: 50 })).rejects.toBeInstanceOf(PayloadTooLargeError);
      const failing = new Readable({
        read() {
          this.push(Buffer.from('partial'));
          this.destroy(new Error('client went away'));
        },
      });
      await expect(store.put(key('keep/blob'), failing)).rejects.toThrow('client went away');
      expect(await readAll((await store.get(key('keep/blob'))).body)).toEqual(Buffer.from('original'));
      expect((await collect(store.list(key('keep/')))).map((i) => i.key)).toEqual([key('keep/blob')]);
    });

    it('overwrites: the last put wins, with its own info', async () => {
      await store.put(key('over/blob'), Buffer.from('first'), { contentType: 'text/plain' });
      const second = Buffer.from('second version');
      await store.put(key('over/blob'), second, { contentType: 'application/json' });
      const got = await store.get(key('over/blob'));
      expect(await readAll(got.body)).toEqual(second);
      expect(got.info).toMatchObject({ size: second.length, contentType: 'application/json', md5: md5(second), sha256: sha256(second) });
      expect((await collect(store.list(key('over/')))).length).toBe(1);
    });

    it('rejects malformed keys and prefixes with InputError', async () => {
      const bad = ['', '/abs', 'a/../b', '..', 'a/./b', 'a\\b', 'a//b', 'a/', 'ctl\u0001', '.tessera-staging/x', 'x'.repeat(1025)];
      for (const k of bad) {
        await expect(store.put(k, Buffer.from('x')), k).rejects.toBeInstanceOf(InputError);
        await expect(store.get(k), k).rejects.toBeInstanceOf(InputError);
        await expect(store.head(k), k).rejects.toBeInstanceOf(InputError);
        await expect(store.delete(k), k).rejects.toBeInstanceOf(InputError);
        await expect(store.presignGet(k, { expiresInSeconds: 60 }), k).rejects.toBeInstanceOf(InputError);
        await expect(store.presignPut(k, { expiresInSeconds: 60 }), k).rejects.toBeInstanceOf(InputError);
      }
      for (const p of ['/abs', '../', 'a/../', 'a\\b']) {
        await expect(store.deletePrefix(p), p).rejects.toBeInstanceOf(InputError);
        await expect(collect(store.list(p)), p).rejects.toBeInstanceOf(InputError);
      }
      await expect(store.presignGet(key('ok'), { expiresInSeconds: 0 })).rejects.toBeInstanceOf(InputError);
    });

    it('uploads through a presigned PUT URL and records the digests', async () => {
      const data = randomBytes(64 * 1024);
      const before = Date.now();
      const presigned = await store.presignPut(key('presign/up load ü.bin'), { expiresInSeconds: 600, contentType: 'image/png', maxBytes: MiB });
      expect(presigned.method).toBe('PUT');
      expect(presigned.url).toMatch(/^https?:\/\//);
      expect(presigned.headers['Content-Type']).toBe('image/png');
      expect(presigned.expiresAt.getTime()).toBeGreaterThan(before);
      const res = await fetchUrl(presigned.url, { method: 'PUT', headers: presigned.headers, body: data });
      expect(res.status, await res.clone().text()).toBeLessThan(300);
      const info = await store.ensureDigests(key('presign/up load ü.bin'));
      expect(info).toMatchObject({ size: data.length, contentType: 'image/png', md5: md5(data), sha256: sha256(data) });
      expect(await store.head(key('presign/up load ü.bin'))).toMatchObject({ md5: md5(data), sha256: sha256(data) });
      expect(await readAll((await store.get(key('presign/up load ü.bin'))).body)).toEqual(data);
    });

    it('downloads through a presigned GET URL, with a file name when asked', async () => {
      const data = Buffer.from('download me');
      await store.put(key('presign/down.txt'), data, { contentType: 'text/plain' });
      const plain = await store.presignGet(key('presign/down.txt'), { expiresInSeconds: 600 });
      expect(plain.expiresAt.getTime()).toBeGreaterThan(Date.now());
      const res = await fetchUrl(plain.url);
      expect(res.status).toBe(200);
      expect(Buffer.from(await res.arrayBuffer())).toEqual(data);
      expect(res.headers.get('content-type')).toContain('text/plain');
      const named = await store.presignGet(key('presign/down.txt'), { expiresInSeconds: 600, filename: 'report 1.txt' });
      // S3 serves this through `response-content-disposition` (AWS and MinIO honour it; moto ignores it).
      const namedRes = await fetchUrl(named.url);
      expect(namedRes.status).toBe(200);
      expect(namedRes.headers.get('content-disposition')).toContain('attachment');
      expect(namedRes.headers.get('content-disposition')).toContain('report');
      await namedRes.arrayBuffer();
    });

    it('answers a presigned GET of a missing blob with 404', async () => {
      const url = await store.presignGet(key('presign/missing'), { expiresInSeconds: 600 });
      const res = await fetchUrl(url.url);
      expect(res.status).toBe(404);
      await res.arrayBuffer();
    });
  });
}
