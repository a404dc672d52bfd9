/**
 * `return_presigned_urls` (retriever executes and document reads): every stored blob a returned document
 * references — a `{storage_key, content_type, ...}` object anywhere in it (a source object's blob, an image
 * thumbnail, a video keyframe) — gets a fresh download URL (`url`, `url_expires_at`, as bucket objects show
 * theirs). Only blobs of the caller's own organization and namespace are signed: a bucket object's blob of
 * the namespace, or an artifact of one of the namespace's collections. A reference to anything else (a
 * document written by hand can hold any text) is left as it is, without a URL.
 *
 * One pass over a page: the references are collected first, each distinct key is checked and signed once,
 * a few at a time, and the URLs are put into the copies.
 */
import type { BlobStore } from '../blobs/blob-store.js';
import { InputError, NotFoundError } from '../errors.js';
import { iso } from '../http/values.js';
import type { DocumentSource } from './documents.js';

export const DOWNLOAD_URL_SECONDS = 3600;
/** How deep into a document references are looked for, and how many are signed per response at most. */
const MAX_DEPTH = 8;
const MAX_REFERENCES = 2000;
/** Blob store calls (HEAD, presign) in flight at once for one response. */
const CONCURRENCY = 16;
/** `<organization>/artifacts/<collection>/<record>/<name>`: the record is the object or document it was derived from. */
const ARTIFACT = /^([^/]+)\/artifacts\/([^/]+)\/([^/]+)\//;

interface BlobReferenceShape {
  storage_key: string;
  content_type: string;
}

type BlobReference = Record<string, unknown> & BlobReferenceShape;

function isBlobReference(value: Record<string, unknown>): value is BlobReference {
  return typeof value.storage_key === 'string' && typeof value.content_type === 'string';
}

export interface PresignScope {
  organizationId: string;
  namespaceId: string;
}

export interface SignOptions<T> {
  /**
   * Set for a user-scoped caller: the ids a document descends from (its own id, its root object, its source
   * documents up the chain the caller may read: lineage.ts). Then only artifacts derived from one of them
   * are signed for that document — a hand-written reference to another principal's blob in the same
   * namespace never is (bucket blob keys do not name their object, so those are not signed for user-scoped
   * callers at all).
   */
  lineageOf?: (doc: T) => readonly string[];
  /** HEAD each blob first and give a reference whose blob is gone (deleted) no URL. */
  skipMissing?: boolean;
}

/** One reference found in one document: the copy that receives the URL. */
interface Found {
  copy: Record<string, unknown>;
  key: string;
  filename: string | undefined;
  lineage: ReadonlySet<string> | null;
}

export class DocumentUrlSigner {
  /** Artifact collection id → whether it is a collection of the namespace (asked once per signer). */
  private readonly collectionAllowed = new Map<string, Promise<boolean>>();

  constructor(
    private readonly blobs: BlobStore,
    private readonly documents: DocumentSource,
    private readonly scope: PresignScope,
  ) {}

  /** Copies of the documents with a fresh URL on each blob reference they may see. */
  async sign<T>(docs: readonly T[], options: SignOptions<T> = {}): Promise<T[]> {
    const found: Found[] = [];
    const copies = docs.map((doc) => {
      const lineage = options.lineageOf ? new Set(options.lineageOf(doc)) : null;
      return this.walk(doc, 0, lineage, found) as T;
    });
    const eligible: Found[] = [];
    for (const ref of found.slice(0, MAX_REFERENCES)) if (await this.mayRead(ref.key, ref.lineage)) eligible.push(ref);
    // Each distinct blob (and download name) is checked and signed once, however many documents show it.
    const byBlob = new Map<string, Found[]>();
    for (const ref of eligible) {
      const id = `${ref.key}\u0000${ref.filename ?? ''}`;
      const same = byBlob.get(id);
      if (same) same.push(ref);
      else byBlob.set(id, [ref]);
    }
    const groups = [...byBlob.values()];
    let next = 0;
    const worker = async (): Promise<void> => {
      while (next < groups.length) {
        const group = groups[next++]!;
        const url = await this.urlOf(group[0]!.key, group[0]!.filename, options.skipMissing === true);
        if (!url) continue;
        for (const ref of group) Object.assign(ref.copy, url);
      }
    };
    await Promise.all(Array.from({ length: Math.min(CONCURRENCY, groups.length) }, worker));
    return copies;
  }

  private walk(value: unknown, depth: number, lineage: ReadonlySet<string> | null, found: Found[]): unknown {
    if (depth > MAX_DEPTH || value === null || typeof value !== 'object') return value;
    if (Array.isArray(value)) {
      // Vectors and other arrays of numbers hold no references: skip them whole.
      if (value.length > 0 && typeof value[0] === 'number') return value;
      return value.map((v) => this.walk(v, depth + 1, lineage, found));
    }
    const record = value as Record<string, unknown>;
    if (isBlobReference(record)) {
      const copy = { ...record };
      const filename = typeof record.filename === 'string' && record.filename.length > 0 ? record.filename : undefined;
      found.push({ copy, key: record.storage_key, filename, lineage });
      return copy;
    }
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(record)) out[k] = this.walk(v, depth + 1, lineage, found);
    return out;
  }

  private async urlOf(key: string, filename: string | undefined, skipMissing: boolean): Promise<{ url: string; url_expires_at: string } | undefined> {
    try {
      if (skipMissing && !(await this.blobs.head(key))) return undefined;
      const url = await this.blobs.presignGet(key, { expiresInSeconds: DOWNLOAD_URL_SECONDS, ...(filename ? { filename } : {}) });
      return { url: url.url, url_expires_at: iso(url.expiresAt) };
    } catch (err) {
      // A key no store accepts (a hand-written document can hold any text) gets no URL; the answer stands.
      if (err instanceof InputError) return undefined;
      throw err;
    }
  }

  private async mayRead(key: string, lineage: ReadonlySet<string> | null): Promise<boolean> {
    const { organizationId, namespaceId } = this.scope;
    if (key.includes('..')) return false;
    if (key.startsWith(`${organizationId}/${namespaceId}/`)) return lineage === null;
    const artifact = ARTIFACT.exec(key);
    if (!artifact || artifact[1] !== organizationId) return false;
    if (lineage !== null && !lineage.has(artifact[3]!)) return false;
    const collectionId = artifact[2]!;
    let allowed = this.collectionAllowed.get(collectionId);
    if (!allowed) {
      allowed = this.documents.resolveCollections(organizationId, namespaceId, [collectionId]).then(
        (resolved) => resolved.some((c) => c.collection_id === collectionId),
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
