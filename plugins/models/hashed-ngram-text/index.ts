/**
 * `hashed-ngram-text`: a weight-free text embedder (signed feature hashing of word unigrams, bigrams and
 * character 3–5-grams; see ./embed.ts). Input: one string per item. Output: a 384-d L2-normalised
 * `number[]` per item (plain arrays, so results cross gRPC/JSON without conversion). Lexical, not
 * semantic, similarity.
 */
import { defineModel, type ModelPlugin } from '../../../kernel/plugins.js';
import { HASHED_NGRAM_DIMS, createHashedNgramEmbedder } from './embed.js';

export { HASHED_NGRAM_DIMS, createHashedNgramEmbedder, hashedNgramEmbedding, normaliseText } from './embed.js';
export type { HashedNgramOptions } from './embed.js';

/** A fresh model instance (there is nothing to load, so instances only differ by identity). */
export function createHashedNgramTextModel(): ModelPlugin<string, number[]> {
  const embed = createHashedNgramEmbedder();
  return defineModel<string, number[]>({
    name: 'hashed-ngram-text',
    task: 'embed_text',
    dims: HASHED_NGRAM_DIMS,
    // Nothing to download or open: the "weights" are the hash function.
    load: async () => {},
    infer: async (inputs) =>
      inputs.map((text, i) => {
        if (typeof text !== 'string') throw new TypeError(`hashed-ngram-text: input ${i} is not a string`);
        return embed(text);
      }),
  });
}

export default createHashedNgramTextModel();
