/**
 * Files extractors derive from a source record (thumbnails, keyframes), kept under one prefix per
 * collection and source record so deleting a collection or re-running a record finds them all.
 */
import type { ArtifactWriter, BlobReference } from '../plugins.js';
import type { BlobStore } from './blob-store.js';
import { validateKey } from './blob-store.js';

const SAFE_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]*(\/[A-Za-z0-9][A-Za-z0-9._-]*)*$/;

export function artifactPrefix(organizationId: string, collectionId: string): string {
  return `${organizationId}/artifacts/${collectionId}/`;
}

/** Writes artifacts for one source record of one collection. */
export class BlobArtifactWriter implements ArtifactWriter {
  constructor(
    private readonly blobs: BlobStore,
    private readonly prefix: string,
  ) {}

  static forRecord(blobs: BlobStore, organizationId: string, collectionId: string, recordId: string): BlobArtifactWriter {
    return new BlobArtifactWriter(blobs, `${artifactPrefix(organizationId, collectionId)}${recordId}/`);
  }

  async save(name: string, data: Buffer, contentType: string): Promise<BlobReference> {
    if (!SAFE_NAME.test(name) || name.split('/').some((part) => part === '..' || part === '.')) {
      throw new Error(`artifact name '${name}' must be relative path segments of letters, digits, '.', '_' and '-'`);
    }
    const key = `${this.prefix}${name}`;
    validateKey(key);
    const info = await this.blobs.put(key, data, { contentType });
    return { storage_key: key, content_type: info.contentType, size_bytes: info.size };
  }
}
