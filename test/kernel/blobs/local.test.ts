import { randomBytes } from 'node:crypto';
import { mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { attachmentDisposition } from '../../../kernel/blobs/blob-store.js';
import { createBlobStore } from '../../../kernel/blobs/index.js';
import { BLOB_ROUTE_PREFIX, LocalBlobStore, signBlobToken, verifyBlobToken } from '../../../kernel/blobs/local.js';
import { ManualClock, type Clock } from '../../../kernel/clock.js';
import { ApiError, AuthenticationError } from '../../../kernel/errors.js';
import { runBlobStoreContract } from './contract.js';

/**
 * A stand-in for the API's `/v1/storage/blobs/{token}` route, so presigned URLs are exercised over
 * real HTTP: verify the token, then stream the request into `put` or `get` out to the response.
 */
function blobRoute(store: LocalBlobStore, secret: Buffer, clock: Clock) {
  return async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    try {
      const url = new URL(req.url ?? '/', 'http://localhost');
      if (!url.pathname.startsWith(BLOB_ROUTE_PREFIX)) throw Object.assign(new Error('no route'), { status: 404 });
      const method = req.method === 'PUT' ? 'PUT' : 'GET';
      const grant = verifyBlobToken(url.pathname.slice(BLOB_ROUTE_PREFIX.length), secret, clock.now(), method);
      if (method === 'PUT') {
        const sent = req.headers['content-type'];
        if (grant.contentType && sent !== grant.contentType) throw Object.assign(new Error('content type'), { status: 400 });
        const info = await store.put(grant.key, req, {
          ...(grant.contentType || sent ? { contentType: grant.contentType ?? sent } : {}),
          ...(grant.maxBytes !== undefined ? { maxBytes: grant.maxBytes } : {}),
        });
        res.writeHead(200, { ETag: `"${info.md5}"` }).end();
        return;
      }
      const { info, body } = await store.get(grant.key);
      res.writeHead(200, {
        'Content-Type': info.contentType,
        'Content-Length': String(info.size),
        ...(grant.filename ? { 'Content-Disposition': attachmentDisposition(grant.filename) } : {}),
      });
      body.pipe(res);
    } catch (error) {
      const status = error instanceof ApiError ? error.status : ((error as { status?: number }).status ?? 500);
      if (!res.headersSent) res.writeHead(status, { 'Content-Type': 'text/plain' });
      res.end(String((error as Error).message));
    }
  };
}

async function listen(handler: (req: IncomingMessage, res: ServerResponse) => Promise<void>): Promise<{ server: Server; baseUrl: string }> {
  const server = createServer((req, res) => void handler(req, res));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}

runBlobStoreContract('LocalBlobStore', async () => {
  const root = await mkdtemp(path.join(tmpdir(), 'tessera-blobs-'));
  const secret = randomBytes(32);
  const clock = new ManualClock();
  let baseUrl = '';
  // The base URL is read lazily, as in the API, where the port is known only after listen.
  const store = new LocalBlobStore(root, { publicBaseUrl: () => baseUrl, signingSecret: secret, clock });
  const served = await listen(blobRoute(store, secret, clock));
  baseUrl = served.baseUrl;
  return {
    store,
    cleanup: async () => {
      await new Promise((resolve) => served.server.close(resolve));
      await rm(root, { recursive: true, force: true });
    },
  };
});

describe('LocalBlobStore presigned URL tokens', () => {
  const secret = randomBytes(32);
  const clock = new ManualClock(new Date('2030-01-01T00:00:00Z'));
  let root: string;
  let store: LocalBlobStore;

  beforeAll(async () => {
    root = await mkdtemp(path.join(tmpdir(), 'tessera-blobs-'));
    store = new LocalBlobStore(root, { publicBaseUrl: () => 'http://api.test:8080/', signingSecret: secret, clock });
  });
  afterAll(async () => {
    await rm(root, { recursive: true, force: true });
  });

  const tokenOf = (url: string): string => {
    expect(url.startsWith(`http://api.test:8080${BLOB_ROUTE_PREFIX}`)).toBe(true);
    return url.slice(`http://api.test:8080${BLOB_ROUTE_PREFIX}`.length);
  };

  it('signs a PUT grant with key, content type, size limit and expiry', async () => {
    const presigned = await store.presignPut('org_x/ns_y/uploads/upl_1', { expiresInSeconds: 900, contentType: 'video/mp4', maxBytes: 2_000_000_000 });
    expect(presigned.expiresAt).toEqual(new Date('2030-01-01T00:15:00Z'));
    const grant = verifyBlobToken(tokenOf(presigned.url), secret, clock.now(), 'PUT');
    expect(grant).toEqual({
      key: 'org_x/ns_y/uploads/upl_1',
      method: 'PUT',
      expiresAt: new Date('2030-01-01T00:15:00Z'),
      contentType: 'video/mp4',
      maxBytes: 2_000_000_000,
    });
  });

  it('signs a GET grant with a file name', async () => {
    const presigned = await store.presignGet('org_x/ns_y/objects/obj_1/content', { expiresInSeconds: 60, filename: 'clip ü.mp4' });
    expect(verifyBlobToken(tokenOf(presigned.url), secret, clock.now())).toEqual({
      key: 'org_x/ns_y/objects/obj_1/content',
      method: 'GET',
      expiresAt: new Date('2030-01-01T00:01:00Z'),
      filename: 'clip ü.mp4',
    });
  });

  it('refuses a tampered payload, a tampered seal, another secret and malformed tokens', async () => {
    const token = tokenOf((await store.presignGet('org_x/a', { expiresInSeconds: 60 })).url);
    const [payload, signature] = token.split('.') as [string, string];
    const forged = Buffer.from(JSON.stringify({ k: 'org_y/a', m: 'GET', e: 1_999_999_999 })).toString('base64url');
    const flipped = (signature[0] === 'A' ? 'B' : 'A') + signature.slice(1);
    for (const bad of [`${forged}.${signature}`, `${payload}.${flipped}`, `${payload}.`, payload, '', 'a.b.c', `${payload}.${signature}x`]) {
      expect(() => verifyBlobToken(bad, secret, clock.now()), bad).toThrow(AuthenticationError);
    }
    expect(() => verifyBlobToken(token, randomBytes(32), clock.now())).toThrow(AuthenticationError);
    // Something that looks like the old signed format is refused too.
    const junk = Buffer.from('"just a string"').toString('base64url');
    const { createHmac } = await import('node:crypto');
    const junkSig = createHmac('sha256', secret).update(junk).digest('base64url');
    expect(() => verifyBlobToken(`${junk}.${junkSig}`, secret, clock.now())).toThrow(AuthenticationError);
  });

  it('seals the storage key: a token (a public visitor may see one) does not show it', async () => {
    const token = tokenOf((await store.presignGet('org_secret_owner/ns_hidden/a', { expiresInSeconds: 60 })).url);
    const readable = token.split('.').map((part) => Buffer.from(part, 'base64url').toString('latin1')).join(' ') + token;
    expect(readable).not.toContain('org_secret_owner');
    expect(readable).not.toContain('ns_hidden');
    expect(verifyBlobToken(token, secret, clock.now()).key).toBe('org_secret_owner/ns_hidden/a');
    // Two tokens for the same grant differ (a fresh IV each time).
    expect(tokenOf((await store.presignGet('org_secret_owner/ns_hidden/a', { expiresInSeconds: 60 })).url)).not.toBe(token);
  });

  it('refuses an expired token, judged by the injected clock', async () => {
    const token = tokenOf((await store.presignGet('org_x/a', { expiresInSeconds: 60 })).url);
    const later = new ManualClock(clock.now());
    later.advance(59_999);
    expect(verifyBlobToken(token, secret, later.now()).key).toBe('org_x/a');
    later.advance(1);
    expect(() => verifyBlobToken(token, secret, later.now())).toThrow(/expired/);
  });

  it('refuses a token used for the other method', async () => {
    const token = tokenOf((await store.presignGet('org_x/a', { expiresInSeconds: 60 })).url);
    expect(() => verifyBlobToken(token, secret, clock.now(), 'PUT')).toThrow(AuthenticationError);
    const put = signBlobToken({ key: 'org_x/a', method: 'PUT', expiresAt: new Date('2030-01-02T00:00:00Z') }, secret);
    expect(() => verifyBlobToken(put, secret, clock.now(), 'GET')).toThrow(AuthenticationError);
  });
});

describe('LocalBlobStore on disk', () => {
  let root: string;
  let store: LocalBlobStore;

  beforeAll(async () => {
    root = await mkdtemp(path.join(tmpdir(), 'tessera-blobs-'));
    store = new LocalBlobStore(root, { publicBaseUrl: () => 'http://127.0.0.1:1', signingSecret: randomBytes(32) });
  });
  afterAll(async () => {
    await rm(root, { recursive: true, force: true });
  });

  it('ignores temp files an interrupted write left behind', async () => {
    await store.put('org_x/kept', Buffer.from('kept'));
    // What a crash mid-put leaves: a temp file beside where the blob would go, never the blob itself.
    await writeFile(path.join(root, 'org_x.d', 'lost.a1b2c3.tmp'), 'half a blob');
    expect(await store.head('org_x/lost')).toBeUndefined();
    const keys: string[] = [];
    for await (const info of store.list('org_x/')) keys.push(info.key);
    expect(keys).toEqual(['org_x/kept']);
  });

  it('leaves no temp files after a refused put and prunes emptied folders on delete', async () => {
    await expect(store.put('org_y/deep/er/blob', Buffer.alloc(20), { maxBytes: 10 })).rejects.toThrow();
    await store.put('org_z/deep/er/blob', Buffer.from('x'));
    await store.delete('org_z/deep/er/blob');
    const top = await readdir(root);
    expect(top).not.toContain('org_y.d');
    expect(top).not.toContain('org_z.d');
  });

  it('is what createBlobStore picks without S3 settings', () => {
    const picked = createBlobStore({ localRoot: root, signingSecret: randomBytes(32), publicBaseUrl: () => 'http://x' });
    expect(picked.kind).toBe('local');
    const s3 = createBlobStore({
      localRoot: root,
      signingSecret: randomBytes(32),
      publicBaseUrl: () => 'http://x',
      s3: { bucket: 'b', region: 'us-east-1', endpoint: 'http://127.0.0.1:9', forcePathStyle: true },
    });
    expect(s3.kind).toBe('s3');
  });
});

describe('local blob store health', () => {
  it('a first ping makes the folder; once seen, a vanished folder is reported instead of made again', async () => {
    const home = await mkdtemp(path.join(tmpdir(), 'tessera-blob-ping-'));
    const root = path.join(home, 'blobs');
    try {
      const store = new LocalBlobStore(root, { publicBaseUrl: () => 'http://127.0.0.1:1', signingSecret: randomBytes(32) });
      await store.ping();
      await store.put('a/b', Buffer.from('kept'), {});
      await store.ping();
      await rm(root, { recursive: true });
      await expect(store.ping()).rejects.toThrow(/blob folder .* is gone/);
      // Not made again behind the report's back.
      await expect(readdir(root)).rejects.toThrow(/ENOENT/);
    } finally {
      await rm(home, { recursive: true, force: true });
    }
  });
});
