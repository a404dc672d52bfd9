import { describe, expect, it } from 'vitest';
import { fuse } from '../../../plugins/stages/feature_search/fusion.js';

const lists = [
  { weight: 1, hits: [{ id: 'a', score: 0.9 }, { id: 'b', score: 0.5 }, { id: 'c', score: 0.1 }] },
  { weight: 2, hits: [{ id: 'c', score: 0.8 }, { id: 'a', score: 0.4 }] },
];

describe('feature_search fusion (hand-computed)', () => {
  it('rrf: Σ weight / (k + rank)', () => {
    const out = fuse(lists, 'rrf', 60);
    expect(out.map((h) => h.id)).toEqual(['c', 'a', 'b']);
    expect(out[0]!.score).toBeCloseTo(1 / 63 + 2 / 61, 12);
    expect(out[1]!.score).toBeCloseTo(1 / 61 + 2 / 62, 12);
    expect(out[2]!.score).toBeCloseTo(1 / 62, 12);
  });

  it('weighted: Σ weight × score; max: the best weight × score', () => {
    const weighted = fuse(lists, 'weighted').map((h) => [h.id, Math.round(h.score * 1e9) / 1e9]);
    // c: 0.1 + 2 × 0.8 = 1.7 ties a: 0.9 + 2 × 0.4 = 1.7 (ties go by id); b: 0.5.
    expect(weighted).toEqual([['a', 1.7], ['c', 1.7], ['b', 0.5]]);
    expect(fuse(lists, 'max').map((h) => [h.id, h.score])).toEqual([['c', 1.6], ['a', 0.9], ['b', 0.5]]);
  });

  it('dbsf: scores scaled by mean ± 3σ of their list', () => {
    const scores = [0.9, 0.5, 0.1];
    const mean = 0.5;
    const sd = Math.sqrt(scores.reduce((s, x) => s + (x - mean) ** 2, 0) / 3);
    const scale = (x: number) => (x - (mean - 3 * sd)) / (6 * sd);
    const second = [0.8, 0.4];
    const m2 = 0.6;
    const sd2 = 0.2;
    const scale2 = (x: number) => (x - (m2 - 3 * sd2)) / (6 * sd2);
    const out = Object.fromEntries(fuse(lists, 'dbsf').map((h) => [h.id, h.score]));
    expect(out.a).toBeCloseTo(scale(0.9) + 2 * scale2(0.4), 12);
    expect(out.b).toBeCloseTo(scale(0.5), 12);
    expect(out.c).toBeCloseTo(scale(0.1) + 2 * scale2(0.8), 12);
  });

  it('breaks ties by document id', () => {
    expect(fuse([{ weight: 1, hits: [{ id: 'b', score: 1 }, { id: 'a', score: 1 }] }], 'weighted').map((h) => h.id)).toEqual(['a', 'b']);
  });
});
