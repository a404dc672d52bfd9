/**
 * A document's lineage for signing artifacts to a user-scoped caller: up its chain of source documents, a
 * level per read for a whole page, only through documents the caller may read, never round a cycle.
 */
import { describe, expect, it } from 'vitest';
import type { StageDocument } from '../../../kernel/plugins.js';
import { lineageReader } from '../../../kernel/retrieval/lineage.js';

interface Stored {
  collection: string;
  source?: [string, string];
  owner: string;
}

/** A document source over a map of documents: getByIds as the real one (visible, of those collections). */
function sourceOf(stored: Record<string, Stored>) {
  const calls: Array<{ collections: readonly string[]; ids: readonly string[] }> = [];
  return {
    calls,
    async getByIds(_organizationId: string, collections: readonly string[], ids: readonly string[], principalId: string | null): Promise<StageDocument[]> {
      calls.push({ collections, ids });
      return ids
        .filter((id) => stored[id] && collections.includes(stored[id].collection) && (principalId === null || stored[id].owner === principalId))
        .map((id) => ({
          document_id: id,
          collection_id: stored[id]!.collection,
          payload: { document_id: id, source_document_id: stored[id]!.source?.[0] ?? null, source_collection_id: stored[id]!.source?.[1] ?? null },
        }));
    },
  };
}

const result = (id: string, source: [string, string] | null, root = 'obj_root') => ({
  document_id: id, root_object_id: root, source_document_id: source?.[0] ?? null, source_collection_id: source?.[1] ?? null,
});

describe('lineageReader', () => {
  it('follows a page of documents up their chains, one read per level', async () => {
    // tier 1 a (from the object) → tier 2 b → tier 3 c → tier 4 d and d2 (both from c).
    const source = sourceOf({
      a: { collection: 'col_1', owner: 'alice' },
      b: { collection: 'col_2', source: ['a', 'col_1'], owner: 'alice' },
      c: { collection: 'col_3', source: ['b', 'col_2'], owner: 'alice' },
    });
    const d = result('d', ['c', 'col_3']);
    const d2 = result('d2', ['c', 'col_3']);
    const lineageOf = await lineageReader(source, 'org', 'alice', [d, d2]);
    expect(lineageOf(d).sort()).toEqual(['a', 'b', 'c', 'd', 'obj_root']);
    expect(lineageOf(d2).sort()).toEqual(['a', 'b', 'c', 'd2', 'obj_root']);
    // c, then b, then a (which has no source): three reads for the whole page, each id once.
    expect(source.calls.map((call) => call.ids)).toEqual([['c'], ['b'], ['a']]);
  });

  it('stops at a document the caller may not read, and at a document already in the chain', async () => {
    const source = sourceOf({
      b: { collection: 'col_2', source: ['a', 'col_1'], owner: 'bob' },
      x: { collection: 'col_2', source: ['y', 'col_2'], owner: 'alice' },
      y: { collection: 'col_2', source: ['x', 'col_2'], owner: 'alice' },
    });
    const fromBobs = result('c', ['b', 'col_2']);
    const looped = result('z', ['x', 'col_2']);
    const lineageOf = await lineageReader(source, 'org', 'alice', [fromBobs, looped]);
    // b is the document's own source (it says so itself); what b descends from is not alice's to learn.
    expect(lineageOf(fromBobs).sort()).toEqual(['b', 'c', 'obj_root']);
    expect(lineageOf(looped).sort()).toEqual(['obj_root', 'x', 'y', 'z']);
    expect(source.calls.length).toBeLessThanOrEqual(3);
  });

  it('reads nothing for documents without a source, and knows only what a reshaped result still says', async () => {
    const source = sourceOf({});
    const tierOne = result('a', null);
    const reshaped = { title: 'no lineage fields' };
    const lineageOf = await lineageReader(source, 'org', 'alice', [tierOne, reshaped]);
    expect(lineageOf(tierOne).sort()).toEqual(['a', 'obj_root']);
    expect(lineageOf(reshaped)).toEqual([]);
    expect(source.calls).toEqual([]);
  });
});
