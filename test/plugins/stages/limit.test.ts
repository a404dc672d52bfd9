import { describe, expect, it } from 'vitest';
import stage from '../../../plugins/stages/limit/index.js';
import type { StageContext } from '../../../kernel/plugins.js';
import { runStageContract } from '../../support/stage-contract.js';

runStageContract(stage, {
  valid: [{ limit: 3 }, { limit: 1, offset: 2 }],
  invalid: [{}, { limit: 0 }, { limit: 1.5 }, { limit: 2, offset: -1 }, { limit: 2, skip: 1 }],
});

describe('limit edge cases', () => {
  it('skips `offset` then keeps `limit`; past the end gives nothing', async () => {
    const docs = ['a', 'b', 'c', 'd'].map((id) => ({ document_id: id }));
    const ctx = {} as StageContext;
    expect((await stage.run(ctx, docs, { limit: 2, offset: 1 })).map((d) => d.document_id)).toEqual(['b', 'c']);
    expect(await stage.run(ctx, docs, { limit: 2, offset: 9 })).toEqual([]);
  });
});
