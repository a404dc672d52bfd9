import { describe, expect, it } from 'vitest';
import stage from '../../../plugins/stages/group_by/index.js';
import type { StageContext, StageDocument } from '../../../kernel/plugins.js';
import { runStageContract } from '../../support/stage-contract.js';

runStageContract(stage, {
  valid: [{ field: 'category', output_mode: 'all', max_per_group: 2 }, { field: 'category' }, { field: 'metadata.source', output_mode: 'flatten' }],
  invalid: [{}, { field: '' }, { field: 'category', output_mode: 'nested' }, { field: 'category', max_per_group: 0 }, { field: 'category', limit: 3 }],
});

describe('group_by edge cases', () => {
  const ctx = {} as StageContext;
  const doc = (id: string, group: unknown, score: number): StageDocument => ({
    document_id: id, collection_id: 'col_x', score, payload: { owner_principal: 'alice', fields: group === undefined ? {} : { g: group } },
  });
  // ranked input: groups in order of first appearance are x, y, (missing), z
  const docs = [doc('a', 'x', 0.9), doc('b', 'y', 0.8), doc('c', 'x', 0.7), doc('d', undefined, 0.6), doc('e', 'x', 0.5), doc('f', null, 0.4), doc('h', 'z', 0.3)];
  const ids = (out: StageDocument[]) => out.map((d) => d.document_id);
  const keys = (out: StageDocument[]) => out.map((d) => d.payload!.group_key);

  it('first: the best document of each group, groups by their best document, missing and null together', async () => {
    const out = await stage.run(ctx, docs, { field: 'g', output_mode: 'first' });
    expect(ids(out)).toEqual(['a', 'b', 'd', 'h']);
    expect(keys(out)).toEqual(['x', 'y', null, 'z']);
    expect(out[0]!.score).toBe(0.9);
    expect(ids(await stage.run(ctx, docs, { field: 'g' }))).toEqual(['a', 'b', 'd', 'h']);
  });

  it('flatten: up to max_per_group per group, group after group', async () => {
    const out = await stage.run(ctx, docs, { field: 'fields.g', output_mode: 'flatten', max_per_group: 2 });
    expect(ids(out)).toEqual(['a', 'c', 'b', 'd', 'f', 'h']);
    expect(keys(out)).toEqual(['x', 'x', 'y', null, null, 'z']);
  });

  it('all: one document per group carrying group_key, group_size and its members', async () => {
    const out = await stage.run(ctx, docs, { field: 'g', output_mode: 'all', max_per_group: 2 });
    expect(ids(out)).toEqual(['a', 'b', 'd', 'h']);
    const x = out[0]!;
    expect(x).toMatchObject({ document_id: 'a', collection_id: 'col_x', score: 0.9 });
    expect(x.payload).toMatchObject({ owner_principal: 'alice', fields: { g: 'x' }, group_key: 'x', group_size: 3 });
    expect(ids(x.payload!.documents as StageDocument[])).toEqual(['a', 'c']);
    expect(out[2]!.payload).toMatchObject({ group_key: null, group_size: 2 });
    // the members are the documents as received, without the group's additions
    expect((x.payload!.documents as StageDocument[])[0]!.payload).not.toHaveProperty('group_key');
  });

  it('does not change the documents it was given', async () => {
    const input = structuredClone(docs);
    await stage.run(ctx, input, { field: 'g', output_mode: 'all' });
    expect(input).toEqual(docs);
  });
});
