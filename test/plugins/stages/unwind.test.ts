import { describe, expect, it } from 'vitest';
import stage from '../../../plugins/stages/unwind/index.js';
import type { StageContext, StageDocument } from '../../../kernel/plugins.js';
import { runStageContract } from '../../support/stage-contract.js';

runStageContract(stage, {
  valid: [{ field: 'text' }, { field: 'metadata.tags', output_field: 'tag', preserve_empty: true }, { field: 'fields.chunks' }],
  invalid: [{}, { field: 'a..b' }, { field: 'tags', output_field: 'a.b' }, { field: 'tags', preserve_empty: 'yes' }, { field: 'tags', as: 'tag' }],
});

describe('unwind edge cases', () => {
  const ctx = {} as StageContext;
  const doc = (id: string, fields: Record<string, unknown>, metadata: Record<string, unknown> = {}): StageDocument => ({
    document_id: id, collection_id: 'col_x', score: 0.5, payload: { owner_principal: 'bob', fields, metadata },
  });
  const fieldsOf = (out: StageDocument[]) => out.map((d) => [d.document_id, d.payload!.fields]);

  it('gives one document per element, id, score and payload kept, element and unwind_index in fields', async () => {
    const out = await stage.run(ctx, [doc('a', { tags: ['x', 'y'], n: 1 }), doc('b', { tags: ['z'] })], { field: 'tags' });
    expect(fieldsOf(out)).toEqual([
      ['a', { tags: 'x', n: 1, unwind_index: 0 }],
      ['a', { tags: 'y', n: 1, unwind_index: 1 }],
      ['b', { tags: 'z', unwind_index: 0 }],
    ]);
    for (const d of out) expect(d).toMatchObject({ collection_id: 'col_x', score: 0.5, payload: { owner_principal: 'bob' } });
  });

  it('reads dotted paths and writes under output_field, keeping the list', async () => {
    const out = await stage.run(ctx, [doc('a', {}, { labels: [{ k: 1 }, { k: 2 }] })], { field: 'metadata.labels', output_field: 'label' });
    expect(fieldsOf(out)).toEqual([['a', { label: { k: 1 }, unwind_index: 0 }], ['a', { label: { k: 2 }, unwind_index: 1 }]]);
    expect(out[0]!.payload!.metadata).toEqual({ labels: [{ k: 1 }, { k: 2 }] });
  });

  it('a single value is a one-element list; missing, null and empty lists drop the document unless preserve_empty', async () => {
    const docs = [doc('a', { t: 'solo' }), doc('b', {}), doc('c', { t: null }), doc('d', { t: [] })];
    expect(fieldsOf(await stage.run(ctx, docs, { field: 't' }))).toEqual([['a', { t: 'solo', unwind_index: 0 }]]);
    const kept = await stage.run(ctx, docs, { field: 't', preserve_empty: true });
    expect(kept.map((d) => d.document_id)).toEqual(['a', 'b', 'c', 'd']);
    expect(kept.slice(1)).toEqual(docs.slice(1));
  });

  it('does not change the documents it was given', async () => {
    const input = [doc('a', { tags: ['x', 'y'] })];
    const before = structuredClone(input);
    await stage.run(ctx, input, { field: 'tags' });
    expect(input).toEqual(before);
  });
});
