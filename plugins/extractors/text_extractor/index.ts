/**
 * text_extractor: cuts a text into chunks (by characters, words, sentences or paragraphs, with overlap)
 * and writes one document per chunk with the chunk text (for the full-text index), its position in the
 * original text, and a `text_embedding` computed by the inference workers.
 *
 * Draft keys are `chunk:<index>`: chunking is deterministic, so re-running the same text with the same
 * parameters yields the same keys and the document writer replaces rather than duplicates.
 */
import { InputError } from '../../../kernel/errors.js';
import { defineExtractor, type DocumentDraft, type ExtractorContext } from '../../../kernel/plugins.js';
import { chunkText, countWords, type Chunk } from './chunking.js';
import { resolveText } from './input.js';
import { parametersSchema, resolveParameters } from './parameters.js';

export const TEXT_EMBEDDING_DIMS = 384;
/**
 * Chunks per embedText call. Matches the inference client's default batch, so one call is one gRPC
 * request, and bounds how many embedded chunks are held before they are yielded.
 */
export const EMBED_BATCH = 64;

async function embed(ctx: ExtractorContext, model: string, chunks: readonly Chunk[]): Promise<number[][]> {
  const vectors = await ctx.inference.embedText(model, chunks.map((c) => c.text));
  if (vectors.length !== chunks.length) {
    throw new Error(`text_extractor: model ${model} returned ${vectors.length} vectors for ${chunks.length} texts`);
  }
  // The collection sized its index from the model's declared dims; a model breaking them is refused here.
  const dims = vectors[0]?.length ?? 0;
  if (dims === 0 || vectors.some((v) => v.length !== dims)) {
    throw new InputError(`text_extractor: model '${model}' returned vectors of differing or zero size`, { model });
  }
  return vectors;
}

export default defineExtractor({
  name: 'text_extractor',
  version: '1.0',
  description:
    'Splits text into overlapping chunks (characters, words, sentences or paragraphs) and writes one document per chunk ' +
    'with its text, offsets and a 384-d text embedding.',
  accepts: ['text/*', 'application/json'],
  inputs: [
    {
      name: 'text',
      type: 'text',
      required: true,
      description: 'The text to chunk: a string, a JSON value (as compact JSON), or a blob reference read as UTF-8.',
    },
  ],
  parameters: parametersSchema,
  features: [{ name: 'text_embedding', dims: TEXT_EMBEDDING_DIMS, distance: 'cosine', model: 'hashed-ngram-text', modelParameter: 'model' }],
  fields: {
    type: 'object',
    additionalProperties: false,
    required: ['text', 'chunk_index', 'chunk_count', 'char_start', 'char_end', 'word_count', 'truncated'],
    properties: {
      text: { type: 'string', minLength: 1, description: 'The chunk, exactly as in the original text (full-text searchable).' },
      chunk_index: { type: 'integer', minimum: 0, description: 'Position of the chunk among the kept chunks, from 0.' },
      chunk_count: { type: 'integer', minimum: 1, description: 'Number of chunks the text gave.' },
      char_start: { type: 'integer', minimum: 0, description: 'Offset of the chunk in the original text (UTF-16 code units).' },
      char_end: { type: 'integer', minimum: 1, description: 'End offset (exclusive): text = original.slice(char_start, char_end).' },
      word_count: { type: 'integer', minimum: 0, description: 'Words in the chunk.' },
      truncated: { type: 'boolean', description: 'The original text was longer than max_chars and only its start was processed.' },
    },
  },
  async *extract(ctx, input): AsyncIterable<DocumentDraft> {
    const params = resolveParameters(input.parameters);
    const { text, truncated } = await resolveText(ctx.blobs, input.fields.text, params.maxChars);
    if (truncated) {
      ctx.log.warn({ objectId: input.objectId, maxChars: params.maxChars }, 'text_extractor: text longer than max_chars was truncated');
    }
    const chunks = chunkText(text, {
      splitBy: params.splitBy,
      size: params.chunkSize,
      overlap: params.chunkOverlap,
      minChars: params.minChunkChars,
    });
    for (let batchStart = 0; batchStart < chunks.length; batchStart += EMBED_BATCH) {
      const batch = chunks.slice(batchStart, batchStart + EMBED_BATCH);
      const vectors = await embed(ctx, params.model, batch);
      for (let i = 0; i < batch.length; i++) {
        const chunk = batch[i]!;
        const index = batchStart + i;
        yield {
          key: `chunk:${index}`,
          fields: {
            text: chunk.text,
            chunk_index: index,
            chunk_count: chunks.length,
            char_start: chunk.start,
            char_end: chunk.end,
            word_count: params.splitBy === 'words' ? chunk.units : countWords(chunk.text),
            truncated,
          },
          features: { text_embedding: vectors[i]! },
        };
      }
    }
  },
});
