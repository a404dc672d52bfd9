/**
 * Cross-encoders (task `rerank`): each (query, passage) pair is tokenized as one sequence pair by the
 * folder's tokenizer (its pair template: `[CLS] q [SEP] p [SEP]` with segment ids 0/1 for BERT-style
 * tokenizers), fed with token_type_ids where the graph takes them, and the model's logit for the pair is
 * its score: the single logit, or the positive class's column of a multi-class head, optionally through a
 * sigmoid. A pair longer than max_length loses the end of its passage, never the query or the template's
 * special tokens. Rows are padded to the longest pair of the batch and masked, so a pair's score does not
 * depend on its batch.
 */
import { readFile } from 'node:fs/promises';
import type { Tensor } from 'onnxruntime-node';
import { InputError } from '../../../kernel/errors.js';
import type { RerankInput } from '../../../kernel/inference/model-io.js';
import type { RerankModelSpec } from './manifest.js';
import { integerTensor, openSession, runForOutput, type ModelSession } from './session.js';
import { resolvePadId } from './text.js';

type TokenizerClass = typeof import('@huggingface/tokenizers').Tokenizer;

export interface PairEncoding {
  ids: number[];
  typeIds: number[];
}

export interface PairEncoder {
  encode(query: string, passage: string): PairEncoding;
  padId: number;
}

/** Index of the last occurrence of `needle` in `haystack` starting at or after `from`, or -1. */
function lastIndexOf(haystack: readonly number[], needle: readonly number[], from: number): number {
  for (let start = haystack.length - needle.length; start >= from; start--) {
    let match = true;
    for (let k = 0; k < needle.length && match; k++) match = haystack[start + k] === needle[k];
    if (match) return start;
  }
  return -1;
}

export function createPairEncoder(Tokenizer: TokenizerClass, tokenizerJson: Record<string, unknown>, spec: RerankModelSpec): PairEncoder {
  const tokenizer = new Tokenizer(tokenizerJson, spec.tokenizerConfig);
  const maxLength = spec.maxLength;
  return {
    padId: resolvePadId(tokenizer, tokenizerJson, spec.tokenizerConfig, spec.padTokenId),
    encode(query, passage) {
      const pair = tokenizer.encode(query, { text_pair: passage, return_token_type_ids: true });
      const ids = pair.ids;
      const typeIds = pair.token_type_ids ?? new Array<number>(ids.length).fill(0);
      if (ids.length <= maxLength) return { ids, typeIds };
      // Cut the passage's own tokens, where the template put them (after the query's), by the overflow.
      const passageIds = tokenizer.encode(passage, { add_special_tokens: false }).ids;
      const queryLength = tokenizer.encode(query, { add_special_tokens: false }).ids.length;
      const start = passageIds.length > 0 ? lastIndexOf(ids, passageIds, queryLength) : -1;
      const keep = passageIds.length - (ids.length - maxLength);
      if (start >= 0 && keep >= 1) {
        const end = start + passageIds.length;
        return {
          ids: [...ids.slice(0, start + keep), ...ids.slice(end)],
          typeIds: [...typeIds.slice(0, start + keep), ...typeIds.slice(end)],
        };
      }
      // A query too long to leave room for the passage: keep the start and the closing token.
      return {
        ids: [...ids.slice(0, maxLength - 1), ids[ids.length - 1]!],
        typeIds: [...typeIds.slice(0, maxLength - 1), typeIds[typeIds.length - 1]!],
      };
    },
  };
}

export interface RerankRunner {
  load(): Promise<void>;
  score(pairs: readonly unknown[]): Promise<number[]>;
}

function isPair(value: unknown): value is RerankInput {
  return !!value && typeof value === 'object' && typeof (value as RerankInput).query === 'string' && typeof (value as RerankInput).document === 'string';
}

export function createRerankRunner(spec: RerankModelSpec): RerankRunner {
  let model: ModelSession | undefined;
  let encoder: PairEncoder | undefined;

  return {
    async load() {
      const [{ Tokenizer }, json] = await Promise.all([import('@huggingface/tokenizers'), readFile(spec.tokenizerFile, 'utf8')]);
      encoder = createPairEncoder(Tokenizer, JSON.parse(json) as Record<string, unknown>, spec);
      const { inputIds, attentionMask, tokenTypeIds, positionIds } = spec.inputs;
      const inputs = [inputIds, attentionMask, tokenTypeIds, positionIds].filter((n): n is string => n !== null);
      model = await openSession(spec.modelFile, { inputs, output: spec.output });
    },

    async score(pairs) {
      if (!model || !encoder) throw new Error('not loaded');
      const encoded = pairs.map((pair, i) => {
        if (!isPair(pair)) throw new InputError(`onnx model ${spec.name}: input ${i} is not a (query, document) pair`);
        return encoder!.encode(pair.query, pair.document);
      });
      const length = spec.fixedLength ?? Math.max(1, ...encoded.map((e) => e.ids.length));
      const batch = encoded.length;
      const ids = new Array<number>(batch * length).fill(encoder.padId);
      const types = new Array<number>(batch * length).fill(0);
      const mask = new Array<number>(batch * length).fill(0);
      encoded.forEach((row, b) =>
        row.ids.forEach((id, t) => {
          ids[b * length + t] = id;
          types[b * length + t] = row.typeIds[t] ?? 0;
          mask[b * length + t] = 1;
        }),
      );
      const dims = [batch, length];
      const { inputIds, attentionMask, tokenTypeIds, positionIds } = spec.inputs;
      const feeds: Record<string, Tensor> = { [inputIds]: integerTensor(model, inputIds, ids, dims) };
      if (attentionMask) feeds[attentionMask] = integerTensor(model, attentionMask, mask, dims);
      if (tokenTypeIds) feeds[tokenTypeIds] = integerTensor(model, tokenTypeIds, types, dims);
      if (positionIds) feeds[positionIds] = integerTensor(model, positionIds, Array.from({ length: batch * length }, (_, i) => i % length), dims);
      const output = await runForOutput(model, feeds, spec.output);
      return logits(output, batch, spec);
    },
  };
}

/** One score per row from [batch] or [batch, classes] logits. */
function logits(output: { data: ArrayLike<number>; dims: readonly number[] }, batch: number, spec: RerankModelSpec): number[] {
  const { data, dims } = output;
  if (dims[0] !== batch || (dims.length !== 1 && dims.length !== 2)) {
    throw new Error(`onnx model ${spec.name}: output '${spec.output}' has shape [${dims.join(', ')}]; [batch] or [batch, classes] logits are supported`);
  }
  const width = dims.length === 1 ? 1 : dims[1]!;
  const column = width === 1 ? 0 : spec.positiveIndex;
  if (column >= width) throw new Error(`onnx model ${spec.name}: positive_index ${column} is outside the ${width} output columns`);
  return Array.from({ length: batch }, (_, b) => {
    const logit = data[b * width + column]!;
    if (!Number.isFinite(logit)) throw new Error(`onnx model ${spec.name} produced a non-finite logit`);
    return spec.sigmoid ? 1 / (1 + Math.exp(-logit)) : logit;
  });
}
