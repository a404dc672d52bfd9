import { describe, expect, it } from 'vitest';
import stage from '../../../plugins/stages/mmr/index.js';
import { CONTRACT_FEATURE_URI, runStageContract } from '../../support/stage-contract.js';
import { doc, FAKE_FEATURE_URI, ids, vectorStageContext } from '../../support/vector-stage-context.js';

runStageContract(stage, {
  valid: [{ feature_uri: CONTRACT_FEATURE_URI, top_k: 5 }, { feature_uri: CONTRACT_FEATURE_URI, lambda: 0, top_k: 1, max_candidates: 2000 }, { feature_uri: CONTRACT_FEATURE_URI, lambda: 1 }],
  invalid: [{}, { lambda: 0.5 }, { feature_uri: 'text_embedding' }, { feature_uri: CONTRACT_FEATURE_URI, lambda: 1.5 }, { feature_uri: CONTRACT_FEATURE_URI, lambda: -0.1 },
    { feature_uri: CONTRACT_FEATURE_URI, top_k: 0 }, { feature_uri: CONTRACT_FEATURE_URI, max_candidates: 2001 }, { feature_uri: CONTRACT_FEATURE_URI, extra: 1 }],
});

describe('mmr edge cases', () => {
  // a and b point almost the same way; c is orthogonal to both; d is between a and c.
  const vectors = { a: [1, 0], b: [0.99, 0.141], c: [0, 1], d: [0.7071, 0.7071] };
  const input = () => [doc('a', 1), doc('b', 0.9), doc('c', 0.5), doc('d', 0.3)];
  const run = (params: Record<string, unknown>, docs = input(), v: Record<string, number[]> = vectors) =>
    stage.run(vectorStageContext(v), docs, { feature_uri: FAKE_FEATURE_URI, ...params });

  it('passes over a near-duplicate of a pick for a different document (hand-computed)', async () => {
    // relevance a 1, b 6/7, c 2/7, d 0. After a: b 0.5·6/7 − 0.5·0.99 ≈ −0.066, c 0.5·2/7 − 0 ≈ 0.143, d 0 − 0.5·0.707 ≈ −0.354.
    const out = await run({ lambda: 0.5, top_k: 2 });
    expect(ids(out)).toEqual(['a', 'c']);
    expect(out[0]!.payload!.mmr_score).toBeCloseTo(0.5, 6);
    expect(out[1]!.payload!.mmr_score).toBeCloseTo(1 / 7, 3);
    // scores stay what they were
    expect(out.map((d) => d.score)).toEqual([1, 0.5]);
  });

  it('lambda 1 keeps the incoming relevance order; lambda 0 follows diversity only', async () => {
    expect(ids(await run({ lambda: 1, top_k: 4 }))).toEqual(['a', 'b', 'c', 'd']);
    // lambda 0: the first pick is the best ranked (no penalty yet, ties to rank); then least similar to the picks
    expect(ids(await run({ lambda: 0, top_k: 3 }))).toEqual(['a', 'c', 'd']);
  });

  it('without scores every relevance is 1: the first document leads, diversity orders the rest', async () => {
    const docs = [doc('b'), doc('a'), doc('d'), doc('c')];
    expect(ids(await run({ lambda: 0.5, top_k: 4 }, docs))).toEqual(['b', 'c', 'd', 'a']);
  });

  it('puts documents without a vector after the picked ones, in incoming order, while top_k has room', async () => {
    const docs = [doc('x', 2), doc('a', 1), doc('y', 1.5), doc('c', 0.5)];
    expect(ids(await run({ top_k: 3 }, docs))).toEqual(['a', 'c', 'x']);
    expect(ids(await run({ top_k: 10 }, docs))).toEqual(['a', 'c', 'x', 'y']);
    const vectorless = await run({ top_k: 2 }, [doc('x', 1), doc('y', 2)]);
    expect(ids(vectorless)).toEqual(['x', 'y']);
  });

  it('considers only the first max_candidates documents, and reads only their vectors', async () => {
    const ctx = vectorStageContext(vectors);
    const out = await stage.run(ctx, input(), { feature_uri: FAKE_FEATURE_URI, top_k: 10, max_candidates: 2 });
    expect(ids(out)).toEqual(['a', 'b']);
    expect(ctx.reads.flatMap((r) => r.documentIds)).toEqual(['a', 'b']);
  });

  it('refuses a feature the collections do not index, naming it', async () => {
    await expect(stage.run(vectorStageContext(vectors), input(), { feature_uri: 'tessera://other@1.0/x' })).rejects.toThrow(/tessera:\/\/other@1.0\/x/);
  });

  it('runs on a large input without holding the event loop in one piece', async () => {
    const n = 1500;
    const big = Object.fromEntries(Array.from({ length: n }, (_, i) => [`d${i}`, Array.from({ length: 64 }, (_, j) => Math.sin(i * 0.1 + j))]));
    let ticks = 0;
    const timer = setInterval(() => (ticks += 1), 0);
    const out = await run({ top_k: 200, max_candidates: 2000 }, Array.from({ length: n }, (_, i) => doc(`d${i}`, n - i)), big);
    clearInterval(timer);
    expect(out).toHaveLength(200);
    expect(new Set(ids(out)).size).toBe(200);
    expect(ticks).toBeGreaterThan(0);
  });
});
