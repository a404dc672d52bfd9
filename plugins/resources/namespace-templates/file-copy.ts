/**
 * Stored files the copied documents refer to (`{storage_key, ...}` values in their fields: thumbnails and
 * keyframes under the source collection's artifact prefix, object blobs under the source namespace's prefix).
 * Each is copied under the copy's own prefix (the same key with the copied ids in it), so deleting either
 * namespace or collection — which deletes blobs by those prefixes — never takes the other's files.
 */
import type { BlobStore } from '../../../kernel/blobs/blob-store.js';
import type { IdMap } from './id-map.js';
import type { DocumentRow } from './source.js';

export class FileCopier {
  /** Old key → new key of every file to copy (those that exist). */
  private readonly planned = new Map<string, { to: string; contentType: string }>();
  /** Keys this copy wrote, to delete if the instantiation fails. */
  readonly written: string[] = [];
  plannedBytes = 0;

  constructor(
    private readonly blobs: BlobStore,
    private readonly ids: IdMap,
    private readonly organizationId: string,
  ) {}

  /** Finds the files the documents refer to, and their total size (checked against the limit before any copy). */
  async plan(documents: readonly DocumentRow[]): Promise<void> {
    const keys = new Set<string>();
    for (const doc of documents) collectKeys(doc.fields, keys);
    for (const key of keys) {
      const to = this.ids.text(key);
      // Only files the source owns (their key names a copied id); a missing file stays a missing file.
      if (to === key || !key.startsWith(`${this.organizationId}/`)) continue;
      const info = await this.blobs.head(key);
      if (!info) continue;
      this.planned.set(key, { to, contentType: info.contentType });
      this.plannedBytes += info.size;
    }
  }

  async copy(): Promise<void> {
    for (const [from, { to, contentType }] of this.planned) {
      const read = await this.blobs.get(from);
      this.written.push(to);
      await this.blobs.put(to, read.bytes ?? read.body, { contentType });
    }
  }

  /** Fields with every planned file's key replaced by its copy's. */
  rewrite(fields: Record<string, unknown>): Record<string, unknown> {
    if (this.planned.size === 0) return fields;
    return rewriteKeys(fields, (key) => this.planned.get(key)?.to ?? key) as Record<string, unknown>;
  }

  get count(): number {
    return this.planned.size;
  }

  async undo(): Promise<void> {
    await Promise.allSettled(this.written.map((key) => this.blobs.delete(key)));
  }
}

function isFileRef(value: unknown): value is { storage_key: string } {
  return typeof value === 'object' && value !== null && typeof (value as { storage_key?: unknown }).storage_key === 'string';
}

function collectKeys(value: unknown, into: Set<string>): void {
  if (Array.isArray(value)) for (const v of value) collectKeys(v, into);
  else if (typeof value === 'object' && value !== null) {
    if (isFileRef(value)) into.add(value.storage_key);
    for (const v of Object.values(value)) collectKeys(v, into);
  }
}

function rewriteKeys(value: unknown, keyOf: (key: string) => string): unknown {
  if (Array.isArray(value)) return value.map((v) => rewriteKeys(v, keyOf));
  if (typeof value !== 'object' || value === null) return value;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) out[k] = rewriteKeys(v, keyOf);
  if (isFileRef(value)) out.storage_key = keyOf(value.storage_key);
  return out;
}
