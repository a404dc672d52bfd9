import { describe, expect, it } from 'vitest';
import stage, { MAX_DISTINCT } from '../../../plugins/stages/aggregate/index.js';
import type { StageContext, StageDocument } from '../../../kernel/plugins.js';
import { runStageContract } from '../../support/stage-contract.js';

runStageContract(stage, {
  synthetic: true,
  valid: [
    { aggregations: [{ function: 'count' }, { function: 'distinct', field: 'document_id', alias: 'ids' }, { function: 'sum', field: 'price' }], group_by: 'category' },
    { aggregations: [{ function: 'avg', field: 'fields.price' }] },
    { aggregations: [{ function: 'min', field: 'price' }, { function: 'max', field: 'price' }], group_by: ['category', 'chunk_index'] },
  ],
  invalid: [
    {}, { aggregations: [] }, { aggregations: [{ function: 'median', field: 'x' }] }, { aggregations: [{ function: 'sum' }] },
    { aggregations: [{ function: 'count', alias: 'bad alias' }] }, { aggregations: [{ function: 'count' }], group_by: [] },
    { aggregations: [{ function: 'count' }], group_by: 'a..b' }, { aggregations: [{ function: 'count' }], extra: true },
  ],
});

describe('aggregate edge cases', () => {
  const ctx = {} as StageContext;
  const doc = (id: string, fields: Record<string, unknown>): StageDocument => ({ document_id: id, collection_id: 'c', score: 1, payload: { fields, metadata: {} } });
  const docs = [
    doc('a', { cat: 'x', price: 10, tag: 't1', when: '2024-01-02' }),
    doc('b', { cat: 'y', price: 5, tag: 't2', when: '2024-03-01' }),
    doc('c', { cat: 'x', price: '7', tag: 't1' }),
    doc('d', { cat: null, price: 2, tag: { k: 1 } }),
    doc('e', { price: 4 }),
    doc('f', { cat: 'x', price: 1.5, tag: 't3', when: '2023-12-31' }),
  ];
  type Result = { document_id: string; collection_id?: string; score?: number; payload: { group_key: unknown; group: Record<string, unknown>; aggregations: Record<string, unknown> } };
  const run = async (params: Record<string, unknown>, input = docs) => (await stage.run(ctx, structuredClone(input), params as never)) as unknown as Result[];

  it('computes every function per group, groups in order of their first document, missing and null as one group', async () => {
    const out = await run({
      group_by: 'cat',
      aggregations: [
        { function: 'count' }, { function: 'count', field: 'tag', alias: 'tagged' }, { function: 'sum', field: 'price' }, { function: 'avg', field: 'price' },
        { function: 'min', field: 'price' }, { function: 'max', field: 'price' }, { function: 'distinct', field: 'tag' }, { function: 'min', field: 'when' }, { function: 'max', field: 'when' },
      ],
    });
    expect(out.map((r) => r.payload.group_key)).toEqual(['x', 'y', null]);
    expect(out[0]!.payload).toEqual({
      group_key: 'x',
      group: { cat: 'x' },
      // '7' is a string: not summed, averaged or compared with numbers
      aggregations: { count: 3, tagged: 3, sum_price: 11.5, avg_price: 5.75, min_price: 1.5, max_price: 10, distinct_tag: ['t1', 't3'], min_when: '2023-12-31', max_when: '2024-01-02' },
    });
    expect(out[2]!.payload.aggregations).toMatchObject({ count: 2, tagged: 1, sum_price: 6, distinct_tag: [{ k: 1 }, null] });
    for (const r of out) {
      expect(r.document_id).toMatch(/^agg_[0-9a-f]{24}$/);
      expect(r.collection_id).toBeUndefined();
      expect(r.score).toBeUndefined();
    }
    expect(new Set(out.map((r) => r.document_id)).size).toBe(3);
  });

  it('groups by several paths; ids depend on the group key only', async () => {
    const out = await run({ group_by: ['cat', 'tag'], aggregations: [{ function: 'count' }] });
    expect(out.map((r) => r.payload.group_key)).toEqual([['x', 't1'], ['y', 't2'], [null, { k: 1 }], [null, null], ['x', 't3']]);
    expect(out[0]!.payload.group).toEqual({ cat: 'x', tag: 't1' });
    expect(out[0]!.payload.aggregations.count).toBe(2);
    const again = await run({ group_by: ['cat', 'tag'], aggregations: [{ function: 'sum', field: 'price' }] }, [...docs].reverse());
    expect(new Set(again.map((r) => r.document_id))).toEqual(new Set(out.map((r) => r.document_id)));
  });

  it('without group_by gives one result, also for nothing received', async () => {
    const params = { aggregations: [{ function: 'count' }, { function: 'sum', field: 'price' }, { function: 'avg', field: 'price' }, { function: 'min', field: 'price' }, { function: 'distinct', field: 'cat' }] };
    const all = await run(params);
    expect(all).toHaveLength(1);
    expect(all[0]!.payload).toMatchObject({ group_key: null, group: {}, aggregations: { count: 6, sum_price: 22.5, avg_price: 4.5, min_price: 1.5, distinct_cat: ['x', 'y', null] } });
    const none = await run(params, []);
    expect(none).toHaveLength(1);
    expect(none[0]!.document_id).toBe(all[0]!.document_id);
    expect(none[0]!.payload.aggregations).toEqual({ count: 0, sum_price: 0, avg_price: null, min_price: null, distinct_cat: [] });
    expect(await run({ ...params, group_by: 'cat' }, [])).toEqual([]);
  });

  it('bounds distinct values and refuses two results under one name', async () => {
    const many = Array.from({ length: MAX_DISTINCT + 5 }, (_, i) => doc(`d${i}`, { n: i }));
    const [out] = await run({ aggregations: [{ function: 'distinct', field: 'n' }] }, many);
    expect(out!.payload.aggregations.distinct_n).toHaveLength(MAX_DISTINCT);
    await expect(run({ aggregations: [{ function: 'count' }, { function: 'sum', field: 'price', alias: 'count' }] })).rejects.toThrow(/'count'/);
  });
});
