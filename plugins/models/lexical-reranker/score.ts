/**
 * A lexical relevance score for one (query, passage) pair, needing no weights and no corpus:
 *
 *   score = coverage + PHRASE · phrase + PROXIMITY · proximity            (0 when no query term occurs)
 *
 * - coverage: BM25's term-frequency saturation and length normalisation per query term, weighted by a
 *   term-specificity prior (function words count little), divided by the total weight: in [0, 1].
 *   A prior instead of an idf over "the other passages" keeps a pair's score independent of whatever else
 *   is in its batch, so scores from separate calls (batches, workers) stay comparable.
 * - phrase: the share of the query's adjacent term pairs (bigrams) that occur adjacent and in order in the
 *   passage, plus the whole query as an exact phrase: a passage with the query phrase outranks one with
 *   the same words scattered.
 * - proximity: matched distinct content terms over the width of the smallest passage window holding them
 *   all (1 when they sit side by side).
 *
 * Tokens come from kernel/text's analyzer (NFKC, lower case, Unicode letters, marks and digits), the same
 * terms BM25 text search uses. Work is bounded: the query's first MAX_QUERY_TERMS terms, the passage's
 * first MAX_PASSAGE_TERMS.
 */
import { terms } from '../../../kernel/text/analyzer.js';

export const MAX_QUERY_TERMS = 64;
export const MAX_PASSAGE_TERMS = 4096;

const K1 = 1.2;
const B = 0.75;
/** The passage length BM25's normalisation treats as average (a paragraph). */
const REFERENCE_LENGTH = 60;
const PHRASE = 0.5;
const EXACT_PHRASE = 0.25;
const PROXIMITY = 0.25;
/** Weight of a function word relative to a content word. */
const FUNCTION_WORD_WEIGHT = 0.1;

/** Frequent function words of English, French, German and Spanish: they say little about relevance. */
const FUNCTION_WORDS = new Set(
  (
    'a an and are as at be been but by can did do does for from had has have how i if in into is it its me my no not of on or our ' +
    'so than that the their them then there these they this to up was we were what when where which who why will with you your ' +
    'le la les un une des du de et est en au aux ce ces pour par sur dans qui que il elle ne pas ' +
    'der die das ein eine und ist im in zu mit von den dem des nicht auf für ' +
    'el los las una unos y es del al por con para se lo'
  ).split(' '),
);

export function termWeight(term: string): number {
  return FUNCTION_WORDS.has(term) ? FUNCTION_WORD_WEIGHT : 1;
}

/** Positions of each term in the passage. */
function postings(passage: readonly string[]): Map<string, number[]> {
  const byTerm = new Map<string, number[]>();
  passage.forEach((term, position) => {
    const list = byTerm.get(term);
    if (list) list.push(position);
    else byTerm.set(term, [position]);
  });
  return byTerm;
}

function coverage(query: readonly string[], index: Map<string, number[]>, length: number): number {
  const distinct = [...new Set(query)];
  let total = 0;
  let gained = 0;
  const norm = 1 - B + (B * length) / REFERENCE_LENGTH;
  for (const term of distinct) {
    const weight = termWeight(term);
    total += weight;
    const tf = index.get(term)?.length ?? 0;
    // Saturated term frequency in [0, 1): BM25's tf part divided by its limit k1 + 1.
    if (tf > 0) gained += (weight * tf) / (tf + K1 * norm);
  }
  return total > 0 ? gained / total : 0;
}

/** Share of the query's bigrams found adjacent in order, and whether the whole query occurs as a phrase. */
function phrase(query: readonly string[], passage: readonly string[], index: Map<string, number[]>): { bigrams: number; exact: boolean } {
  if (query.length < 2) return { bigrams: 0, exact: false };
  let found = 0;
  const sets = new Map<string, Set<number>>();
  const positionsOf = (term: string): Set<number> => {
    let set = sets.get(term);
    if (!set) sets.set(term, (set = new Set(index.get(term) ?? [])));
    return set;
  };
  for (let i = 0; i + 1 < query.length; i++) {
    // Set lookups keep a repetitive passage and query linear (no positions × positions scan).
    const next = positionsOf(query[i + 1]!);
    if (next.size > 0 && (index.get(query[i]!) ?? []).some((p) => next.has(p + 1))) found++;
  }
  const bigrams = found / (query.length - 1);
  let exact = false;
  if (found === query.length - 1) {
    for (const start of index.get(query[0]!) ?? []) {
      if (query.every((term, k) => passage[start + k] === term)) {
        exact = true;
        break;
      }
    }
  }
  return { bigrams, exact };
}

/** Matched distinct content terms / the width of the smallest window containing each of them. */
function proximity(query: readonly string[], index: Map<string, number[]>): number {
  const wanted = [...new Set(query)].filter((t) => termWeight(t) === 1 && index.has(t));
  if (wanted.length < 2) return 0;
  // Merge the positions, then slide a window over them (minimum window covering all terms).
  const events = wanted.flatMap((term, k) => index.get(term)!.map((position) => ({ position, k }))).sort((a, b) => a.position - b.position);
  const counts = new Array<number>(wanted.length).fill(0);
  let covered = 0;
  let best = Infinity;
  let left = 0;
  for (const event of events) {
    if (counts[event.k]!++ === 0) covered++;
    while (covered === wanted.length) {
      const first = events[left]!;
      best = Math.min(best, event.position - first.position + 1);
      if (--counts[first.k]! === 0) covered--;
      left++;
    }
  }
  return Number.isFinite(best) ? wanted.length / best : 0;
}

/** The relevance of `passageText` to `queryText` (≥ 0, higher is more relevant; 0 when nothing matches). */
export function lexicalScore(queryText: string, passageText: string): number {
  const query = terms(queryText, MAX_QUERY_TERMS);
  const passage = terms(passageText, MAX_PASSAGE_TERMS);
  if (query.length === 0 || passage.length === 0) return 0;
  const index = postings(passage);
  const base = coverage(query, index, passage.length);
  if (base === 0) return 0;
  const { bigrams, exact } = phrase(query, passage, index);
  const score = base + PHRASE * bigrams + (exact ? EXACT_PHRASE : 0) + PROXIMITY * proximity(query, index);
  // Rounded so the score is the same on every platform and through float32 on the wire.
  return Math.round(score * 1e6) / 1e6;
}
