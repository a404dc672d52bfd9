import { describe, expect, it } from 'vitest';
import stage from '../../../plugins/stages/deduplicate/index.js';
import type { StageContext, StageDocument } from '../../../kernel/plugins.js';
import { CONTRACT_FEATURE_URI, runStageContract } from '../../support/stage-contract.js';
import { FAKE_FEATURE_URI, vectorStageContext } from '../../support/vector-stage-context.js';

runStageContract(stage, {
  valid: [{ fields: ['category'] }, { fields: ['category', 'chunk_index'] }, { fields: ['metadata.source.url'] }, { feature_uri: CONTRACT_FEATURE_URI }, { feature_uri: CONTRACT_FEATURE_URI, threshold: 0.5 }],
  invalid: [
    {}, { fields: [] }, { fields: ['a..b'] }, { fields: ['x', 'x'] }, { fields: 'category' }, { fields: ['x'], threshold: 0.9 },
    { fields: ['x'], feature_uri: CONTRACT_FEATURE_URI }, { threshold: 0.9 }, { feature_uri: 'text_embedding' }, { feature_uri: CONTRACT_FEATURE_URI, threshold: 1.5 },
  ],
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

describe('deduplicate by embedding similarity', () => {
  const doc = (id: string): StageDocument => ({ document_id: id, collection_id: 'col_fake', payload: { fields: {} } });
  const ids = (docs: StageDocument[]) => docs.map((d) => d.document_id);
  // cos(a, b) ≈ 0.995, cos(a, c) = 0, cos(b, d) ≈ 0.8, cos(a, d) ≈ 0.707
  const vectors = { a: [1, 0], b: [0.99, 0.1], c: [0, 1], d: [1, 1], e: [-1, 0] };
  const run = (docs: StageDocument[], params: Record<string, unknown> = {}, v: Record<string, number[]> = vectors) =>
    stage.run(vectorStageContext(v), docs, { feature_uri: FAKE_FEATURE_URI, ...params });

  it('drops a document at or above the threshold to a kept, higher-ranked one', async () => {
    const docs = ['a', 'b', 'c', 'd', 'e'].map(doc);
    expect(ids(await run(docs))).toEqual(['a', 'c', 'd', 'e']);
    expect(ids(await run(docs, { threshold: 0.7 }))).toEqual(['a', 'c', 'e']);
    expect(ids(await run(docs, { threshold: -1 }))).toEqual(['a']);
    // the higher-ranked one stays whichever it is
    expect(ids(await run(['b', 'a', 'c'].map(doc)))).toEqual(['b', 'c']);
  });

  it('compares with kept documents only (a dropped one removes nothing)', async () => {
    // b is dropped as a duplicate of a; x is close to b (0.96) but not to a (0.92 < 0.95): x stays
    const v = { a: [1, 0], b: [0.96, 0.28], x: [0.92, 0.39] };
    expect(ids(await run(['a', 'b', 'x'].map(doc), {}, v))).toEqual(['a', 'x']);
  });

  it('keeps documents without a vector', async () => {
    expect(ids(await run(['a', 'n1', 'b', 'n2'].map(doc)))).toEqual(['a', 'n1', 'n2']);
  });

  it('refuses more input than it may compare, rather than skipping some', async () => {
    const docs = Array.from({ length: 2001 }, (_, i) => doc(`d${i}`));
    await expect(run(docs)).rejects.toThrow(/at most 2000/);
  });

  it('refuses a feature the collections do not index', async () => {
    await expect(stage.run(vectorStageContext(vectors), [doc('a')], { feature_uri: 'tessera://nope@1.0/x' })).rejects.toThrow(/not indexed/);
  });
});
