import { describe, expect, it } from 'vitest';
import stage from '../../../plugins/stages/sort_relevance/index.js';
import type { StageContext, StageDocument } from '../../../kernel/plugins.js';
import { runStageContract } from '../../support/stage-contract.js';

runStageContract(stage, {
  valid: [{}, { direction: 'asc' }, { direction: 'desc' }],
  invalid: [{ direction: 'up' }, { direction: 'desc', field: 'score' }, []],
});

describe('sort_relevance edge cases', () => {
  const ctx = {} as StageContext;
  const doc = (id: string, score?: number): StageDocument => (score === undefined ? { document_id: id } : { document_id: id, score });
  const ids = (docs: StageDocument[]) => docs.map((d) => d.document_id);

  it('sorts by score, desc by default, ties by document_id, unscored last in both directions', async () => {
    const docs = [doc('d', 0.5), doc('n'), doc('b', 0.9), doc('c', 0.5), doc('x', Number.NaN), doc('a', 0.5)];
    expect(ids(await stage.run(ctx, docs, {}))).toEqual(['b', 'a', 'c', 'd', 'n', 'x']);
    expect(ids(await stage.run(ctx, docs, { direction: 'asc' }))).toEqual(['a', 'c', 'd', 'b', 'n', 'x']);
  });

  it('gives the same order whatever the input order, and leaves the input alone', async () => {
    const docs = [doc('c', 1), doc('a', 1), doc('b', 2)];
    const reversed = [...docs].reverse();
    expect(ids(await stage.run(ctx, docs, {}))).toEqual(ids(await stage.run(ctx, reversed, {})));
    expect(ids(docs)).toEqual(['c', 'a', 'b']);
  });
});
