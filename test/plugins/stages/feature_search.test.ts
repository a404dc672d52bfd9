import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import stage from '../../../plugins/stages/feature_search/index.js';
import { CONTRACT_FEATURE_URI, contractVector, runStageContract, startStageWorld, type StageWorld } from '../../support/stage-contract.js';

const byVector = (seed: number, extra: Record<string, unknown> = {}) => ({ feature_uri: CONTRACT_FEATURE_URI, query: { vector: contractVector(seed) }, top_k: 4, ...extra });

runStageContract(stage, {
  valid: [
    { searches: [byVector(3)] },
    { searches: [byVector(1), byVector(2, { weight: 2 })], fusion: 'dbsf', final_top_k: 3, pre_filters: { AND: [{ field: 'category', operator: 'eq', value: 'odd' }] } },
    {},
  ],
  invalid: [
    { searches: [{ feature_uri: 'not a uri', query: { text: 'x' } }] },
    { searches: [{ feature_uri: CONTRACT_FEATURE_URI, query: {} }] },
    { searches: [{ feature_uri: CONTRACT_FEATURE_URI, query: { text: 'x', vector: [1] } }] },
    { searches: [{ feature_uri: CONTRACT_FEATURE_URI, query: { text: 'x' }, top_k: 0 }] },
    { fusion: 'sum' },
    { pre_filters: { AND: [{ field: 'a', operator: 'nope' }] } },
  ],
});

describe('feature_search edge cases', () => {
  let world: StageWorld;
  beforeAll(async () => {
    world = await startStageWorld();
  }, 120_000);
  afterAll(async () => {
    await world?.t.stop();
  });

  it('finds the document a vector was made from first, with its similarity as the score', async () => {
    const out = await stage.run(world.context(null, 0), [], { searches: [byVector(5)] });
    expect(out[0]!.payload?.fields).toMatchObject({ text: 'document 5' });
    expect(out[0]!.score).toBeCloseTo(1, 5);
    expect(out.map((d) => d.score!)).toEqual([...out.map((d) => d.score!)].sort((a, b) => b - a));
  });

  it('widens the search until top_k visible documents are found for a user-scoped principal', async () => {
    const out = await stage.run(world.context('bob', 0), [], { searches: [byVector(0, { top_k: 4 })] });
    expect(out).toHaveLength(4);
    expect(out.every((d) => d.payload?.owner_principal === 'bob')).toBe(true);
  });

  it('applies pre_filters pushed into the index and those on metadata after hydration', async () => {
    const pushed = await stage.run(world.context(null, 0), [], { searches: [byVector(5, { top_k: 12 })], pre_filters: { AND: [{ field: 'category', operator: 'eq', value: 'even' }] } });
    expect(pushed).toHaveLength(6);
    expect(pushed.every((d) => (d.payload?.fields as { category: string }).category === 'even')).toBe(true);
    const after = await stage.run(world.context(null, 0), [], { searches: [byVector(5, { top_k: 12 })], pre_filters: { AND: [{ field: 'metadata.tag', operator: 'exists' }] } });
    expect(after).toEqual([]);
  });

  it('without searches it only filters', async () => {
    const out = await stage.run(world.context(null, 1), structuredClone(world.documents), { pre_filters: { AND: [{ field: 'price', operator: 'gte', value: 5 }] } });
    expect(out.length).toBeGreaterThan(0);
    expect(out.every((d) => ((d.payload?.fields as { price: number }).price) >= 5)).toBe(true);
  });

  it('min_score drops weaker hits; after an earlier stage only its documents are ranked', async () => {
    const strict = await stage.run(world.context(null, 0), [], { searches: [byVector(5, { top_k: 12, min_score: 0.999 })] });
    expect(strict.map((d) => (d.payload?.fields as { text: string }).text)).toEqual(['document 5']);
    const some = world.documents.slice(0, 3);
    const ranked = await stage.run(world.context(null, 1), structuredClone(some), { searches: [byVector(5, { top_k: 12 })] });
    expect(ranked.map((d) => d.document_id).sort()).toEqual(some.map((d) => d.document_id).sort());
  });
});
