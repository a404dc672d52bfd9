/**
 * `return_vectors` (retriever executes and document reads): documents carry their stored vectors as
 * `vectors: {<feature name>: number[]}` — the feature's output field name, the same key a document is
 * written with directly (bring your own vectors) — for every feature of their collections they have a vector
 * for. Read through the DocumentSource with the caller's principal, one read per feature index for the whole
 * page; synthetic documents (no collection, e.g. aggregate results) and documents nested in a payload get none.
 */
import type { StageDocument } from '../plugins.js';
import type { DocumentSource } from './documents.js';

export interface VectorReader {
  organizationId: string;
  principalId: string | null;
}

/** The stored vectors of these documents by document id, then by feature name (documents without any are absent). */
export async function readVectors(
  source: DocumentSource,
  caller: VectorReader,
  collectionIds: readonly string[],
  docs: ReadonlyArray<{ document_id: string; collection_id?: string | undefined }>,
): Promise<Map<string, Record<string, number[]>>> {
  const out = new Map<string, Record<string, number[]>>();
  if (!docs.some((d) => d.collection_id)) return out;
  const features = await source.features(caller.organizationId, collectionIds);
  for (const feature of features) {
    const owners = docs.filter((d) => d.collection_id === feature.collection_id).map((d) => d.document_id);
    if (owners.length === 0) continue;
    const found = await source.vectors({
      organizationId: caller.organizationId,
      collectionIds: [feature.collection_id],
      feature,
      documentIds: owners,
      principalId: caller.principalId,
    });
    for (const [documentId, vector] of found) {
      let vectors = out.get(documentId);
      if (!vectors) out.set(documentId, (vectors = {}));
      vectors[feature.feature] = vector;
    }
  }
  return out;
}

/** The page of results an execution returns, each document of a collection with its `vectors` (`{}` when it has none). */
export async function withVectors(
  source: DocumentSource,
  caller: VectorReader,
  collectionIds: readonly string[],
  docs: readonly StageDocument[],
): Promise<StageDocument[]> {
  if (!docs.some((d) => d.collection_id)) return [...docs];
  const vectors = await readVectors(source, caller, collectionIds, docs);
  return docs.map((doc) => (doc.collection_id ? { ...doc, vectors: vectors.get(doc.document_id) ?? {} } : doc));
}
