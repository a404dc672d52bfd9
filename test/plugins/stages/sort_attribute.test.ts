import { describe, expect, it } from 'vitest';
import stage from '../../../plugins/stages/sort_attribute/index.js';
import type { StageContext, StageDocument } from '../../../kernel/plugins.js';
import { runStageContract } from '../../support/stage-contract.js';

runStageContract(stage, {
  valid: [{ field: 'price', direction: 'asc' }, { field: 'metadata.rank' }, { field: 'score', direction: 'desc' }],
  invalid: [{}, { field: '' }, { field: 'a..b' }, { field: 'price', direction: 'up' }, { field: 'price', extra: true }],
});

describe('sort_attribute edge cases', () => {
  const doc = (id: string, fields: Record<string, unknown>, metadata: Record<string, unknown> = {}): StageDocument => ({ document_id: id, collection_id: 'col_x', payload: { fields, metadata } });
  const ctx = {} as StageContext;

  it('sorts by dotted paths, missing values last in both directions, ties stable', async () => {
    const docs = [doc('a', { n: 2 }), doc('b', {}), doc('c', { n: 1 }), doc('d', { n: 2 }), doc('e', { n: null })];
    expect((await stage.run(ctx, docs, { field: 'n', direction: 'asc' })).map((d) => d.document_id)).toEqual(['c', 'a', 'd', 'b', 'e']);
    expect((await stage.run(ctx, docs, { field: 'fields.n', direction: 'desc' })).map((d) => d.document_id)).toEqual(['a', 'd', 'c', 'b', 'e']);
    const meta = [doc('x', {}, { r: { k: 'b' } }), doc('y', {}, { r: { k: 'a' } })];
    expect((await stage.run(ctx, meta, { field: 'metadata.r.k', direction: 'asc' })).map((d) => d.document_id)).toEqual(['y', 'x']);
  });
});
