/**
 * `return_vectors`: the page of results an execution returns, each document carrying its stored vectors
 * as `vectors: {<feature name>: number[]}` — the feature's output field name, the same key a document is
 * written with directly (bring your own vectors) — for every feature of the retriever's collections it has
 * a vector for. Read through the DocumentSource with the caller's principal; synthetic documents (no
 * collection, e.g. aggregate results) and documents nested in a payload get none.
 */
import type { StageDocument } from '../plugins.js';
import type { DocumentSource } from './documents.js';

export async function withVectors(
  source: DocumentSource,
  caller: { organizationId: string; principalId: string | null },
  collectionIds: readonly string[],
  docs: readonly StageDocument[],
): Promise<StageDocument[]> {
  const vectors = new Map<StageDocument, Record<string, number[]>>();
  for (const doc of docs) if (doc.collection_id) vectors.set(doc, {});
  if (vectors.size === 0) return [...docs];
  const features = await source.features(caller.organizationId, collectionIds);
  for (const feature of features) {
    const owners = docs.filter((d) => d.collection_id === feature.collection_id);
    if (owners.length === 0) continue;
    const found = await source.vectors({
      organizationId: caller.organizationId,
      collectionIds: [feature.collection_id],
      feature,
      documentIds: owners.map((d) => d.document_id),
      principalId: caller.principalId,
    });
    for (const doc of owners) {
      const vector = found.get(doc.document_id);
      if (vector) vectors.get(doc)![feature.feature] = vector;
    }
  }
  return docs.map((doc) => (vectors.has(doc) ? { ...doc, vectors: vectors.get(doc)! } : doc));
}
