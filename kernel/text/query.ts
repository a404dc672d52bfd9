/**
 * The text query language: `word` (any of the words, BM25 summed), `"a phrase"` (the words adjacent, in
 * order), `pre*` (every indexed term starting with `pre`), and `+clause` (must match) / `-clause` (must
 * not match) in front of any of them. A word the analyzer splits (`e-mail`) is a phrase of its parts.
 * Queries are bounded so no input can stall the index: see the limits below.
 */
import { InputError } from '../errors.js';
import { terms } from './analyzer.js';

/** A longer query is refused (a query is a few words, not a document). */
export const MAX_QUERY_CHARS = 4096;
/** Clauses past this many (after removing repeats) are ignored. */
export const MAX_CLAUSES = 32;
/** Words of a phrase past this many are ignored. */
export const MAX_PHRASE_TERMS = 16;

export type Occur = 'should' | 'must' | 'must_not';

export type Clause =
  | { kind: 'term'; occur: Occur; term: string }
  | { kind: 'prefix'; occur: Occur; prefix: string }
  | { kind: 'phrase'; occur: Occur; terms: string[] };

export function parseQuery(query: string): Clause[] {
  if (query.length > MAX_QUERY_CHARS) {
    throw new InputError(`a text query is at most ${MAX_QUERY_CHARS} characters, got ${query.length}`, { max_chars: MAX_QUERY_CHARS });
  }
  const clauses = new Map<string, Clause>();
  const add = (clause: Clause) => {
    if (clauses.size >= MAX_CLAUSES) return;
    const key = `${clause.kind}:${clause.kind === 'term' ? clause.term : clause.kind === 'prefix' ? clause.prefix : clause.terms.join(' ')}`;
    const seen = clauses.get(key);
    // The strictest occurrence wins when a clause repeats (`a +a` means +a).
    if (!seen || rank(clause.occur) > rank(seen.occur)) clauses.set(key, clause);
  };
  let i = 0;
  while (i < query.length && clauses.size < MAX_CLAUSES) {
    while (i < query.length && /\s/u.test(query[i]!)) i++;
    if (i >= query.length) break;
    let occur: Occur = 'should';
    if ((query[i] === '+' || query[i] === '-') && i + 1 < query.length && !/\s/u.test(query[i + 1]!)) {
      occur = query[i] === '+' ? 'must' : 'must_not';
      i++;
    }
    if (query[i] === '"') {
      const end = query.indexOf('"', i + 1);
      const body = query.slice(i + 1, end === -1 ? query.length : end);
      i = end === -1 ? query.length : end + 1;
      phraseOrTerm(terms(body, MAX_PHRASE_TERMS), occur, add);
      continue;
    }
    let end = i;
    while (end < query.length && !/\s/u.test(query[end]!)) end++;
    const word = query.slice(i, end);
    i = end;
    if (word.endsWith('*')) {
      const parts = terms(word.replace(/\*+$/u, ''), MAX_PHRASE_TERMS);
      const prefix = parts.pop();
      for (const term of parts) add({ kind: 'term', occur, term });
      if (prefix) add({ kind: 'prefix', occur, prefix });
      continue;
    }
    phraseOrTerm(terms(word, MAX_PHRASE_TERMS), occur, add);
  }
  return [...clauses.values()];
}

function phraseOrTerm(words: string[], occur: Occur, add: (c: Clause) => void): void {
  if (words.length === 1) add({ kind: 'term', occur, term: words[0]! });
  else if (words.length > 1) add({ kind: 'phrase', occur, terms: words });
}

function rank(occur: Occur): number {
  return occur === 'should' ? 0 : occur === 'must' ? 1 : 2;
}
