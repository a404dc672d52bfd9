/**
 * Filters evaluated by the in-process HNSW index in its graph thread (kernel/vectors/graph-thread.ts): a
 * filter crosses the thread boundary as plain data, so every operator — `regex` included, whose compiled
 * matcher is a function that cannot be structured-cloned — selects exactly what matchesFilter selects, as
 * it does with the graphs in the calling thread.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { openDatabase, type DatabaseHandle } from '../../../kernel/db/database.js';
import { RequestValidationError } from '../../../kernel/errors.js';
import { matchesFilter, parseFilter, type FilterInput, type ParsedFilter } from '../../../kernel/filters/filter.js';
import { createVectorIndex, HnswMemoryIndex } from '../../../kernel/vectors/index.js';
import type { VectorRecord } from '../../../kernel/vectors/vector-index.js';
import { FILTERS, payloadFor, randomVectors } from './contract.js';

const onPostgres = Boolean(process.env.TEST_DATABASE_URL);

async function database(): Promise<DatabaseHandle> {
  if (onPostgres) return openDatabase({ url: process.env.TEST_DATABASE_URL, inMemory: false, dataDir: '' });
  const template = inject('pgliteTemplate');
  return openDatabase({ url: undefined, inMemory: true, dataDir: '', ...(template ? { pgliteTemplate: new Blob([template]) } : {}) });
}

const REGEX_FILTERS: Array<[string, FilterInput]> = [
  ['regex (case-insensitive)', { AND: [{ field: 'metadata.color', operator: 'regex', value: '^r' }] }],
  ['regex (case-sensitive)', { AND: [{ field: 'metadata.color', operator: 'regex', value: '^R' }], case_sensitive: true }],
  ['regex with classes and counted repetition', { AND: [{ field: 'metadata.title', operator: 'regex', value: 'item 0[0-4]\\d{1} of' }] }],
  ['regex alternation anchored', { AND: [{ field: 'metadata.word', operator: 'regex', value: '^(?:al|GA)[a-z]+$' }] }],
  ['regex on a non-string field matches nothing', { AND: [{ field: 'metadata.rank', operator: 'regex', value: '1' }] }],
  ['regex on a missing field matches nothing', { AND: [{ field: 'metadata.nope', operator: 'regex', value: '.*' }] }],
  [
    'regex nested in OR and NOT, beside other operators',
    {
      AND: [{ field: 'namespace_id', operator: 'eq', value: 'ns_0' }],
      OR: [{ field: 'metadata.word', operator: 'regex', value: 'ta$' }, { field: 'metadata.rank', operator: 'lt', value: 20 }],
      NOT: [{ field: 'document_id', operator: 'regex', value: '7$' }],
    },
  ],
];

for (const graphThread of [true, false]) {
  describe(`in-process HNSW index filters, ${graphThread ? 'graphs in the graph thread' : 'graphs in the calling thread'}`, () => {
    const DIMS = 8;
    const N = 300;
    const vectors = randomVectors(N, DIMS, 31);
    const records: VectorRecord[] = vectors.map((vector, i) => ({ id: `r${i}`, vector, payload: payloadFor(i) }));
    const prefix = `g${randomBytes(4).toString('hex')}`;
    let n = 0;
    const fresh = () => `${prefix}_${++n}`;
    let handle: DatabaseHandle;
    let lanceDir: string;
    let index: HnswMemoryIndex;
    let shared: string;
    /**
     * The durable engine is LanceDB (PostgreSQL without pgvector): it has no `regex`, so what it answers itself
     * (count, deleteWhere) refuses such filters with a 422, while the graph still answers searches.
     */
    let lance = false;
    const hasRegex = (filter: ParsedFilter) => JSON.stringify(filter).includes('"operator":"regex"');

    beforeAll(async () => {
      handle = await database();
      lance = !handle.hasPgvector;
      lanceDir = await mkdtemp(path.join(tmpdir(), 'tessera-graph-filters-'));
      const opened = createVectorIndex({
        engine: handle.hasPgvector ? 'pgvector' : 'lancedb',
        db: handle.db,
        lanceDir,
        memory: { db: handle.db, lockDuringWrites: handle.kind === 'postgres', graphThread },
      });
      if (!(opened instanceof HnswMemoryIndex)) throw new Error('expected the in-process index');
      index = opened;
      shared = fresh();
      await index.ensureIndex({ name: shared, dims: DIMS, distance: 'cosine' });
      await index.upsert(shared, records);
    });
    afterAll(async () => {
      await index?.close();
      await handle?.close();
      if (lanceDir) await rm(lanceDir, { recursive: true, force: true });
    });

    /** The ids the graph answers for `filter`, checked against matchesFilter and the durable engine's count. */
    const expectSelects = async (name: string, filter: ParsedFilter, all: readonly VectorRecord[]) => {
      const expected = all.filter((r) => matchesFilter(filter, r.payload)).map((r) => r.id).sort();
      const hits = await index.search(name, { vector: all[0]!.vector, limit: all.length, filter });
      // Answered by the graph (in its thread when there is one), not by the durable engine after a failure.
      expect(index.lastPlan(name)).toBeDefined();
      expect(index.graphThread?.starts ?? 0).toBe(graphThread ? 1 : 0);
      expect(hits.map((h) => h.id).sort()).toEqual(expected);
      if (lance && hasRegex(filter)) await expect(index.count(name, filter)).rejects.toThrow(/not supported by the LanceDB/);
      else expect(await index.count(name, filter)).toBe(expected.length);
      return expected;
    };

    for (const [label, input] of [...REGEX_FILTERS, ...FILTERS]) {
      it(`filter: ${label} selects what matchesFilter selects`, async () => {
        await expectSelects(shared, parseFilter(input), records);
      });
    }

    it('the regex filters are not vacuous: each selects some records and not all (but those that must select none)', () => {
      for (const [label, input] of REGEX_FILTERS) {
        const count = records.filter((r) => matchesFilter(parseFilter(input), r.payload)).length;
        if (label.includes('matches nothing')) expect(count, label).toBe(0);
        else {
          expect(count, label).toBeGreaterThan(0);
          expect(count, label).toBeLessThan(N);
        }
      }
    });

    it('a hand-built regex condition (no compiled pattern), and one under a group of another case sensitivity', async () => {
      const handBuilt: ParsedFilter = {
        root: { kind: 'group', and: [{ kind: 'condition', field: 'metadata.word', operator: 'regex', value: '^(al|ga)' }], or: [], not: [] },
        caseSensitive: true,
      };
      expect((await expectSelects(shared, handBuilt, records)).length).toBeGreaterThan(0);
      // As feature_search ANDs filters: the case-sensitive pattern is recompiled for the combined, insensitive filter.
      const sensitive = parseFilter({ AND: [{ field: 'metadata.color', operator: 'regex', value: '^R' }], case_sensitive: true });
      const combined: ParsedFilter = { root: { kind: 'group', and: [sensitive.root], or: [], not: [] }, caseSensitive: false };
      const selected = await expectSelects(shared, combined, records);
      expect(selected.length).toBeGreaterThan(records.filter((r) => matchesFilter(sensitive, r.payload)).length);
    });

    it('a hand-built pattern outside the dialect is refused with a 422, as in the calling thread', async () => {
      const bad: ParsedFilter = {
        root: { kind: 'group', and: [{ kind: 'condition', field: 'metadata.word', operator: 'regex', value: '(?<w>a)\\k<w>' }], or: [], not: [] },
        caseSensitive: false,
      };
      await expect(index.search(shared, { vector: records[0]!.vector, limit: 5, filter: bad })).rejects.toBeInstanceOf(RequestValidationError);
    });

    it('deleteWhere with a regex removes exactly the matching vectors from the graph and the store', async () => {
      const name = fresh();
      await index.ensureIndex({ name, dims: DIMS, distance: 'cosine' });
      await index.upsert(name, records);
      const filter = parseFilter({ AND: [{ field: 'metadata.title', operator: 'regex', value: '^ITEM 1\\d\\d' }] });
      if (lance) {
        await expect(index.deleteWhere(name, filter)).rejects.toThrow(/not supported by the LanceDB/);
        return index.dropIndex(name);
      }
      const doomed = records.filter((r) => matchesFilter(filter, r.payload));
      expect(doomed.length).toBeGreaterThan(0);
      expect(await index.deleteWhere(name, filter)).toBe(doomed.length);
      const kept = records.filter((r) => !matchesFilter(filter, r.payload));
      const hits = await index.search(name, { vector: records[0]!.vector, limit: N });
      expect(hits.map((h) => h.id).sort()).toEqual(kept.map((r) => r.id).sort());
      expect(await expectSelects(name, filter, kept)).toEqual([]);
      await index.dropIndex(name);
    });
  });
}
