/**
 * mmr: maximal marginal relevance. Picks `top_k` of the incoming documents one at a time, each time the one
 * maximising `lambda · relevance − (1 − lambda) · (highest cosine similarity to a document already picked)`,
 * so near-duplicates of a pick fall back and different results come up.
 *
 * - Relevance is the incoming score scaled to 0..1 within the candidates (min–max; a document without a
 *   score counts as the lowest; when every score is equal, all are 1 and diversity alone decides after the
 *   first pick). Ties go to the higher-ranked document.
 * - Similarity is the cosine of the documents' stored vectors for `feature_uri`, read for the caller's
 *   principal.
 * - A document without a vector for the feature cannot be compared: it comes after every picked document
 *   with a vector, in incoming order, while `top_k` has room.
 * - Only the first `max_candidates` incoming documents are candidates (the work is candidates × top_k
 *   similarities); the rest are not returned. Output documents keep their score; `payload.mmr_score` holds
 *   the marginal value each was picked with (absent on documents without a vector).
 */
import { defineStage, type StageDocument } from '../../../kernel/plugins.js';
import { cosineOfUnits, pause, SIMILARITY_SLICE, unitVectorsOf } from '../../../kernel/retrieval/similarity.js';

export interface MmrParameters {
  feature_uri: string;
  lambda?: number;
  top_k?: number;
  max_candidates?: number;
}

/** Each candidate's incoming score scaled to 0..1 (missing scores count as the lowest). */
function relevances(docs: readonly StageDocument[]): number[] {
  const scores = docs.map((d) => (typeof d.score === 'number' && Number.isFinite(d.score) ? d.score : undefined));
  const present = scores.filter((s): s is number => s !== undefined);
  if (present.length === 0) return docs.map(() => 1);
  const min = Math.min(...present);
  const max = Math.max(...present);
  return scores.map((s) => (max > min ? ((s ?? min) - min) / (max - min) : 1));
}

export default defineStage<MmrParameters>({
  id: 'mmr',
  version: '1.0',
  type: 'sort',
  description:
    'Maximal marginal relevance: picks top_k of the incoming documents, each maximising lambda × relevance (the incoming score scaled to 0..1) ' +
    'minus (1 − lambda) × its highest cosine similarity (vectors of feature_uri) to the documents already picked. lambda 1 keeps the incoming ' +
    'order, 0 favours diversity only. Documents without a vector for the feature follow the picked ones in incoming order. Only the first ' +
    'max_candidates documents are considered (the work is max_candidates × top_k similarities).',
  parameters: {
    type: 'object',
    required: ['feature_uri'],
    additionalProperties: false,
    properties: {
      feature_uri: {
        type: 'string',
        pattern: '^[a-z][a-z0-9+.-]*://[^@/\\s]+@[^/\\s]+/.+$',
        maxLength: 300,
        description: 'The feature whose stored vectors measure similarity (tessera://extractor@version/output).',
      },
      lambda: { type: 'number', minimum: 0, maximum: 1, default: 0.5, description: 'Weight of relevance against diversity.' },
      top_k: { type: 'integer', minimum: 1, maximum: 1000, default: 10, description: 'How many documents to return.' },
      max_candidates: {
        type: 'integer',
        minimum: 1,
        maximum: 2000,
        default: 1000,
        description: 'How many of the incoming documents (in rank order) are candidates; the rest are dropped. Bounds the work to max_candidates × top_k similarities.',
      },
    },
  },
  async run(ctx, docs, params) {
    const lambda = params.lambda ?? 0.5;
    const topK = params.top_k ?? 10;
    const candidates = docs.slice(0, params.max_candidates ?? 1000);
    if (candidates.length === 0) return [];
    const vectors = await unitVectorsOf(ctx, params.feature_uri, candidates);
    const relevance = relevances(candidates);

    const comparable = candidates.flatMap((doc, i) => {
      const vector = vectors.get(doc.document_id);
      return vector ? [{ doc, vector, relevance: relevance[i]! }] : [];
    });
    // The highest similarity of each comparable candidate to any pick so far (none yet: no penalty).
    const closest = new Float64Array(comparable.length);
    const picked = new Uint8Array(comparable.length);
    const out: StageDocument[] = [];
    let work = 0;
    while (out.length < Math.min(topK, comparable.length)) {
      let best = -1;
      let bestValue = -Infinity;
      for (let i = 0; i < comparable.length; i++) {
        if (picked[i]) continue;
        const value = lambda * comparable[i]!.relevance - (out.length === 0 ? 0 : (1 - lambda) * closest[i]!);
        if (value > bestValue) {
          best = i;
          bestValue = value;
        }
      }
      picked[best] = 1;
      const choice = comparable[best]!;
      out.push({ ...choice.doc, payload: { ...choice.doc.payload, mmr_score: bestValue } });
      for (let i = 0; i < comparable.length; i++) {
        if (picked[i]) continue;
        const similarity = cosineOfUnits(comparable[i]!.vector, choice.vector);
        if (out.length === 1 || similarity > closest[i]!) closest[i] = similarity;
      }
      work += comparable.length;
      if (work >= SIMILARITY_SLICE) {
        work = 0;
        await pause();
      }
    }
    for (const doc of candidates) {
      if (out.length >= topK) break;
      if (!vectors.has(doc.document_id)) out.push(doc);
    }
    return out;
  },
});
