/**
 * Token counting for language-model context with the encodings bundled in js-tiktoken (nothing is
 * downloaded). An encoding is built once per process, on first use (~0.5-1 s for o200k_base).
 *
 * BPE over one pre-tokenized piece is quadratic in its length (10,000 letters without a space take
 * seconds), so text is encoded in segments cut inside any run of more than MAX_RUN non-space (or space)
 * characters. Ordinary text has no such run and is counted exactly as the model's tokenizer counts it; a
 * pathological run is counted as if broken every MAX_RUN characters.
 */
import { Tiktoken } from 'js-tiktoken/lite';

export const ENCODINGS = ['o200k_base', 'cl100k_base'] as const;
export type EncodingName = (typeof ENCODINGS)[number];

const MAX_RUN = 200;
/** A first guess of characters per token when looking at the head of a text (English is ~4). */
const HEAD_CHARS_PER_TOKEN = 8;

export interface TokenCounter {
  readonly encoding: EncodingName;
  encode(text: string): number[];
  count(text: string): number;
  /**
   * The longest head of `text` of at most `maxTokens` tokens, reading only as much of `text` as needed.
   * `whole` when that is all of it.
   */
  head(text: string, maxTokens: number): { text: string; tokens: number; whole: boolean };
}

const loading = new Map<EncodingName, Promise<TokenCounter>>();

async function ranksOf(name: EncodingName) {
  switch (name) {
    case 'o200k_base':
      return (await import('js-tiktoken/ranks/o200k_base')).default;
    case 'cl100k_base':
      return (await import('js-tiktoken/ranks/cl100k_base')).default;
  }
}

/** The counter for an encoding, built on first use and shared afterwards. */
export function tokenCounter(name: EncodingName): Promise<TokenCounter> {
  let counter = loading.get(name);
  if (!counter) {
    counter = ranksOf(name).then((ranks) => counterOf(name, new Tiktoken(ranks)));
    counter.catch(() => loading.delete(name));
    loading.set(name, counter);
  }
  return counter;
}

/** `text` cut inside every run of more than MAX_RUN same-kind characters (see the file comment). */
export function segments(text: string): string[] {
  const out: string[] = [];
  let start = 0;
  for (const run of text.matchAll(/\S{201,}|\s{201,}/g)) {
    const end = run.index + run[0].length;
    for (let cut = run.index + MAX_RUN; cut < end; cut += MAX_RUN) {
      out.push(text.slice(start, cut));
      start = cut;
    }
  }
  out.push(text.slice(start));
  return out;
}

function counterOf(encoding: EncodingName, tiktoken: Tiktoken): TokenCounter {
  // Special-token text (`<|endoftext|>`) in a document is ordinary text, not a control token or an error.
  const encode = (text: string) => segments(text).flatMap((s) => (s === '' ? [] : tiktoken.encode(s, [], [])));
  return {
    encoding,
    encode,
    count: (text) => encode(text).length,
    head(text, maxTokens) {
      if (maxTokens <= 0) return { text: '', tokens: 0, whole: text === '' };
      let window = Math.min(text.length, (maxTokens + 1) * HEAD_CHARS_PER_TOKEN);
      let tokens = encode(text.slice(0, window));
      while (tokens.length <= maxTokens && window < text.length) {
        window = Math.min(text.length, window * 2);
        tokens = encode(text.slice(0, window));
      }
      if (tokens.length <= maxTokens) return { text, tokens: tokens.length, whole: true };
      // Decode the first maxTokens tokens; a token ending inside a character decodes to U+FFFD: drop it.
      let keep = maxTokens;
      for (let attempt = 0; attempt < 8 && keep > 0; attempt++) {
        const cut = tiktoken.decode(tokens.slice(0, keep)).replace(/\uFFFD+$/, '');
        const counted = encode(cut).length;
        if (counted <= maxTokens) return { text: cut, tokens: counted, whole: false };
        keep -= counted - maxTokens;
      }
      return { text: '', tokens: 0, whole: false };
    },
  };
}
