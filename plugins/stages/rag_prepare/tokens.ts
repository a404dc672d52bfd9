/**
 * Token counting for language-model context with the encodings bundled in js-tiktoken (nothing is
 * downloaded). An encoding is built once per process, on first use.
 *
 * Only js-tiktoken's rank data is used. Its encoder re-joins and looks up every pair of a piece after each
 * merge (cubic in the piece's length: seconds for 200,000 letters or 20,000 emoji, on the event loop), and a
 * JavaScript Map of 200,000 strings costs 0.2-0.5 µs a lookup. This encoder does what tiktoken does — split
 * text with the encoding's pattern; a piece that is a token is that token; else merge its bytes lowest rank
 * first, leftmost among equals — so it gives the same tokens, but in linear time: tokens are found in a
 * typed-array hash table by a hash that is extended, not recomputed, on a merge, and merges are ordered by a
 * heap.
 *
 * Pieces stay short: text is encoded in segments cut inside any run of more than MAX_RUN non-space (or
 * space) characters (never inside a character), and the rare piece still longer than MAX_PIECE (o200k's
 * pattern takes "!\n/\n/\n/..." whole) is encoded MAX_RUN characters at a time. Ordinary text has neither
 * and is counted exactly as the model's tokenizer counts it; a pathological run is counted as if broken
 * every MAX_RUN characters.
 */
import { Buffer } from 'node:buffer';
import type { TiktokenBPE } from 'js-tiktoken/lite';

export const ENCODINGS = ['o200k_base', 'cl100k_base'] as const;
export type EncodingName = (typeof ENCODINGS)[number];

const MAX_RUN = 200;
/** Longer than any piece the pattern makes of segments (a run, the character before it and a suffix). */
const MAX_PIECE = 2 * MAX_RUN + 8;
/** Bits for a byte's position in a piece (at most 3 * MAX_PIECE bytes) in a merge's heap key. */
const POSITION_BITS = 11;

export interface Head {
  text: string;
  tokens: number;
  /** The head is all of the text. */
  whole: boolean;
}

/** Awaited every few thousand characters by the async methods: may let the event loop run other work. */
export type Pause = () => Promise<void> | void;

export interface TokenCounter {
  readonly encoding: EncodingName;
  /**
   * The tokens of `text`. With `limit`, stops after the piece that takes it past `limit` tokens, so the
   * work is bounded by the budget, not the text: the result then has more than `limit` tokens, not all.
   */
  encode(text: string, limit?: number): number[];
  count(text: string): number;
  /** The longest head of `text` of at most `maxTokens` tokens, reading only as much of `text` as needed. */
  head(text: string, maxTokens: number): Head;
  /** `count`, awaiting `pause` as it goes (a megabyte of text takes ~0.1-0.3 s). */
  countAsync(text: string, pause: Pause): Promise<number>;
  /** `head`, awaiting `pause` as it goes. */
  headAsync(text: string, maxTokens: number, pause: Pause): Promise<Head>;
}

const loading = new Map<EncodingName, Promise<TokenCounter>>();

async function ranksOf(name: EncodingName): Promise<TiktokenBPE> {
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
    counter = ranksOf(name).then((ranks) => counterOf(name, ranks));
    counter.catch(() => loading.delete(name));
    loading.set(name, counter);
  }
  return counter;
}

/** JavaScript's `\s`, by code unit (a hand loop: a regex scan for long runs costs ~10 ns a character). */
function isSpace(c: number): boolean {
  if (c < 0x80) return c === 0x20 || (c >= 0x09 && c <= 0x0d);
  return c === 0xa0 || c === 0x1680 || (c >= 0x2000 && c <= 0x200a) || c === 0x2028 || c === 0x2029 ||
    c === 0x202f || c === 0x205f || c === 0x3000 || c === 0xfeff;
}

/** A cut at `i` would split a surrogate pair. */
const splitsPair = (text: string, i: number) =>
  (text.charCodeAt(i) & 0xfc00) === 0xdc00 && (text.charCodeAt(i - 1) & 0xfc00) === 0xd800;

/**
 * `text` cut inside every run of more than MAX_RUN same-kind characters (see the file comment), lazily:
 * a caller that stops early does not scan the rest. A cut that would split a surrogate pair is made one
 * code unit earlier.
 */
function* segmentsOf(text: string): Generator<string> {
  let start = 0;
  let inRun = 0; // code units of the current same-kind run since its start or its last cut
  let space = false;
  for (let i = 0; i < text.length; i++) {
    const s = isSpace(text.charCodeAt(i));
    if (i === 0 || s !== space) {
      space = s;
      inRun = 1;
    } else if (inRun < MAX_RUN) {
      inRun++;
    } else {
      const cut = splitsPair(text, i) ? i - 1 : i;
      yield text.slice(start, cut);
      start = cut;
      inRun = i - cut + 1;
    }
  }
  yield text.slice(start);
}

export const segments = (text: string): string[] => [...segmentsOf(text)];

/** Pieces whose merged tokens are kept (cleared when full): a few MB at most. */
const MERGED_CACHE = 1024;

/** Multiplier of the polynomial byte hash: hash(a + b) = hash(a) * HASH_BASE^length(b) + hash(b). */
const HASH_BASE = 0x01000193;
const GOLDEN = 0x9e3779b1;

/**
 * An encoding's tokens (ids are ranks): their bytes, and an open-addressing table of [hash, id + 1] pairs
 * to find a token by its bytes without making a string.
 */
class Vocabulary {
  readonly bytes: Uint8Array;
  /** Token t is bytes[start[t]] up to bytes[start[t + 1]]. */
  readonly start: Int32Array;
  readonly maxLength: number;
  /** The token of each byte, and of each two bytes (b1 << 8 | b2; -1 if none). */
  readonly byteToken = new Int32Array(256).fill(-1);
  readonly pairToken = new Int32Array(1 << 16).fill(-1);
  /** Tokens of recent pieces that needed merging: text repeats (words, and long runs cut into equal pieces). */
  readonly merged = new Map<string, number[]>();
  /** powers[k] = HASH_BASE^k, up to maxLength. */
  readonly powers: Int32Array;
  private readonly slots: Int32Array;
  private readonly shift: number;
  private readonly mask: number;

  constructor(bpeRanks: string) {
    // Lines are "<name> <first rank> <base64 token> <base64 token> ...", ranks consecutive.
    const lines = bpeRanks.split('\n').map((line) => line.split(' ')).filter((fields) => fields.length > 2);
    let size = 0;
    let room = 0;
    for (const fields of lines) {
      size = Math.max(size, Number.parseInt(fields[1]!, 10) + fields.length - 2);
      for (let k = 2; k < fields.length; k++) room += fields[k]!.length;
    }
    const pool = new Uint8Array(Math.ceil((room * 3) / 4));
    const ends = new Int32Array(size); // 0 for a rank no line gives
    let used = 0;
    let maxLength = 0;
    const found: number[] = [];
    for (const fields of lines) {
      const first = Number.parseInt(fields[1]!, 10);
      for (let k = 2; k < fields.length; k++) {
        const token = Buffer.from(fields[k]!, 'base64');
        pool.set(token, used);
        used += token.length;
        ends[first + k - 2] = used;
        maxLength = Math.max(maxLength, token.length);
        found.push(first + k - 2);
      }
    }
    // Ranks come in order in the data; start[] is rebuilt from ends so a gap is an empty token.
    this.bytes = pool.subarray(0, used);
    this.start = new Int32Array(size + 1);
    for (let t = 0; t < size; t++) this.start[t + 1] = ends[t] || this.start[t]!;
    this.maxLength = maxLength;
    this.powers = new Int32Array(maxLength + 1);
    this.powers[0] = 1;
    for (let k = 1; k <= maxLength; k++) this.powers[k] = Math.imul(this.powers[k - 1]!, HASH_BASE);

    const bits = Math.ceil(Math.log2(found.length * 2.5)); // load below 0.4: short probes
    this.shift = 32 - bits;
    this.mask = (1 << bits) - 1;
    this.slots = new Int32Array(2 << bits);
    for (const t of found) {
      const hash = this.hash(this.bytes, this.start[t]!, this.start[t + 1]!);
      let s = Math.imul(hash, GOLDEN) >>> this.shift;
      while (this.slots[2 * s + 1] !== 0) s = (s + 1) & this.mask;
      this.slots[2 * s] = hash;
      this.slots[2 * s + 1] = t + 1;
      const at = this.start[t]!;
      const length = this.start[t + 1]! - at;
      if (length === 1) this.byteToken[this.bytes[at]!] = t;
      if (length === 2) this.pairToken[(this.bytes[at]! << 8) | this.bytes[at + 1]!] = t;
    }
    if (this.byteToken.includes(-1) || size > 1 << (31 - POSITION_BITS)) throw new Error('unexpected BPE ranks');
  }

  hash(bytes: Uint8Array, from: number, to: number): number {
    let hash = 0;
    for (let i = from; i < to; i++) hash = (Math.imul(hash, HASH_BASE) + bytes[i]!) | 0;
    return hash;
  }

  /** The token whose bytes are bytes[from] up to bytes[to] (of hash `hash`), or -1. */
  find(bytes: Uint8Array, from: number, to: number, hash: number): number {
    if (to - from > this.maxLength) return -1;
    for (let s = Math.imul(hash, GOLDEN) >>> this.shift; ; s = (s + 1) & this.mask) {
      const t = this.slots[2 * s + 1]! - 1;
      if (t < 0) return -1;
      if (this.slots[2 * s] !== hash) continue;
      const at = this.start[t]!;
      if (this.start[t + 1]! - at !== to - from) continue;
      let i = 0;
      while (from + i < to && this.bytes[at + i] === bytes[from + i]) i++;
      if (from + i === to) return t;
    }
  }

  /** The text of `tokens` (of the first `count`): bytes copied one by one, no object made per token. */
  decode(tokens: readonly number[], count = tokens.length): string {
    const known = (t: number) => t >= 0 && t + 1 < this.start.length;
    let length = 0;
    for (let k = 0; k < count; k++) {
      const t = tokens[k]!;
      if (known(t)) length += this.start[t + 1]! - this.start[t]!;
    }
    const out = Buffer.allocUnsafe(length);
    let at = 0;
    for (let k = 0; k < count; k++) {
      const t = tokens[k]!;
      if (!known(t)) continue;
      for (let i = this.start[t]!, end = this.start[t + 1]!; i < end; i++) out[at++] = this.bytes[i]!;
    }
    return out.toString('utf8');
  }
}

const POSITION_MASK = (1 << POSITION_BITS) - 1;

/**
 * Encodes pieces of text with one vocabulary. Its work arrays are grown as needed and reused: encoding is
 * synchronous, so one encoder per vocabulary serves every caller.
 */
class PieceEncoder {
  private pieceBytes = Buffer.alloc(4 * MAX_PIECE);
  /** Parts of the piece being merged are named by their first byte: part i ends where part next[i] starts. */
  private next = new Int32Array(0);
  private prev = new Int32Array(0);
  private partToken = new Int32Array(0);
  private partHash = new Int32Array(0);
  /** Of the pair that starts at part i: its token (-1 if none) and that token's hash. */
  private pairToken = new Int32Array(0);
  private pairHash = new Int32Array(0);
  /**
   * Pairs that are tokens, as token << POSITION_BITS | first byte: the smallest is the lowest rank, leftmost
   * (tiktoken's order). Ranks are below 2^20 (checked on loading) and a piece is at most 3 * MAX_PIECE < 2^11
   * bytes, so a key is an int.
   */
  private heap = new Int32Array(0);
  private heapSize = 0;

  constructor(private readonly vocab: Vocabulary) {}

  /** Pushes the tokens of `piece` to `out`. */
  encode(piece: string, out: number[]): void {
    const vocab = this.vocab;
    const n = this.utf8(piece);
    const t = n <= vocab.maxLength ? vocab.find(this.pieceBytes, 0, n, vocab.hash(this.pieceBytes, 0, n)) : -1;
    if (t >= 0) {
      out.push(t);
      return;
    }
    // Keyed by a copy of the bytes: a slice of the text would keep all of the text alive.
    const key = this.pieceBytes.toString('latin1', 0, n);
    let tokens = vocab.merged.get(key);
    if (!tokens) {
      tokens = [];
      this.bytePairEncode(n, tokens);
      if (vocab.merged.size >= MERGED_CACHE) vocab.merged.clear();
      vocab.merged.set(key, tokens);
    }
    for (const token of tokens) out.push(token);
  }

  /** Puts the UTF-8 bytes of `piece` in pieceBytes; their number. */
  private utf8(piece: string): number {
    if (this.pieceBytes.length < 3 * piece.length) this.pieceBytes = Buffer.alloc(3 * piece.length);
    const bytes = this.pieceBytes;
    for (let i = 0; i < piece.length; i++) {
      const c = piece.charCodeAt(i);
      if (c > 0x7f) return bytes.write(piece, 'utf8'); // a lone surrogate becomes U+FFFD, as with TextEncoder
      bytes[i] = c;
    }
    return piece.length;
  }

  private heapDown(i: number, key: number): void {
    const heap = this.heap;
    for (;;) {
      let child = 2 * i + 1;
      if (child >= this.heapSize) break;
      if (child + 1 < this.heapSize && heap[child + 1]! < heap[child]!) child++;
      const below = heap[child]!;
      if (below >= key) break;
      heap[i] = below;
      i = child;
    }
    heap[i] = key;
  }

  private heapPush(key: number): void {
    const heap = this.heap;
    let i = this.heapSize++;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      const above = heap[parent]!;
      if (above <= key) break;
      heap[i] = above;
      i = parent;
    }
    heap[i] = key;
  }

  /** Looks up the pair that starts at part i and queues it when it is a token. */
  private rankPair(n: number, i: number): void {
    const j = this.next[i]!;
    if (j >= n) {
      this.pairToken[i] = -1;
      return;
    }
    const k = this.next[j]!;
    let t = -1;
    let hash = 0;
    if (k - i <= this.vocab.maxLength) {
      hash = (Math.imul(this.partHash[i]!, this.vocab.powers[k - j]!) + this.partHash[j]!) | 0;
      t = this.vocab.find(this.pieceBytes, i, k, hash);
    }
    this.pairToken[i] = t;
    this.pairHash[i] = hash;
    if (t >= 0) this.heapPush((t << POSITION_BITS) | i);
  }

  /**
   * Pushes the tokens of pieceBytes[0..n) to `out`: tiktoken's merges (lowest rank first, leftmost among
   * equals), found with a heap of the pairs' ranks (stale entries are skipped when popped), not a rescan per merge.
   */
  private bytePairEncode(n: number, out: number[]): void {
    if (this.next.length < n + 1) {
      const capacity = 2 * (n + 1);
      this.next = new Int32Array(capacity);
      this.prev = new Int32Array(capacity);
      this.partToken = new Int32Array(capacity);
      this.partHash = new Int32Array(capacity);
      this.pairToken = new Int32Array(capacity);
      this.pairHash = new Int32Array(capacity);
      this.heap = new Int32Array(3 * capacity); // n - 1 pairs at first, at most 2 more a merge
    }
    const { vocab, pieceBytes, next, prev, partToken, partHash, pairToken, pairHash, heap } = this;
    this.heapSize = 0;
    for (let i = 0; i < n; i++) {
      const b = pieceBytes[i]!;
      next[i] = i + 1;
      prev[i] = i - 1;
      partToken[i] = vocab.byteToken[b]!;
      partHash[i] = b;
      pairToken[i] = -1;
      if (i + 1 === n) continue;
      // Two bytes: from a table, not the hash table.
      const t = vocab.pairToken[(b << 8) | pieceBytes[i + 1]!]!;
      pairToken[i] = t;
      pairHash[i] = (Math.imul(b, HASH_BASE) + pieceBytes[i + 1]!) | 0;
      if (t >= 0) heap[this.heapSize++] = (t << POSITION_BITS) | i;
    }
    for (let i = (this.heapSize >> 1) - 1; i >= 0; i--) this.heapDown(i, heap[i]!);
    while (this.heapSize > 0) {
      const key = heap[0]!;
      this.heapSize--;
      if (this.heapSize > 0) this.heapDown(0, heap[this.heapSize]!);
      const t = key >> POSITION_BITS;
      const i = key & POSITION_MASK;
      if (pairToken[i] !== t) continue; // stale: the pair was merged or changed since
      const j = next[i]!;
      const k = next[j]!;
      next[i] = k;
      if (k < n) prev[k] = i;
      pairToken[j] = -1; // part j is gone: its entries are stale
      partToken[i] = t;
      partHash[i] = pairHash[i]!;
      this.rankPair(n, i);
      if (i > 0) this.rankPair(n, prev[i]!);
    }
    for (let i = 0; i < n; i = next[i]!) out.push(partToken[i]!);
  }
}

/** Characters encoded between two pauses of an async caller (~1 ms of work at most). */
const STEP_CHARS = 4096;

type Steps<T> = Generator<void, T, void>;

/** Runs `steps` to the end at once. */
function finish<T>(steps: Steps<T>): T {
  for (;;) {
    const step = steps.next();
    if (step.done) return step.value;
  }
}

/** Runs `steps` to the end, awaiting `pause` between them. */
async function finishAsync<T>(steps: Steps<T>, pause: Pause): Promise<T> {
  for (;;) {
    const step = steps.next();
    if (step.done) return step.value;
    const paused = pause();
    if (paused) await paused;
  }
}

function counterOf(encoding: EncodingName, bpe: TiktokenBPE): TokenCounter {
  const vocab = new Vocabulary(bpe.bpe_ranks);
  const pieces = new PieceEncoder(vocab);
  // Special-token text (`<|endoftext|>`) in a document is ordinary text, not a control token: it is never
  // looked for, as js-tiktoken does with no special token allowed or disallowed.
  const pattern = new RegExp(bpe.pat_str, 'gu');

  /** The tokens of `text`, in steps of about STEP_CHARS characters (see `encode`). */
  function* encodeSteps(text: string, limit = Infinity): Steps<number[]> {
    const out: number[] = [];
    let sinceStep = 0;
    for (const segment of segmentsOf(text)) {
      // matchAll works on its own copy of `pattern`: no lastIndex shared with a paused caller.
      for (const match of segment.matchAll(pattern)) {
        const piece = match[0];
        if (piece.length <= MAX_PIECE) {
          pieces.encode(piece, out);
        } else {
          for (let from = 0; from < piece.length; ) {
            let to = Math.min(piece.length, from + MAX_RUN);
            if (to < piece.length && splitsPair(piece, to)) to--;
            pieces.encode(piece.slice(from, to), out);
            from = to;
          }
        }
        if (out.length > limit) return out;
        sinceStep += piece.length;
        if (sinceStep >= STEP_CHARS) {
          sinceStep = 0;
          yield;
        }
      }
    }
    return out;
  }

  function* headSteps(text: string, maxTokens: number): Steps<Head> {
    if (maxTokens <= 0) return { text: '', tokens: 0, whole: text === '' };
    const tokens = yield* encodeSteps(text, maxTokens);
    if (tokens.length <= maxTokens) return { text, tokens: tokens.length, whole: true };
    // Decode the first maxTokens tokens; a token ending inside a character decodes to U+FFFD: drop it.
    let keep = maxTokens;
    for (let attempt = 0; attempt < 8 && keep > 0; attempt++) {
      const cut = vocab.decode(tokens, keep).replace(/\uFFFD+$/, '');
      const counted = (yield* encodeSteps(cut)).length;
      if (counted <= maxTokens) return { text: cut, tokens: counted, whole: false };
      keep -= counted - maxTokens;
    }
    return { text: '', tokens: 0, whole: false };
  }

  return {
    encoding,
    encode: (text, limit) => finish(encodeSteps(text, limit)),
    count: (text) => finish(encodeSteps(text)).length,
    head: (text, maxTokens) => finish(headSteps(text, maxTokens)),
    countAsync: async (text, pause) => (await finishAsync(encodeSteps(text), pause)).length,
    headAsync: (text, maxTokens, pause) => finishAsync(headSteps(text, maxTokens), pause),
  };
}
