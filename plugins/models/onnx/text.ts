/**
 * Text models: texts → token ids with the folder's own tokenizer.json (@huggingface/tokenizers, pure
 * JS, nothing fetched), truncated to max_length keeping the special tokens around the text, padded to
 * the longest in the batch, and pooled over real tokens only.
 */
import { readFile } from 'node:fs/promises';
import type { Tensor } from 'onnxruntime-node';
import { InputError } from '../../../kernel/errors.js';
import type { TextModelSpec } from './manifest.js';
import { finishVector, poolRows } from './pooling.js';
import { integerTensor, openSession, runForOutput, type ModelSession } from './session.js';

type TokenizerClass = typeof import('@huggingface/tokenizers').Tokenizer;
type Tokenizer = InstanceType<TokenizerClass>;

export interface TextEncoder {
  /** Token ids of one text, special tokens included, at most `maxLength` long. */
  encode(text: string): number[];
  padId: number;
}

/** The name of a token as tokenizer_config.json gives it: a string, or an AddedToken object `{content}`. */
function tokenName(value: unknown): string | undefined {
  if (typeof value === 'string') return value;
  if (value && typeof value === 'object' && typeof (value as { content?: unknown }).content === 'string') return (value as { content: string }).content;
  return undefined;
}

/** The pad id: manifest, then tokenizer_config's pad_token, tokenizer.json's padding, the usual names, else 0. */
export function resolvePadId(tokenizer: Tokenizer, tokenizerJson: Record<string, unknown>, config: Record<string, unknown>, override: number | null): number {
  if (override !== null) return override;
  const candidates = [tokenName(config.pad_token), '[PAD]', '<pad>'];
  const padding = tokenizerJson.padding as { pad_id?: unknown } | null | undefined;
  const configured = candidates[0] === undefined ? undefined : tokenizer.token_to_id(candidates[0]);
  if (configured !== undefined) return configured;
  if (typeof padding?.pad_id === 'number') return padding.pad_id;
  for (const name of candidates.slice(1)) {
    const id = tokenizer.token_to_id(name!);
    if (id !== undefined) return id;
  }
  // Padded positions are masked out, so any id in the vocabulary will do.
  return 0;
}

export function createTextEncoder(Tokenizer: TokenizerClass, tokenizerJson: Record<string, unknown>, spec: TextModelSpec): TextEncoder {
  const tokenizer = new Tokenizer(tokenizerJson, spec.tokenizerConfig);
  const specialIds = new Set([...tokenizer.get_added_tokens_decoder()].filter(([, token]) => token.special).map(([id]) => id));
  const maxLength = spec.maxLength;
  return {
    padId: resolvePadId(tokenizer, tokenizerJson, spec.tokenizerConfig, spec.padTokenId),
    encode(text) {
      const ids = tokenizer.encode(text).ids;
      if (ids.length <= maxLength) return ids;
      // Keep the template's leading and trailing special tokens ([CLS] … [SEP], <s> … </s>) and cut the text.
      const added = ids.length - tokenizer.encode(text, { add_special_tokens: false }).ids.length;
      let prefix = 0;
      while (prefix < added && specialIds.has(ids[prefix]!)) prefix++;
      const suffix = Math.min(added - prefix, maxLength - prefix - 1);
      return [...ids.slice(0, maxLength - suffix), ...ids.slice(ids.length - suffix)];
    },
  };
}

export interface TextRunner {
  load(): Promise<void>;
  embed(texts: readonly unknown[]): Promise<number[][]>;
}

export function createTextRunner(spec: TextModelSpec): TextRunner {
  let model: ModelSession | undefined;
  let encoder: TextEncoder | undefined;

  return {
    async load() {
      const [{ Tokenizer }, json] = await Promise.all([import('@huggingface/tokenizers'), readFile(spec.tokenizerFile, 'utf8')]);
      encoder = createTextEncoder(Tokenizer, JSON.parse(json) as Record<string, unknown>, spec);
      const { inputIds, attentionMask, tokenTypeIds, positionIds } = spec.inputs;
      const inputs = [inputIds, attentionMask, tokenTypeIds, positionIds].filter((n): n is string => n !== null);
      model = await openSession(spec.modelFile, { inputs, output: spec.output });
    },

    async embed(texts) {
      if (!model || !encoder) throw new Error('not loaded');
      const encoded = texts.map((text, i) => {
        if (typeof text !== 'string') throw new InputError(`onnx model ${spec.name}: input ${i} is not a string`);
        return encoder!.encode(text);
      });
      // Pad to the longest text (at least one position, so a tokenizer that yields nothing for '' still
      // makes a valid tensor), or to the length the graph fixes.
      const length = spec.fixedLength ?? Math.max(1, ...encoded.map((ids) => ids.length));
      const batch = encoded.length;
      const ids = new Array<number>(batch * length).fill(encoder.padId);
      const mask = new Array<number>(batch * length).fill(0);
      encoded.forEach((row, b) =>
        row.forEach((id, t) => {
          ids[b * length + t] = id;
          mask[b * length + t] = 1;
        }),
      );
      const dims = [batch, length];
      const { inputIds, attentionMask, tokenTypeIds, positionIds } = spec.inputs;
      const feeds: Record<string, Tensor> = { [inputIds]: integerTensor(model, inputIds, ids, dims) };
      if (attentionMask) feeds[attentionMask] = integerTensor(model, attentionMask, mask, dims);
      // One segment per text: all token types are 0.
      if (tokenTypeIds) feeds[tokenTypeIds] = integerTensor(model, tokenTypeIds, new Array<number>(batch * length).fill(0), dims);
      if (positionIds) {
        feeds[positionIds] = integerTensor(model, positionIds, Array.from({ length: batch * length }, (_, i) => i % length), dims);
      }
      const output = await runForOutput(model, feeds, spec.output);
      const vectors = poolRows(output, spec.pooling, (b, t) => mask[b * length + t] === 1);
      return vectors.map((v) => finishVector(v, spec.normalize, spec.name));
    },
  };
}
