import { describe, expect, it } from 'vitest';
import stage from '../../../plugins/stages/deduplicate/index.js';
import type { StageContext, StageDocument } from '../../../kernel/plugins.js';
import { runStageContract } from '../../support/stage-contract.js';

runStageContract(stage, {
  valid: [{ fields: ['category'] }, { fields: ['category', 'chunk_index'] }, { fields: ['metadata.source.url'] }],
  invalid: [{}, { fields: [] }, { fields: ['a..b'] }, { fields: ['x', 'x'] }, { fields: 'category' }, { fields: ['x'], threshold: 0.9 }],
});

describe('deduplicate edge cases', () => {
  const ctx = {} as StageContext;
  const doc = (id: string, fields: Record<string, unknown>, metadata: Record<string, unknown> = {}): StageDocument => ({ document_id: id, payload: { fields, metadata } });
  const ids = (docs: StageDocument[]) => docs.map((d) => d.document_id);

  it('keeps the first (highest-ranked) document of each key', async () => {
    const docs = [doc('a', { k: 'x' }), doc('b', { k: 'y' }), doc('c', { k: 'x' }), doc('d', { k: 'y' }), doc('e', { k: 'z' })];
    expect(ids(await stage.run(ctx, docs, { fields: ['k'] }))).toEqual(['a', 'b', 'e']);
  });

  it('combines several fields and dotted paths, comparing JSON values', async () => {
    const docs = [
      doc('a', { k: 1, n: 'p' }, { src: { u: 'u1' } }),
      doc('b', { k: '1', n: 'p' }, { src: { u: 'u1' } }),
      doc('c', { k: 1, n: 'p' }, { src: { u: 'u2' } }),
      doc('d', { k: 1, n: 'p' }, { src: { u: 'u1' } }),
      doc('e', { k: { b: 1, a: 2 }, n: 'p' }, { src: { u: 'u1' } }),
      doc('f', { k: { a: 2, b: 1 }, n: 'p' }, { src: { u: 'u1' } }),
      doc('g', { k: 1, n: 'P' }, { src: { u: 'u1' } }),
    ];
    expect(ids(await stage.run(ctx, docs, { fields: ['fields.k', 'n', 'metadata.src.u'] }))).toEqual(['a', 'b', 'c', 'e', 'g']);
  });

  it('keeps documents with none of the fields; a partly missing key counts missing as null', async () => {
    const docs = [doc('a', {}), doc('b', {}), doc('c', { k: null }), doc('d', { k: 1 }), doc('e', { k: 1, m: null }), doc('f', { k: 1 })];
    expect(ids(await stage.run(ctx, docs, { fields: ['k'] }))).toEqual(['a', 'b', 'c', 'd']);
    expect(ids(await stage.run(ctx, docs, { fields: ['k', 'm'] }))).toEqual(['a', 'b', 'c', 'd']);
  });
});
