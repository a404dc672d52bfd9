import { describe, expect, it } from 'vitest';
import stage, { proportionalQuotas } from '../../../plugins/stages/sample/index.js';
import type { StageContext, StageDocument } from '../../../kernel/plugins.js';
import { runStageContract } from '../../support/stage-contract.js';

runStageContract(stage, {
  valid: [{ count: 5, seed: 7 }, { count: 1 }, { count: 4, seed: 3, stratify_by: 'category' }, { count: 2, stratify_by: 'metadata.kind' }],
  invalid: [{}, { count: 0 }, { count: 2.5 }, { count: 2, seed: -1 }, { count: 2, seed: 1.5 }, { count: 2, stratify_by: 'a..b' }, { count: 2, size: 3 }],
});

describe('sample edge cases', () => {
  const ctx = {} as StageContext;
  const corpus = (n: number, category: (i: number) => unknown = () => 'x'): StageDocument[] =>
    Array.from({ length: n }, (_, i) => ({ document_id: `d${String(i).padStart(3, '0')}`, payload: { fields: { category: category(i) } } }));
  const ids = (docs: StageDocument[]) => docs.map((d) => d.document_id);

  it('is reproducible for a seed, differs across seeds, keeps incoming order and has no duplicates', async () => {
    const docs = corpus(100);
    const a = ids(await stage.run(ctx, docs, { count: 10, seed: 42 }));
    expect(ids(await stage.run(ctx, docs, { count: 10, seed: 42 }))).toEqual(a);
    expect(ids(await stage.run(ctx, docs, { count: 10, seed: 43 }))).not.toEqual(a);
    expect(ids(await stage.run(ctx, docs, { count: 10 }))).toEqual(ids(await stage.run(ctx, docs, { count: 10, seed: 0 })));
    expect(new Set(a).size).toBe(10);
    expect([...a].sort()).toEqual(a);
  });

  it('returns everything when count is not smaller than the input', async () => {
    const docs = corpus(5);
    expect(ids(await stage.run(ctx, docs, { count: 5, seed: 1 }))).toEqual(ids(docs));
    expect(ids(await stage.run(ctx, docs, { count: 50, seed: 1, stratify_by: 'category' }))).toEqual(ids(docs));
  });

  it('spreads the sample over strata in proportion (largest remainder), missing values as one stratum', async () => {
    // 60 a, 30 b, 10 with no category
    const docs = corpus(100, (i) => (i < 60 ? 'a' : i < 90 ? 'b' : undefined));
    const out = await stage.run(ctx, docs, { count: 10, seed: 5, stratify_by: 'category' });
    const count = (v: unknown) => out.filter((d) => (d.payload!.fields as Record<string, unknown>).category === v).length;
    expect([count('a'), count('b'), count(undefined)]).toEqual([6, 3, 1]);
    expect(proportionalQuotas([60, 30, 10], 10)).toEqual([6, 3, 1]);
    expect(proportionalQuotas([5, 5, 5], 2)).toEqual([1, 1, 0]);
    expect(proportionalQuotas([1, 1, 8], 5)).toEqual([1, 0, 4]);
    expect(proportionalQuotas([3, 3], 6)).toEqual([3, 3]);
  });

  it('treats a stratum value by its JSON value (1 and "1" differ)', async () => {
    const docs = corpus(4, (i) => (i % 2 === 0 ? 1 : '1'));
    const out = await stage.run(ctx, docs, { count: 2, seed: 9, stratify_by: 'fields.category' });
    expect(out.map((d) => typeof (d.payload!.fields as Record<string, unknown>).category).sort()).toEqual(['number', 'string']);
  });
});
