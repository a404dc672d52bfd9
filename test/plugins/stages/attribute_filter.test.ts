import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import stage from '../../../plugins/stages/attribute_filter/index.js';
import { runStageContract, startStageWorld, type StageWorld } from '../../support/stage-contract.js';

runStageContract(stage, {
  valid: [
    { filters: { AND: [{ field: 'category', operator: 'eq', value: 'even' }] } },
    { filters: { OR: [{ field: 'metadata.x', operator: 'exists' }, { NOT: [{ field: 'price', operator: 'gt', value: 3 }] }], case_sensitive: true }, limit: 5 },
  ],
  invalid: [{}, { filters: { XOR: [] } }, { filters: { AND: [{ field: '1bad', operator: 'eq', value: 1 }] } }, { filters: { AND: [{ field: 'a', operator: 'like', value: 1 }] } }, { filters: {}, limit: 0 }, { filters: {}, extra: 1 }],
});

describe('attribute_filter edge cases', () => {
  let world: StageWorld;
  beforeAll(async () => {
    world = await startStageWorld();
  }, 120_000);
  afterAll(async () => {
    await world?.t.stop();
  });

  it('gives the same answer read from the database (first stage) and filtered in process (later stage)', async () => {
    const filters = [
      { AND: [{ field: 'category', operator: 'eq', value: 'EVEN' }] },
      { AND: [{ field: 'category', operator: 'eq', value: 'EVEN' }], case_sensitive: true },
      { OR: [{ field: 'price', operator: 'lt', value: 3 }, { field: 'chunk_index', operator: 'in', value: [3] }] },
      { NOT: [{ field: 'fields.text', operator: 'ends_with', value: '1' }] },
      { AND: [{ field: 'text', operator: 'regex', value: '^document 1[01]$' }] },
      { AND: [{ field: 'missing', operator: 'exists', value: false }, { field: 'price', operator: 'ne', value: 0 }] },
    ];
    for (const f of filters) {
      const fromDb = await stage.run(world.context(null, 0), [], { filters: f });
      const inProcess = await stage.run(world.context(null, 1), structuredClone(world.documents), { filters: f });
      expect(fromDb.map((d) => d.document_id).sort(), JSON.stringify(f)).toEqual(inProcess.map((d) => d.document_id).sort());
    }
  });

  it('as the first stage never cuts matches silently: more than `limit` is an error', async () => {
    expect(await stage.run(world.context(null, 0), [], { filters: {}, limit: 12 })).toHaveLength(12);
    await expect(stage.run(world.context(null, 0), [], { filters: {}, limit: 11 })).rejects.toThrow(/more than 11 documents match/);
  });
});
