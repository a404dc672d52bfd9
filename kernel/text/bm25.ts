/**
 * BM25 (Robertson/Spärck Jones, in the form Lucene uses), computed from the collection's own statistics:
 *
 *   score(D, Q) = Σ_t  idf(t) · tf(t,D) · (k1 + 1) / ( tf(t,D) + k1 · (1 − b + b · |D| / avgdl) )
 *   idf(t)      = ln( 1 + (N − df(t) + 0.5) / (df(t) + 0.5) )
 *
 * N is the number of documents of the collection that have the field, df(t) how many of them contain t,
 * |D| the field's length in terms and avgdl the mean length over the N documents. This idf is never
 * negative (the classic form goes negative for terms in more than half of the documents).
 */

export interface Bm25Parameters {
  /** Term-frequency saturation (1.2 by default). */
  k1: number;
  /** Length normalization, 0 (none) to 1 (full); 0.75 by default. */
  b: number;
}

export const DEFAULT_BM25: Bm25Parameters = { k1: 1.2, b: 0.75 };

export function idf(documentCount: number, documentFrequency: number): number {
  return Math.log(1 + (documentCount - documentFrequency + 0.5) / (documentFrequency + 0.5));
}

/** One term's contribution to one document's score. */
export function termScore(params: Bm25Parameters, termIdf: number, tf: number, length: number, averageLength: number): number {
  const norm = averageLength > 0 ? length / averageLength : 0;
  return (termIdf * tf * (params.k1 + 1)) / (tf + params.k1 * (1 - params.b + params.b * norm));
}

/**
 * The same, split so SQL computes it per posting with two constants per (collection, field, term):
 * termIdf·(k1+1)·tf / (tf + c1 + c2·|D|), c1 = k1·(1 − b), c2 = k1·b / avgdl.
 */
export function lengthConstants(params: Bm25Parameters, averageLength: number): { c1: number; c2: number } {
  return { c1: params.k1 * (1 - params.b), c2: averageLength > 0 ? (params.k1 * params.b) / averageLength : 0 };
}
