/** The analyzer, the query language and the BM25 formula, without a database. */
import { describe, expect, it } from 'vitest';
import { analyzeField, idf, parseQuery, termScore, terms, MAX_CLAUSES, MAX_QUERY_CHARS, MAX_TERM_LENGTH } from '../../../kernel/text/index.js';

describe('analyzer', () => {
  it('lower-cases Unicode text and splits on what is not a letter, mark or digit', () => {
    expect(terms('Café-au-lait, ÉCOLE 42; naïve—Straße 北京 x2')).toEqual(['café', 'au', 'lait', 'école', '42', 'naïve', 'straße', '北京', 'x2']);
    // NFKC: the ligature and full-width digits fold to plain letters and digits.
    expect(terms('ﬁne １２３')).toEqual(['fine', '123']);
  });

  it('records term frequencies, positions and the field length', () => {
    const field = analyzeField('the cat saw the dog');
    expect(field.length).toBe(5);
    expect(field.terms.get('the')).toEqual([0, 3]);
    expect(field.terms.get('dog')).toEqual([4]);
  });

  it('cuts overlong terms', () => {
    expect(terms('x'.repeat(500))[0]).toHaveLength(MAX_TERM_LENGTH);
  });
});

describe('query language', () => {
  it('parses terms, phrases, prefixes, must and must-not', () => {
    expect(parseQuery('Quick "brown  FOX" jum* +dog -"lazy cat" -cow e-mail')).toEqual([
      { kind: 'term', occur: 'should', term: 'quick' },
      { kind: 'phrase', occur: 'should', terms: ['brown', 'fox'] },
      { kind: 'prefix', occur: 'should', prefix: 'jum' },
      { kind: 'term', occur: 'must', term: 'dog' },
      { kind: 'phrase', occur: 'must_not', terms: ['lazy', 'cat'] },
      { kind: 'term', occur: 'must_not', term: 'cow' },
      { kind: 'phrase', occur: 'should', terms: ['e', 'mail'] },
    ]);
    expect(parseQuery('"unclosed phrase')).toEqual([{ kind: 'phrase', occur: 'should', terms: ['unclosed', 'phrase'] }]);
    expect(parseQuery(' *** - + "" ')).toEqual([]);
    expect(parseQuery('a a +a')).toEqual([{ kind: 'term', occur: 'must', term: 'a' }]);
  });

  it('bounds hostile queries', () => {
    expect(() => parseQuery('a'.repeat(MAX_QUERY_CHARS + 1))).toThrow(/at most 4096 characters/);
    const many = Array.from({ length: 800 }, (_, i) => `w${i}`).join(' ');
    expect(parseQuery(many)).toHaveLength(MAX_CLAUSES);
  });
});

describe('BM25', () => {
  it('matches a hand-computed example', () => {
    // N = 3 documents, df("quick") = 2: idf = ln(1 + (3 − 2 + 0.5) / (2 + 0.5)) = ln(1.6) = 0.470003629…
    expect(idf(3, 2)).toBeCloseTo(Math.log(1.6), 12);
    // tf = 1, |D| = 4, avgdl = 5, k1 = 1.2, b = 0.75:
    // 0.470003629 · 1 · 2.2 / (1 + 1.2 · (0.25 + 0.75 · 4/5)) = 0.470003629 · 2.2 / 2.02 = 0.511885…
    expect(termScore({ k1: 1.2, b: 0.75 }, idf(3, 2), 1, 4, 5)).toBeCloseTo(0.5118851407626823, 12);
    // b = 0 ignores length; k1 = 0 makes every occurrence count as one.
    expect(termScore({ k1: 1.2, b: 0 }, 1, 3, 100, 5)).toBeCloseTo((3 * 2.2) / (3 + 1.2), 12);
    expect(termScore({ k1: 0, b: 0.75 }, 2, 7, 4, 5)).toBeCloseTo(2, 12);
  });
});
