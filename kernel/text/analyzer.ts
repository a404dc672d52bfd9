/**
 * The text analyzer the text index and its queries share: a document and a query become terms the
 * same way, or nothing would match. Unicode-aware: text is NFKC-normalized and lower-cased, then split on
 * anything that is not a letter, a combining mark or a digit (so "Café-au-lait" gives café, au, lait and
 * "北京" stays one term). No stemming: no maintained stemmer ships in this project's packages, and a
 * home-made one would be worse than none ("running" does not match "run"; `run*` does).
 */

/** A term longer than this is cut (a pasted hash or base64 blob must not make huge index keys). */
export const MAX_TERM_LENGTH = 64;
/** Terms past this position in one field are not indexed (bounds the work per document). */
export const MAX_TERMS_PER_FIELD = 20_000;

const WORD = /[\p{L}\p{M}\p{N}]+/gu;

export interface Token {
  term: string;
  /** Index of the term in its field, from 0 (phrase queries compare positions). */
  position: number;
}

export function normalize(text: string): string {
  return text.normalize('NFKC').toLowerCase();
}

/** Terms of a text with their positions, at most `limit` of them. */
export function tokenize(text: string, limit = MAX_TERMS_PER_FIELD): Token[] {
  const tokens: Token[] = [];
  for (const match of normalize(text).matchAll(WORD)) {
    if (tokens.length >= limit) break;
    tokens.push({ term: cutTerm(match[0]), position: tokens.length });
  }
  return tokens;
}

/** Just the terms (queries). */
export function terms(text: string, limit = MAX_TERMS_PER_FIELD): string[] {
  return tokenize(text, limit).map((t) => t.term);
}

function cutTerm(term: string): string {
  if (term.length <= MAX_TERM_LENGTH) return term;
  // Cut on a code point boundary.
  return Array.from(term).slice(0, MAX_TERM_LENGTH).join('').slice(0, MAX_TERM_LENGTH * 2);
}

/** Per term: how often it occurs and where (what one field of one document contributes to the index). */
export interface FieldPostings {
  /** Number of indexed terms in the field (BM25's document length). */
  length: number;
  terms: Map<string, number[]>;
}

export function analyzeField(text: string): FieldPostings {
  const tokens = tokenize(text);
  const byTerm = new Map<string, number[]>();
  for (const { term, position } of tokens) {
    const positions = byTerm.get(term);
    if (positions) positions.push(position);
    else byTerm.set(term, [position]);
  }
  return { length: tokens.length, terms: byTerm };
}
