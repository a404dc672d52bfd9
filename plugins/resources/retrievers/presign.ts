/**
 * `return_presigned_urls`: every stored blob a returned document references — a `{storage_key,
 * content_type, ...}` object anywhere in it (a source object's blob, an image thumbnail, a video keyframe)
 * — gets a fresh download URL (`url`, `url_expires_at`, as bucket objects show theirs). Only blobs of the
 * execution's own organization and namespace are signed: a bucket object's blob of the namespace, or an
 * artifact of one of the namespace's collections. A reference to anything else (a document written by hand
 * can hold any text) is left as it is, without a URL.
 */
import type { BlobStore } from '../../../kernel/blobs/blob-store.js';
import { InputError, NotFoundError } from '../../../kernel/errors.js';
import { iso } from '../../../kernel/http/values.js';
import type { StageDocument } from '../../../kernel/plugins.js';
import type { DocumentSource } from '../../../kernel/retrieval/documents.js';

export const DOWNLOAD_URL_SECONDS = 3600;
/** How deep into a document references are looked for, and how many are signed per response at most. */
const MAX_DEPTH = 8;
const MAX_REFERENCES = 2000;
const ARTIFACT = /^([^/]+)\/artifacts\/([^/]+)\//;

interface BlobReferenceShape {
  storage_key: string;
  content_type: string;
}

function isBlobReference(value: Record<string, unknown>): value is Record<string, unknown> & BlobReferenceShape {
  return typeof value.storage_key === 'string' && typeof value.content_type === 'string';
}

export interface PresignScope {
  organizationId: string;
  namespaceId: string;
}

export class DocumentUrlSigner {
  /** Artifact collection id → whether it is a collection of the namespace (asked once per response). */
  private readonly collectionAllowed = new Map<string, Promise<boolean>>();
  private signed = 0;

  constructor(
    private readonly blobs: BlobStore,
    private readonly documents: DocumentSource,
    private readonly scope: PresignScope,
  ) {}

  /** Copies of the documents with a fresh URL on each blob reference they may see. */
  async sign(docs: readonly StageDocument[]): Promise<StageDocument[]> {
    return Promise.all(docs.map(async (d) => (await this.walk(d, 0)) as StageDocument));
  }

  private async walk(value: unknown, depth: number): Promise<unknown> {
    if (depth > MAX_DEPTH || value === null || typeof value !== 'object') return value;
    if (Array.isArray(value)) {
      // Vectors and other arrays of numbers hold no references: skip them whole.
      if (value.length > 0 && typeof value[0] === 'number') return value;
      return Promise.all(value.map((v) => this.walk(v, depth + 1)));
    }
    const record = value as Record<string, unknown>;
    if (isBlobReference(record)) return this.signReference(record);
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(record)) out[k] = await this.walk(v, depth + 1);
    return out;
  }

  private async signReference(ref: Record<string, unknown> & BlobReferenceShape): Promise<Record<string, unknown>> {
    if (this.signed >= MAX_REFERENCES || !(await this.mayRead(ref.storage_key))) return ref;
    this.signed += 1;
    const filename = typeof ref.filename === 'string' && ref.filename.length > 0 ? ref.filename : undefined;
    try {
      const url = await this.blobs.presignGet(ref.storage_key, { expiresInSeconds: DOWNLOAD_URL_SECONDS, ...(filename ? { filename } : {}) });
      return { ...ref, url: url.url, url_expires_at: iso(url.expiresAt) };
    } catch (err) {
      // A key no store accepts (a hand-written document can hold any text) gets no URL; the answer stands.
      if (err instanceof InputError) return ref;
      throw err;
    }
  }

  private async mayRead(key: string): Promise<boolean> {
    const { organizationId, namespaceId } = this.scope;
    if (key.includes('..')) return false;
    if (key.startsWith(`${organizationId}/${namespaceId}/`)) return true;
    const artifact = ARTIFACT.exec(key);
    if (!artifact || artifact[1] !== organizationId) return false;
    const collectionId = artifact[2]!;
    let allowed = this.collectionAllowed.get(collectionId);
    if (!allowed) {
      allowed = this.documents.resolveCollections(organizationId, namespaceId, [collectionId]).then(
        (found) => found.some((c) => c.collection_id === collectionId),
        (err: unknown) => {
          if (err instanceof NotFoundError) return false;
          throw err;
        },
      );
      this.collectionAllowed.set(collectionId, allowed);
    }
    return allowed;
  }
}
