/** Picks the BlobStore for a deployment: S3-compatible when S3 settings are given, else the local folder. */
import type { Clock } from '../clock.js';
import type { BlobStore } from './blob-store.js';
import { LocalBlobStore } from './local.js';
import { S3BlobStore, type S3Settings } from './s3.js';

export * from './blob-store.js';
export { BLOB_ROUTE_PREFIX, LocalBlobStore, signBlobToken, verifyBlobToken, type BlobGrant, type LocalBlobStoreOptions } from './local.js';
export { S3BlobStore, type S3Settings, type S3Tuning } from './s3.js';

export interface BlobStoreSettings {
  /** Set (from S3_ENDPOINT, S3_REGION, S3_BUCKET, S3_ACCESS_KEY_ID, S3_SECRET_ACCESS_KEY, S3_FORCE_PATH_STYLE) to use S3. */
  s3?: S3Settings;
  /** The local store's folder, e.g. `<TESSERA_HOME>/blobs`. */
  localRoot: string;
  /** Signs the local store's presigned URLs; keep it stable across restarts or issued URLs stop working. */
  signingSecret: Buffer;
  /** Where the API is reachable; read at signing time because the port is known only after listen. */
  publicBaseUrl: () => string;
  clock?: Clock;
}

export function createBlobStore(settings: BlobStoreSettings): BlobStore {
  // A bucket is the one setting S3 cannot do without; everything else has a default.
  if (settings.s3?.bucket) {
    return new S3BlobStore(settings.s3, settings.clock ? { clock: settings.clock } : {});
  }
  return new LocalBlobStore(settings.localRoot, {
    publicBaseUrl: settings.publicBaseUrl,
    signingSecret: settings.signingSecret,
    ...(settings.clock ? { clock: settings.clock } : {}),
  });
}
