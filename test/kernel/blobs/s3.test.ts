/**
 * The BlobStore contract on an S3-compatible server, when one is given as
 * TEST_S3_URL=http://ACCESS_KEY:SECRET@host:9000/bucket[?region=us-east-1] (created if missing).
 */
import { createHash, randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import { CreateBucketCommand, HeadBucketCommand, HeadObjectCommand } from '@aws-sdk/client-s3';
import { afterAll, describe, expect, it } from 'vitest';
import { S3BlobStore, type S3Settings, type S3Tuning } from '../../../kernel/blobs/s3.js';
import { randomBase62 } from '../../../kernel/ids.js';
import { runBlobStoreContract } from './contract.js';

const testUrl = process.env.TEST_S3_URL;

function settingsFrom(url: string): S3Settings {
  const u = new URL(url);
  const bucket = decodeURIComponent(u.pathname.replace(/^\/+|\/+$/g, ''));
  if (!bucket) throw new Error('TEST_S3_URL needs the bucket as its path');
  return {
    endpoint: `${u.protocol}//${u.host}`,
    region: u.searchParams.get('region') ?? 'us-east-1',
    bucket,
    accessKeyId: decodeURIComponent(u.username),
    secretAccessKey: decodeURIComponent(u.password),
    forcePathStyle: true,
  };
}

async function openStore(tuning?: Partial<S3Tuning>): Promise<S3BlobStore> {
  const settings = settingsFrom(testUrl!);
  const store = new S3BlobStore(settings, tuning ? { tuning } : {});
  try {
    await store.client.send(new HeadBucketCommand({ Bucket: settings.bucket }));
  } catch {
    await store.client.send(new CreateBucketCommand({ Bucket: settings.bucket }));
  }
  return store;
}

if (!testUrl) {
  describe('S3BlobStore', () => {
    it.skip('TEST_S3_URL not set: the S3 BlobStore contract did not run', () => {});
  });
} else {
  runBlobStoreContract('S3BlobStore', async () => {
    const store = await openStore();
    return { store, cleanup: async () => store.destroy() };
  });

  describe('S3BlobStore with small part sizes', () => {
    const prefix = `s3_${randomBase62(10)}/`;
    let store: S3BlobStore | undefined;
    afterAll(async () => {
      await store?.deletePrefix(prefix);
      store?.destroy();
    });

    it('puts a multipart stream and copies it onto its key in parts, digests in the metadata', async () => {
      // Shrunk so a 12 MiB stream takes the multipart upload and the multipart copy (S3's minimum part is 5 MiB).
      store = await openStore({ singleRequestMaxBytes: 5 * 1024 * 1024, partSize: 5 * 1024 * 1024, copyObjectMaxBytes: 6 * 1024 * 1024, copyPartBytes: 5 * 1024 * 1024 });
      const data = randomBytes(12 * 1024 * 1024);
      const info = await store.put(`${prefix}big`, Readable.from([data.subarray(0, 7_000_000), data.subarray(7_000_000)]), { contentType: 'video/mp4' });
      const sha256 = createHash('sha256').update(data).digest('hex');
      expect(info).toMatchObject({ size: data.length, sha256, contentType: 'video/mp4' });
      const head = await store.client.send(new HeadObjectCommand({ Bucket: settingsFrom(testUrl).bucket, Key: `${prefix}big` }));
      expect(head.Metadata).toMatchObject({ sha256, md5: createHash('md5').update(data).digest('hex') });
      expect(head.ContentType).toBe('video/mp4');
      // Nothing is left in the staging area under this run's name, and listing never shows staging.
      const keys: string[] = [];
      for await (const i of store.list(prefix)) keys.push(i.key);
      expect(keys).toEqual([`${prefix}big`]);
    });
  });
}
