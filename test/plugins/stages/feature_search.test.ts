import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { VectorIndex } from '../../../kernel/tokens.js';
import { featureIndexName } from '../../../kernel/vectors/naming.js';
import { Documents } from '../../../plugins/resources/collections/index.js';
import { vectorPayload } from '../../../plugins/resources/collections/vector-payload.js';
import stage from '../../../plugins/stages/feature_search/index.js';
import { CONTRACT_FEATURE_URI, contractVector, runStageContract, startStageWorld, type StageWorld } from '../../support/stage-contract.js';

const byVector = (seed: number, extra: Record<string, unknown> = {}) => ({ feature_uri: CONTRACT_FEATURE_URI, query: { vector: contractVector(seed) }, top_k: 4, ...extra });

runStageContract(stage, {
  valid: [
    { searches: [byVector(3)] },
    { searches: [byVector(1), byVector(2, { weight: 2 })], fusion: 'dbsf', final_top_k: 3, pre_filters: { AND: [{ field: 'category', operator: 'eq', value: 'odd' }] } },
    {},
    { searches: [byVector(3), { text_search: { query: 'document', fields: ['text'], k1: 1.2, b: 0.75 }, top_k: 4, weight: 2 }], fusion: 'rrf' },
  ],
  invalid: [
    { searches: [{ ...byVector(3), text_search: { query: 'document' } }] },
    { searches: [{ feature_uri: CONTRACT_FEATURE_URI, top_k: 3 }] },
    { searches: [{ query: { text: 'x' } }] },
    { searches: [{ text_search: {} }] },
    { searches: [{ text_search: { query: 'x', feature_uri: CONTRACT_FEATURE_URI } }] },
    { searches: [{ text_search: { query: 'x' }, query: { text: 'x' } }] },
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

  it('runs a lexical search as a later stage only over the documents it was given, as the principal', async () => {
    const bobs = world.documents.filter((d) => d.payload?.owner_principal === 'bob').slice(0, 2);
    const out = await stage.run(world.context('bob', 1), structuredClone(bobs), { searches: [{ text_search: { query: 'document' }, top_k: 10 }] });
    expect(out.map((d) => d.document_id).sort()).toEqual(bobs.map((d) => d.document_id).sort());
    const firstStage = await stage.run(world.context('alice', 0), [], { searches: [{ text_search: { query: 'document' }, top_k: 10 }] });
    expect(firstStage).toHaveLength(4);
    expect(firstStage.every((d) => d.payload?.owner_principal === 'alice')).toBe(true);
  });

  it("puts the principal into the vector index's filter: top_k in one round, owned or granted, never another's", async () => {
    const base = world.documents[0]!;
    const collectionId = base.collection_id!;
    const organizationId = world.context(null, 0).organizationId;
    const namespaceId = world.context(null, 0).namespace.id;
    const index = featureIndexName(collectionId, 'text_embedding');
    const vectors = world.t.kernel.services.get(VectorIndex);
    const write = async (key: string, vector: number[], owner: string, grants: string[] = []) => {
      const row = await world.t.kernel.services.get(Documents).upsert({
        organizationId, namespaceId, collectionId, sourceKey: key, rootObjectId: null, sourceCollectionId: null, sourceDocumentId: null,
        processingTier: 0, fields: { text: key, category: 'principal-test' }, ownerPrincipal: owner, grants,
      });
      await vectors.upsert(index, [{ id: row.document_id, vector, payload: vectorPayload(row) }]);
      return row.document_id;
    };
    // Many near copies of carol's query owned by dave: a search filtered only after hydration would have to widen.
    const query = contractVector(100);
    for (let i = 0; i < 30; i++) await write(`dave:${i}`, query.map((x, j) => x + (j === i ? 0.01 : 0)), 'dave');
    const own = await write('carol:own', query, 'carol');
    const granted = await write('alice:granted', contractVector(101), 'alice', ['carol']);

    const search = vi.spyOn(vectors, 'search');
    try {
      const out = await stage.run(world.context('carol', 0), [], { searches: [{ feature_uri: CONTRACT_FEATURE_URI, query: { vector: query }, top_k: 2 }] });
      expect(out.map((d) => d.document_id)).toEqual([own, granted]);
      expect(search).toHaveBeenCalledTimes(1);
      const dave = await stage.run(world.context('dave', 0), [], { searches: [{ feature_uri: CONTRACT_FEATURE_URI, query: { vector: query }, top_k: 5 }] });
      expect(dave).toHaveLength(5);
      expect(dave.every((d) => d.payload?.owner_principal === 'dave')).toBe(true);
    } finally {
      search.mockRestore();
    }
  });

  it('never loses a document to a pre_filter on a field too large for the index payload (long text, lists)', async () => {
    const base = world.documents[0]!;
    const collectionId = base.collection_id!;
    const { organizationId, namespace } = world.context(null, 0);
    const index = featureIndexName(collectionId, 'text_embedding');
    const vectors = world.t.kernel.services.get(VectorIndex);
    const query = contractVector(200);
    const write = async (key: string, fields: Record<string, unknown>, nudge: number) => {
      const row = await world.t.kernel.services.get(Documents).upsert({
        organizationId, namespaceId: namespace.id, collectionId, sourceKey: key, rootObjectId: null, sourceCollectionId: null, sourceDocumentId: null,
        processingTier: 0, fields: { category: 'large-fields', ...fields }, ownerPrincipal: null, grants: [],
      });
      const payload = vectorPayload(row);
      await vectors.upsert(index, [{ id: row.document_id, vector: query.map((x, j) => x + (j === nudge ? 0.01 : 0)), payload }]);
      return { id: row.document_id, payload };
    };
    const { id: long, payload } = await write('long-with-needle', { body: `${'x'.repeat(3000)} needle`, tags: ['red', 'green'] }, 1);
    const { id: longOther } = await write('long-without', { body: 'y'.repeat(3000), tags: ['blue'] }, 2);
    const { id: short } = await write('short-with-needle', { body: 'a needle', tags: 'red' }, 3);
    // The payload names what it leaves out (fields in jsonb's key order: shorter first).
    expect(payload).toMatchObject({ fields: { category: 'large-fields' }, omitted_fields: ['body', 'tags'] });

    const found = async (conditions: Record<string, unknown>) =>
      (await stage.run(world.context(null, 0), [], { searches: [{ feature_uri: CONTRACT_FEATURE_URI, query: { vector: query }, top_k: 3 }], pre_filters: { AND: [{ field: 'category', operator: 'eq', value: 'large-fields' }], ...conditions } }))
        .map((d) => d.document_id).sort();
    expect(await found({ OR: [{ field: 'body', operator: 'contains', value: 'needle' }] })).toEqual([long, short].sort());
    expect(await found({ OR: [{ field: 'fields.tags', operator: 'contains', value: 'red' }] })).toEqual([long, short].sort());
    expect(await found({ NOT: [{ field: 'body', operator: 'contains', value: 'needle' }] })).toEqual([longOther]);
    expect(await found({ NOT: [{ field: 'tags', operator: 'contains', value: 'green' }] })).toEqual([longOther, short].sort());
    expect(await found({ OR: [{ field: 'body', operator: 'exists' }] })).toEqual([long, longOther, short].sort());

    // A payload written before payloads named what they leave out: its long field is simply missing.
    const older = await world.t.kernel.services.get(Documents).upsert({
      organizationId, namespaceId: namespace.id, collectionId, sourceKey: 'older-long-with-needle', rootObjectId: null, sourceCollectionId: null, sourceDocumentId: null,
      processingTier: 0, fields: { category: 'large-fields', body: `${'x'.repeat(3000)} needle` }, ownerPrincipal: null, grants: [],
    });
    const { omitted_fields: _omitted, created_at: _created, updated_at: _updated, source_key: _key, ...olderPayload } = vectorPayload(older);
    await vectors.upsert(index, [{ id: older.document_id, vector: query.map((x, j) => x + (j === 4 ? 0.01 : 0)), payload: olderPayload }]);
    const withOlder = async (conditions: Record<string, unknown>) =>
      (await stage.run(world.context(null, 0), [], { searches: [{ feature_uri: CONTRACT_FEATURE_URI, query: { vector: query }, top_k: 4 }], pre_filters: { AND: [{ field: 'category', operator: 'eq', value: 'large-fields' }], ...conditions } }))
        .map((d) => d.document_id).sort();
    expect(await withOlder({ OR: [{ field: 'body', operator: 'contains', value: 'needle' }] })).toEqual([long, short, older.document_id].sort());
    expect(await withOlder({ NOT: [{ field: 'body', operator: 'contains', value: 'needle' }] })).toEqual([longOther]);
  });
});
