/**
 * `lexical-reranker`: the default model of the `rerank` stage, offline and weight-free (see ./score.ts:
 * saturated term frequency with length normalisation, a term-specificity prior, exact-phrase, bigram and
 * proximity bonuses over Unicode-aware terms). Input per item: `{ query, document }` (one pair, as the
 * inference worker's Rerank call passes them). Output per item: a score ≥ 0, higher is more relevant.
 * Scores do not depend on the batch, so separate calls can be merged.
 */
import type { RerankInput } from '../../../kernel/inference/model-io.js';
import { defineModel, type ModelPlugin } from '../../../kernel/plugins.js';
import { lexicalScore } from './score.js';

export { lexicalScore, termWeight, MAX_PASSAGE_TERMS, MAX_QUERY_TERMS } from './score.js';

export const LEXICAL_RERANKER = 'lexical-reranker';

/** A fresh model instance (nothing to load: instances only differ by identity). */
export function createLexicalRerankerModel(): ModelPlugin<RerankInput, number> {
  return defineModel<RerankInput, number>({
    name: LEXICAL_RERANKER,
    task: 'rerank',
    load: async () => {},
    infer: async (inputs) =>
      inputs.map((pair, i) => {
        if (!pair || typeof pair.query !== 'string' || typeof pair.document !== 'string') {
          throw new TypeError(`${LEXICAL_RERANKER}: input ${i} needs a query and a document (strings)`);
        }
        return lexicalScore(pair.query, pair.document);
      }),
  });
}

export default createLexicalRerankerModel();
