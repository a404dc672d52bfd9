/**
 * What the stages comparing documents by their vectors (mmr, deduplicate by embedding) share: reading the
 * incoming documents' stored vectors for one feature through the DocumentSource (with the caller's
 * principal), cosine similarity, and a pause between slices of quadratic work so a large input never holds
 * the event loop for long.
 */
import { InputError } from '../errors.js';
import type { StageContext, StageDocument } from '../plugins.js';
import { DocumentSource, resolve } from '../tokens.js';

/** The vector scaled to length 1 (a zero vector stays zero: it is similar to nothing). */
export function unitVector(vector: readonly number[]): Float64Array {
  const out = Float64Array.from(vector);
  let norm = 0;
  for (const x of out) norm += x * x;
  norm = Math.sqrt(norm);
  if (norm > 0) for (let i = 0; i < out.length; i++) out[i]! /= norm;
  return out;
}

/** Cosine similarity of two unit vectors (0 when their sizes differ). */
export function cosineOfUnits(a: Float64Array, b: Float64Array): number {
  if (a.length !== b.length) return 0;
  let dot = 0;
  for (let i = 0; i < a.length; i++) dot += a[i]! * b[i]!;
  return dot;
}

/**
 * The unit vectors of the documents for `featureUri`, by document id, read for the caller's principal.
 * A feature none of the retriever's collections indexes is an InputError (a typo would otherwise make every
 * document look vectorless); a document without a vector for it is simply absent.
 */
export async function unitVectorsOf(ctx: StageContext, featureUri: string, docs: readonly StageDocument[]): Promise<Map<string, Float64Array>> {
  const source = resolve(ctx.container, DocumentSource);
  const collectionIds = ctx.collections.map((c) => c.collection_id);
  const features = await source.features(ctx.organizationId, collectionIds);
  if (!features.some((f) => f.feature_uri === featureUri)) {
    const known = [...new Set(features.map((f) => f.feature_uri))].sort().join(', ') || 'none';
    throw new InputError(`feature '${featureUri}' is not indexed by the retriever's collections (they index: ${known})`, { feature_uri: featureUri });
  }
  const vectors = await source.vectors({
    organizationId: ctx.organizationId,
    collectionIds,
    feature: featureUri,
    documentIds: docs.map((d) => d.document_id),
    principalId: ctx.principalId,
  });
  return new Map([...vectors].map(([id, vector]) => [id, unitVector(vector)]));
}

/** Similarity computations between pauses: a few milliseconds of work at 384 dimensions. */
export const SIMILARITY_SLICE = 20_000;

/** Lets other requests run between slices of a long in-process computation. */
export function pause(): Promise<void> {
  return new Promise((done) => setImmediate(done));
}
