/**
 * The ids a document descends from, for signing its artifacts to a user-scoped caller (presign.ts): its own
 * id, its root object, its source document, and every document further up its chain of sources that the
 * caller may read. An artifact is stored under the record it was made from (kernel/blobs/artifacts.ts),
 * and fields carry artifacts down the tiers, so a document two or more tiers below a thumbnail's record
 * must know that record to get the thumbnail's URL.
 *
 * The chain is read a level at a time, one read per level for a whole page of documents, at most
 * MAX_CHAIN levels; a link to a document the caller may not read (or one already in the chain: a
 * hand-written document can name anything) ends it.
 */
import type { DocumentSource } from './documents.js';

/** Tiers followed up a document's chain at most (collections feed collections a few levels deep). */
const MAX_CHAIN = 16;

interface Link {
  documentId: string;
  collectionId: string;
}

const isId = (value: unknown): value is string => typeof value === 'string' && value.length > 0;

/** The document a document (or a result reshaped from one) says it was derived from. */
function sourceOf(doc: Record<string, unknown>): Link | undefined {
  return isId(doc.source_document_id) && isId(doc.source_collection_id)
    ? { documentId: doc.source_document_id, collectionId: doc.source_collection_id }
    : undefined;
}

/** For each of `docs` (by identity), the ids it descends from, as far as `principalId` may read its chain. */
export async function lineageReader<T extends object>(
  source: Pick<DocumentSource, 'getByIds'>,
  organizationId: string,
  principalId: string | null,
  docs: readonly T[],
): Promise<(doc: T) => string[]> {
  const lineages = new Map<T, Set<string>>();
  let pending = new Map<T, Link>();
  for (const doc of docs) {
    const fields = doc as Record<string, unknown>;
    lineages.set(doc, new Set([fields.document_id, fields.root_object_id, fields.source_document_id].filter(isId)));
    const link = sourceOf(fields);
    if (link) pending.set(doc, link);
  }
  /** Ancestors read so far: each one's own source, or null (none, or not the caller's to read). */
  const known = new Map<string, Link | null>();
  for (let level = 0; level < MAX_CHAIN && pending.size > 0; level++) {
    const unread = [...pending.values()].filter((link) => !known.has(link.documentId));
    if (unread.length > 0) {
      const ids = [...new Set(unread.map((link) => link.documentId))];
      const collections = [...new Set(unread.map((link) => link.collectionId))];
      for (const id of ids) known.set(id, null);
      for (const found of await source.getByIds(organizationId, collections, ids, principalId)) {
        known.set(found.document_id, sourceOf(found.payload ?? {}) ?? null);
      }
    }
    const next = new Map<T, Link>();
    for (const [doc, link] of pending) {
      const up = known.get(link.documentId);
      const lineage = lineages.get(doc)!;
      if (!up || lineage.has(up.documentId)) continue;
      lineage.add(up.documentId);
      next.set(doc, up);
    }
    pending = next;
  }
  return (doc) => [...(lineages.get(doc) ?? [])];
}
