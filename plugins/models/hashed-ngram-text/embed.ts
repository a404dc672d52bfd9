/**
 * Signed feature hashing of word and character n-grams ("the hashing trick"): a text embedding that needs
 * no trained weights. It captures lexical overlap (shared words, shared word pairs, shared character
 * n-grams, so typos and inflections stay close), not meaning: two paraphrases with no words in common are
 * far apart. Use it where offline, deterministic, language-agnostic lexical similarity is what's wanted,
 * or until a real sentence model is dropped into the `onnx` model.
 *
 * Pipeline: NFKC-normalise, lowercase, collapse every run of non-letter/number/mark characters into one
 * space; features are word unigrams, word bigrams and character 3/4/5-grams of the space-padded string
 * (which also span word boundaries, so scripts written without spaces still get useful features); each
 * feature's count becomes 1 + ln(tf); each feature group is scaled to a fixed share of the norm (so long
 * texts do not drown words in character n-grams), hashed with a sign into 384 buckets and the result
 * L2-normalised.
 */

export const HASHED_NGRAM_DIMS = 384;

export interface HashedNgramOptions {
  /** Output length. Default 384. */
  dims?: number;
  /** Share of each feature group in the vector (relative weights, applied after per-group normalisation). */
  weights?: { words?: number; bigrams?: number; chars?: number };
  /** Character n-gram lengths, inclusive. Default 3..5. */
  minChar?: number;
  maxChar?: number;
}

const FNV_OFFSET = 0x811c9dc5;
const FNV_PRIME = 0x01000193;

// Different seeds per feature group, so the word "abc" and the character trigram "abc" are different features.
const SEED_WORD = 0x9e3779b1;
const SEED_BIGRAM = 0x85ebca77;
const SEED_CHAR = 0xc2b2ae3d;
const SEED_EMPTY = 0x27d4eb2f;
const SPACE = 0x20;

/** One FNV-1a step over a whole code point (the murmur3 finaliser below repairs FNV's weak low bits). */
function step(h: number, codePoint: number): number {
  return Math.imul(h ^ codePoint, FNV_PRIME) >>> 0;
}

/** murmur3's fmix32: spreads every input bit over the output before we take a bucket and a sign from it. */
function fmix32(h: number): number {
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

const SEPARATORS = /[^\p{L}\p{N}\p{M}]+/gu;

/** The text the features are read from: NFKC, lowercase, words separated by single spaces, space-padded. */
export function normaliseText(text: string): string {
  const cleaned = text.normalize('NFKC').toLowerCase().replace(SEPARATORS, ' ').trim();
  return cleaned.length === 0 ? '' : ` ${cleaned} `;
}

/**
 * Counts of 32-bit feature hashes: an open-addressing table in typed arrays, reused from call to call by
 * one embedder (a Map per text was the bottleneck). Owned by an embedder closure, never shared globally;
 * embedding is synchronous, so reuse cannot interleave.
 */
class HashCounter {
  private keys = new Int32Array(256);
  private counts = new Uint32Array(256); // 0 = empty slot
  private used = new Int32Array(128); // occupied slot indexes, in insertion order (deterministic iteration)
  size = 0;

  clear(): void {
    for (let i = 0; i < this.size; i++) this.counts[this.used[i]!] = 0;
    this.size = 0;
  }

  add(key: number): void {
    if (this.size * 2 >= this.keys.length) this.grow();
    const mask = this.keys.length - 1;
    let slot = key & mask;
    const k = key | 0;
    for (;;) {
      const c = this.counts[slot]!;
      if (c === 0) {
        this.keys[slot] = k;
        this.counts[slot] = 1;
        this.used[this.size++] = slot;
        return;
      }
      if (this.keys[slot] === k) {
        this.counts[slot] = c + 1;
        return;
      }
      slot = (slot + 1) & mask;
    }
  }

  /** Calls fn(hash, tf) for every distinct key, in first-seen order. */
  forEach(fn: (key: number, tf: number) => void): void {
    for (let i = 0; i < this.size; i++) {
      const slot = this.used[i]!;
      fn(this.keys[slot]! >>> 0, this.counts[slot]!);
    }
  }

  private grow(): void {
    const oldKeys = this.keys;
    const oldCounts = this.counts;
    const order = Array.from(this.used.subarray(0, this.size), (slot) => [oldKeys[slot]!, oldCounts[slot]!] as const);
    this.keys = new Int32Array(oldKeys.length * 2);
    this.counts = new Uint32Array(oldKeys.length * 2);
    this.used = new Int32Array(oldKeys.length);
    this.size = 0;
    const mask = this.keys.length - 1;
    for (const [k, c] of order) {
      let slot = k & mask;
      while (this.counts[slot] !== 0) slot = (slot + 1) & mask;
      this.keys[slot] = k;
      this.counts[slot] = c;
      this.used[this.size++] = slot;
    }
  }
}

/**
 * Builds an embedder. The returned function reuses private scratch tables between calls but its result
 * depends only on the text (and the options), so one embedder can be shared by any number of callers.
 */
export function createHashedNgramEmbedder(options: HashedNgramOptions = {}): (text: string) => number[] {
  const dims = options.dims ?? HASHED_NGRAM_DIMS;
  const minChar = options.minChar ?? 3;
  const maxChar = options.maxChar ?? 5;
  const wWords = options.weights?.words ?? 1;
  const wBigrams = options.weights?.bigrams ?? 0.6;
  const wChars = options.weights?.chars ?? 1;
  if (!Number.isInteger(dims) || dims < 2) throw new RangeError(`dims must be an integer ≥ 2, got ${dims}`);
  if (!(minChar >= 1 && maxChar >= minChar)) throw new RangeError('need 1 ≤ minChar ≤ maxChar');

  const words = new HashCounter();
  const bigrams = new HashCounter();
  const chars = new HashCounter();
  let cps = new Int32Array(128);

  return function embed(text: string): number[] {
    const padded = normaliseText(text);
    words.clear();
    bigrams.clear();
    chars.clear();

    // Code points, not UTF-16 units: an astral character (emoji, rare CJK) counts as one character.
    if (cps.length < padded.length) cps = new Int32Array(padded.length * 2);
    let n = 0;
    for (let i = 0; i < padded.length; i++) {
      const cp = padded.codePointAt(i)!;
      if (cp > 0xffff) i++;
      cps[n++] = cp;
    }

    // Words and bigrams in one pass; the padding guarantees a space before and after every word.
    let word = FNV_OFFSET ^ SEED_WORD;
    let inWord = false;
    let previous = -1; // previous word's hash, -1 at the start
    for (let i = 0; i < n; i++) {
      const cp = cps[i]!;
      if (cp === SPACE) {
        if (inWord) {
          const w = fmix32(word);
          words.add(w);
          if (previous !== -1) bigrams.add(fmix32(step(step(FNV_OFFSET ^ SEED_BIGRAM, previous), w)));
          previous = w;
          inWord = false;
          word = FNV_OFFSET ^ SEED_WORD;
        }
      } else {
        word = step(word, cp);
        inWord = true;
      }
    }

    // Character n-grams, each hashed incrementally from its start so no substring is ever allocated.
    for (let i = 0; i < n; i++) {
      let h = FNV_OFFSET ^ SEED_CHAR;
      const last = Math.min(n, i + maxChar);
      for (let j = i; j < last; j++) {
        h = step(h, cps[j]!);
        const len = j - i + 1;
        if (len >= minChar) chars.add(fmix32(h ^ len));
      }
    }

    const vec = new Float64Array(dims);
    let any = false;
    any = addGroup(vec, words, wWords) || any;
    any = addGroup(vec, bigrams, wBigrams) || any;
    any = addGroup(vec, chars, wChars) || any;
    if (!any) {
      // No features at all (empty or punctuation-only text): a fixed unit vector, so the output is still
      // L2-normalised and cosine stays defined downstream (a zero vector would give NaN in pgvector).
      addFeature(vec, fmix32(SEED_EMPTY), 1);
    }
    let norm = 0;
    for (let i = 0; i < dims; i++) norm += vec[i]! * vec[i]!;
    if (norm === 0) {
      // Every feature cancelled out by sign collisions (vanishingly rare): fall back to the empty vector.
      addFeature(vec, fmix32(SEED_EMPTY), 1);
      norm = 1;
    }
    const inv = 1 / Math.sqrt(norm);
    const out = new Array<number>(dims);
    for (let i = 0; i < dims; i++) out[i] = vec[i]! * inv;
    return out;

    function addFeature(target: Float64Array, hash: number, value: number): void {
      // The top bit is the sign, the rest picks the bucket: signed hashing makes collisions cancel on
      // average instead of piling up, keeping inner products unbiased.
      const bucket = (hash & 0x7fffffff) % dims;
      target[bucket]! += hash & 0x80000000 ? -value : value;
    }

    function addGroup(target: Float64Array, counts: HashCounter, weight: number): boolean {
      if (counts.size === 0 || weight === 0) return false;
      let sumSq = 0;
      counts.forEach((_hash, tf) => {
        const w = 1 + Math.log(tf);
        sumSq += w * w;
      });
      const scale = weight / Math.sqrt(sumSq);
      counts.forEach((hash, tf) => addFeature(target, hash, (1 + Math.log(tf)) * scale));
      return true;
    }
  };
}

/**
 * One text with the default settings (384 dims), for direct use outside a worker. It builds a fresh
 * embedder each call so no module-level state exists; for many texts, create one embedder and reuse it.
 */
export function hashedNgramEmbedding(text: string): number[] {
  return createHashedNgramEmbedder()(text);
}
