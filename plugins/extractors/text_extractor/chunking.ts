/**
 * Chunking for text_extractor, without a library: the text is cut into units (characters, words,
 * sentences or paragraphs), each a span of the original string, and consecutive units are grouped into
 * overlapping windows. Because every chunk is `text.slice(start, end)` of the original, offsets always
 * reproduce the chunk exactly and nothing between two units inside a chunk is lost or rewritten.
 *
 * Offsets are JavaScript string indices (UTF-16 code units), so `text.slice(char_start, char_end)` is
 * the chunk in any JS consumer. Units never split a surrogate pair or a base character from its
 * combining marks.
 *
 * Intl.Segmenter is used only on short pieces: V8's segment iterator gets quadratic on long strings
 * (minutes for a couple of megabytes), so everything that runs over the whole text is a linear regex.
 */

export type SplitBy = 'characters' | 'words' | 'sentences' | 'paragraphs';

/** A half-open range `[start, end)` of the original text. */
export interface Span {
  start: number;
  end: number;
}

export interface Chunk extends Span {
  text: string;
  /** How many units (of the split kind) the chunk holds. */
  units: number;
}

// ----------------------------------------------------------------------------------------------- characters

/**
 * An approximate grapheme cluster: a code point with its combining marks, joined by ZWJ to the next such
 * cluster (emoji sequences), and CRLF as one. Good enough to never cut an accent or an emoji in half.
 */
const GRAPHEME = /\r\n|\P{M}\p{M}*(?:\u200D\P{M}\p{M}*)*|\p{M}+/gsu;

export function characterSpans(text: string): Span[] {
  const spans: Span[] = [];
  for (const m of text.matchAll(GRAPHEME)) spans.push({ start: m.index, end: m.index + m[0].length });
  return spans;
}

// ----------------------------------------------------------------------------------------------- words

/** Scripts written without spaces between words: whitespace alone would make a whole sentence one "word". */
const NO_SPACE_SCRIPT = /[\p{Script=Han}\p{Script=Hiragana}\p{Script=Katakana}\p{Script=Thai}\p{Script=Lao}\p{Script=Khmer}\p{Script=Myanmar}]/u;
/** Longest piece handed to Intl.Segmenter at once (see the file comment on its cost). */
const SEGMENTER_WINDOW = 1024;

let sharedWordSegmenter: Intl.Segmenter | undefined;

/**
 * One segmenter for every call: making one costs more than chunking a short text does, and `segment()`
 * keeps no state between calls.
 */
function wordSegmenter(): Intl.Segmenter {
  // 'und' (no particular locale): ICU's dictionary-based breaking covers CJK and Thai regardless.
  return (sharedWordSegmenter ??= new Intl.Segmenter('und', { granularity: 'word' }));
}

/**
 * Splits one whitespace-free token of a no-space script into words. Punctuation attaches to the word before
 * it (leading punctuation to the word after it), so a unit boundary never leaves a comma on its own.
 */
function segmentToken(token: string, offset: number, segmenter: Intl.Segmenter, out: Span[]): void {
  let current: Span | undefined;
  let hasWord = false;
  for (let windowStart = 0; windowStart < token.length; ) {
    let windowEnd = Math.min(token.length, windowStart + SEGMENTER_WINDOW);
    // Never cut a surrogate pair at the window edge.
    if (windowEnd < token.length && /[\uD800-\uDBFF]/.test(token[windowEnd - 1]!)) windowEnd -= 1;
    for (const segment of segmenter.segment(token.slice(windowStart, windowEnd))) {
      const start = offset + windowStart + segment.index;
      const end = start + segment.segment.length;
      if (current && (!segment.isWordLike || !hasWord)) {
        current.end = end;
        hasWord ||= segment.isWordLike === true;
        continue;
      }
      if (current) out.push(current);
      current = { start, end };
      hasWord = segment.isWordLike === true;
    }
    windowStart = windowEnd;
  }
  if (current) out.push(current);
}

/** Whitespace-separated words; tokens in scripts without spaces are split further into dictionary words. */
export function wordSpans(text: string, segmenter: Intl.Segmenter = wordSegmenter()): Span[] {
  const spans: Span[] = [];
  for (const m of text.matchAll(/\S+/gu)) {
    if (NO_SPACE_SCRIPT.test(m[0])) segmentToken(m[0], m.index, segmenter, spans);
    else spans.push({ start: m.index, end: m.index + m[0].length });
  }
  return spans;
}

export function countWords(text: string, segmenter?: Intl.Segmenter): number {
  return wordSpans(text, segmenter).length;
}

// ----------------------------------------------------------------------------------------------- sentences

/**
 * Words that end in a period without ending the sentence (lower-cased, without the final period).
 * Single letters (initials, "J. R. R. Tolkien") are handled separately.
 */
const ABBREVIATIONS = new Set([
  'mr', 'mrs', 'ms', 'mx', 'dr', 'prof', 'sr', 'jr', 'st', 'mt', 'ft', 'rev', 'hon', 'gen', 'col', 'capt', 'lt', 'sgt', 'gov', 'pres',
  'vs', 'etc', 'e.g', 'i.e', 'cf', 'al', 'approx', 'ca', 'viz', 'resp', 'incl', 'dept', 'est', 'misc',
  'inc', 'ltd', 'co', 'corp', 'llc', 'bros',
  'no', 'nos', 'vol', 'vols', 'fig', 'figs', 'eq', 'eqs', 'p', 'pp', 'ch', 'sec', 'art', 'ed', 'eds',
  'jan', 'feb', 'mar', 'apr', 'jun', 'jul', 'aug', 'sep', 'sept', 'oct', 'nov', 'dec',
  'mon', 'tue', 'tues', 'wed', 'thu', 'thur', 'thurs', 'fri', 'sat', 'sun',
  'a.m', 'p.m', 'u.s', 'u.k', 'u.s.a', 'ph.d', 'b.a', 'm.a', 'b.sc', 'm.sc',
  'z.b', 'bzw', 'usw', 'ggf', 'mme', 'mlle',
]);

/** Sentence-ending punctuation: ASCII, the ellipsis character, and the fullwidth/CJK forms. */
const TERMINATOR = /[.!?\u2026\u3002\uFF01\uFF1F\uFF0E\u203C\u2047-\u2049]/u;
/** Marks that end with the sentence they close: quotes and brackets. */
const CLOSER = /["'\u2019\u201D\u00BB\u203A)\]}\u300D\u300F\u3011\uFF09]/u;
/** Terminators after which no space is needed (CJK text runs on without one). */
const WIDE_TERMINATOR = /[\u3002\uFF01\uFF1F]/u;

/** The word just before `dotIndex` (letters, digits and inner periods), lower-cased. */
function wordBefore(text: string, dotIndex: number): string {
  let i = dotIndex;
  while (i > 0 && /[\p{L}\p{N}.]/u.test(text[i - 1]!)) i -= 1;
  return text.slice(i, dotIndex).toLowerCase();
}

/** Whether the run of terminators `text[runStart, runEnd)` ends a sentence, given what follows it. */
function endsSentence(text: string, runStart: number, runEnd: number, after: number): boolean {
  const run = text.slice(runStart, runEnd);
  if (after >= text.length) return true;
  if (WIDE_TERMINATOR.test(run[run.length - 1]!)) return true;
  // Western terminators need whitespace after them: "3.14", "example.com", "?!?" inside a token never end one.
  if (!/\s/u.test(text[after]!)) return false;
  let next = after;
  while (next < text.length && /\s/u.test(text[next]!)) next += 1;
  if (next >= text.length) return true;
  // A paragraph break always ends the sentence.
  if (/\n[^\S\n]*\n/u.test(text.slice(after, next))) return true;
  // "e.g. something", "... and then": a lower-case continuation means the sentence goes on.
  if (/\p{Ll}/u.test(text[next]!)) return false;
  if (run === '.') {
    const word = wordBefore(text, runStart);
    if (ABBREVIATIONS.has(word)) return false;
    // Initials: a single letter before the period ("J. Smith").
    if (/^\p{L}$/u.test(word)) return false;
  }
  return true;
}

/** Sentences, each from its first non-space character to its last terminator/closing quote. */
export function sentenceSpans(text: string): Span[] {
  const spans: Span[] = [];
  let start = -1;
  const push = (end: number) => {
    if (start < 0) return;
    let e = end;
    while (e > start && /\s/u.test(text[e - 1]!)) e -= 1;
    if (e > start) spans.push({ start, end: e });
    start = -1;
  };
  let i = 0;
  while (i < text.length) {
    const ch = text[i]!;
    if (start < 0) {
      if (!/\s/u.test(ch)) start = i;
      i += 1;
      continue;
    }
    // A blank line ends the sentence even without punctuation (headings, list items).
    if (ch === '\n') {
      let j = i + 1;
      while (j < text.length && /[^\S\n]/u.test(text[j]!)) j += 1;
      if (text[j] === '\n') {
        push(i);
        i = j + 1;
        continue;
      }
    }
    if (TERMINATOR.test(ch)) {
      let runEnd = i + 1;
      while (runEnd < text.length && TERMINATOR.test(text[runEnd]!)) runEnd += 1;
      let after = runEnd;
      while (after < text.length && CLOSER.test(text[after]!)) after += 1;
      if (endsSentence(text, i, runEnd, after)) {
        push(after);
        i = after;
        continue;
      }
      i = runEnd;
      continue;
    }
    i += 1;
  }
  push(text.length);
  return spans;
}

// ----------------------------------------------------------------------------------------------- paragraphs

/** Paragraphs: text between blank lines (a line break with only spaces or tabs before the next one). */
export function paragraphSpans(text: string): Span[] {
  const spans: Span[] = [];
  let from = 0;
  const pushTrimmed = (start: number, end: number) => {
    let s = start;
    let e = end;
    while (s < e && /\s/u.test(text[s]!)) s += 1;
    while (e > s && /\s/u.test(text[e - 1]!)) e -= 1;
    if (e > s) spans.push({ start: s, end: e });
  };
  for (const m of text.matchAll(/\r?\n(?:[^\S\r\n]*\r?\n)+/gu)) {
    pushTrimmed(from, m.index);
    from = m.index + m[0].length;
  }
  pushTrimmed(from, text.length);
  return spans;
}

// ----------------------------------------------------------------------------------------------- windows

export function unitSpans(text: string, splitBy: SplitBy): Span[] {
  switch (splitBy) {
    case 'characters':
      return characterSpans(text);
    case 'words':
      return wordSpans(text);
    case 'sentences':
      return sentenceSpans(text);
    case 'paragraphs':
      return paragraphSpans(text);
  }
}

/**
 * Groups units into windows of `size` units, each starting `size - overlap` units after the previous one.
 * The last window ends at the last unit; no window consists only of units the previous one already had.
 */
export function windows(units: readonly Span[], size: number, overlap: number): Array<{ first: number; last: number }> {
  if (!Number.isInteger(size) || size < 1) throw new RangeError(`chunk size must be a positive integer, got ${size}`);
  if (!Number.isInteger(overlap) || overlap < 0 || overlap >= size) {
    throw new RangeError(`chunk overlap must be an integer in [0, ${size - 1}], got ${overlap}`);
  }
  const out: Array<{ first: number; last: number }> = [];
  const step = size - overlap;
  for (let first = 0; first < units.length; first += step) {
    const last = Math.min(first + size, units.length) - 1;
    out.push({ first, last });
    if (last === units.length - 1) break;
  }
  return out;
}

export interface ChunkOptions {
  splitBy: SplitBy;
  size: number;
  overlap: number;
  /** Chunks with fewer non-whitespace characters than this are dropped (at least whitespace-only ones are). */
  minChars: number;
}

/** Whether `text` has at least `min` non-whitespace code points (stops counting once it has). */
function hasVisibleChars(text: string, min: number): boolean {
  let count = 0;
  const visible = /\S/gu;
  while (visible.exec(text) !== null) {
    count += 1;
    if (count >= min) return true;
  }
  return false;
}

/** Splits `text` into chunks; each is the exact slice of the original text from its first unit to its last. */
export function chunkText(text: string, options: ChunkOptions): Chunk[] {
  const units = unitSpans(text, options.splitBy);
  const minChars = Math.max(1, options.minChars);
  const chunks: Chunk[] = [];
  for (const { first, last } of windows(units, options.size, options.overlap)) {
    const start = units[first]!.start;
    const end = units[last]!.end;
    const slice = text.slice(start, end);
    if (!hasVisibleChars(slice, minChars)) continue;
    chunks.push({ start, end, text: slice, units: last - first + 1 });
  }
  return chunks;
}
