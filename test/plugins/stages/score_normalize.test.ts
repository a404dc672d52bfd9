import { describe, expect, it } from 'vitest';
import stage from '../../../plugins/stages/score_normalize/index.js';
import type { StageContext, StageDocument } from '../../../kernel/plugins.js';
import { runStageContract } from '../../support/stage-contract.js';

runStageContract(stage, {
  valid: [{ method: 'min_max' }, {}, { method: 'z_score' }, { method: 'softmax', temperature: 0.5 }, { method: 'l2' }],
  invalid: [{ method: 'max' }, { method: 'softmax', temperature: 0 }, { method: 'l2', scale: 2 }],
});

describe('score_normalize edge cases', () => {
  const ctx = {} as StageContext;
  const docs = (...scores: (number | undefined)[]): StageDocument[] =>
    scores.map((score, i) => (score === undefined ? { document_id: `d${i}` } : { document_id: `d${i}`, score }));
  const scores = async (method: 'min_max' | 'z_score' | 'softmax' | 'l2', input: StageDocument[], temperature?: number) =>
    (await stage.run(ctx, input, temperature === undefined ? { method } : { method, temperature })).map((d) => d.score);

  it('computes each method', async () => {
    expect(await scores('min_max', docs(2, 4, 3))).toEqual([0, 1, 0.5]);
    const z = (await scores('z_score', docs(1, 2, 3))) as number[];
    expect(z[0]).toBeCloseTo(-Math.sqrt(1.5));
    expect(z[1]).toBe(0);
    expect(z[2]).toBeCloseTo(Math.sqrt(1.5));
    const soft = (await scores('softmax', docs(1, 2))) as number[];
    expect(soft[1]! / soft[0]!).toBeCloseTo(Math.E);
    expect(soft[0]! + soft[1]!).toBeCloseTo(1);
    const sharp = (await scores('softmax', docs(1, 2), 0.5)) as number[];
    expect(sharp[1]! / sharp[0]!).toBeCloseTo(Math.E ** 2);
    expect(await scores('l2', docs(3, 4))).toEqual([0.6, 0.8]);
  });

  it('handles constant, single, zero, huge and empty inputs without NaN', async () => {
    expect(await scores('min_max', docs(0.7, 0.7))).toEqual([1, 1]);
    expect(await scores('z_score', docs(5, 5, 5))).toEqual([0, 0, 0]);
    expect(await scores('softmax', docs(3, 3, 3, 3))).toEqual([0.25, 0.25, 0.25, 0.25]);
    expect(await scores('l2', docs(0, 0))).toEqual([0, 0]);
    expect(await scores('min_max', docs(42))).toEqual([1]);
    const huge = (await scores('softmax', docs(1e308, -1e308))) as number[];
    expect(huge).toEqual([1, 0]);
    const bigL2 = (await scores('l2', docs(1e200, 1e200))) as number[];
    expect(bigL2[0]).toBeCloseTo(Math.SQRT1_2);
    for (const method of ['min_max', 'z_score', 'softmax', 'l2'] as const) expect(await stage.run(ctx, [], { method })).toEqual([]);
  });

  it('keeps the order, leaves unscored documents as they are, and does not touch the input', async () => {
    const input = docs(1, undefined, 3);
    const out = await stage.run(ctx, input, { method: 'min_max' });
    expect(out.map((d) => [d.document_id, d.score])).toEqual([['d0', 0], ['d1', undefined], ['d2', 1]]);
    expect('score' in out[1]!).toBe(false);
    expect(input.map((d) => d.score)).toEqual([1, undefined, 3]);
  });
});
