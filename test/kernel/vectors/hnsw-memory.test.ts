/**
 * The in-process HNSW index (kernel/vectors/hnsw-memory.ts) in front of the durable engine this backend
 * uses: pgvector in PGlite on the embedded default, LanceDB with the change log in PostgreSQL when
 * TEST_DATABASE_URL is set (this machine's PostgreSQL has no pgvector). Same contract as every engine,
 * then what only this layer must guarantee: the filter-aware planner's recall on the graph path, writes
 * seen across instances sharing one database, a rebuild from the store, and deletes that never return.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, inject, it, vi } from 'vitest';
import { loadConfig } from '../../../kernel/config.js';
import { openDatabase, type DatabaseHandle } from '../../../kernel/db/database.js';
import { parseFilter } from '../../../kernel/filters/filter.js';
import { createVectorIndex, HnswMemoryIndex } from '../../../kernel/vectors/index.js';
import { GraphThread } from '../../../kernel/vectors/graph-thread.js';
import { MemoryGraph, type MemoryGraphOptions } from '../../../kernel/vectors/memory-graph.js';
import type { VectorRecord } from '../../../kernel/vectors/vector-index.js';
import { bruteForce, clusteredVectors, recallAtK, runVectorIndexContract } from './contract.js';

const onPostgres = Boolean(process.env.TEST_DATABASE_URL);

async function database(): Promise<DatabaseHandle> {
  if (onPostgres) return openDatabase({ url: process.env.TEST_DATABASE_URL, inMemory: false, dataDir: '' });
  const template = inject('pgliteTemplate');
  return openDatabase({ url: undefined, inMemory: true, dataDir: '', ...(template ? { pgliteTemplate: new Blob([template]) } : {}) });
}

/** A store (database, plus a LanceDB folder on PostgreSQL) that several index instances can share. */
interface Store {
  handle: DatabaseHandle;
  lanceDir: string;
  open(graph?: Partial<MemoryGraphOptions>, buildInBackgroundAbove?: number): HnswMemoryIndex;
  close(): Promise<void>;
}

/** `graphThread`: graphs held by the graph thread (kernel/vectors/graph-thread.ts), as `tessera serve` does, or in this thread. */
async function openStore(graphThread: boolean): Promise<Store> {
  const handle = await database();
  const lanceDir = await mkdtemp(path.join(tmpdir(), 'tessera-hnsw-'));
  const opened: HnswMemoryIndex[] = [];
  return {
    handle,
    lanceDir,
    open(graph, buildInBackgroundAbove) {
      const index = createVectorIndex({
        engine: handle.hasPgvector ? 'pgvector' : 'lancedb',
        db: handle.db,
        lanceDir,
        memory: {
          db: handle.db, lockDuringWrites: handle.kind === 'postgres', graphThread, ...(graph ? { graph } : {}),
          ...(buildInBackgroundAbove !== undefined ? { buildInBackgroundAbove } : {}),
        },
      });
      if (!(index instanceof HnswMemoryIndex)) throw new Error('expected the in-process index');
      opened.push(index);
      return index;
    },
    async close() {
      for (const index of opened) await index.close();
      await handle.close();
      await rm(lanceDir, { recursive: true, force: true });
    },
  };
}

for (const graphThread of [true, false]) {
  const where = graphThread ? 'graphs in the graph thread' : 'graphs in the calling thread';

  runVectorIndexContract(`${onPostgres ? 'memory+lancedb (change log in PostgreSQL)' : 'memory+pgvector (PGlite)'}, ${where}`, async () => {
    const store = await openStore(graphThread);
    return { index: store.open(), cleanup: () => store.close() };
  });

  describe(`in-process HNSW index, ${where}`, () => {
    let store: Store;
    const prefix = `h${randomBytes(4).toString('hex')}`;
    let n = 0;
    const fresh = () => `${prefix}_${++n}`;
    const DIMS = 24;
    const N = 5_000;
    const vectors = clusteredVectors(N, DIMS, 21);
    const records: VectorRecord[] = vectors.map((vector, i) => ({ id: `d${i}`, vector, payload: { bucket: i % 100, tag: i % 2 === 0 ? 'even' : 'odd' } }));
    const queries = clusteredVectors(40, DIMS, 22);
    /** Small thresholds, so 5,000 vectors exercise the graph paths the planner takes at 100,000. */
    const graph: Partial<MemoryGraphOptions> = { exactScanMax: 100, exactScanRatio: 0.005 };

    beforeAll(async () => {
      store = await openStore(graphThread);
    });
    afterAll(async () => {
      await store?.close();
    });

    it('is on by default and VECTOR_MEMORY_INDEX=off turns it off', () => {
      expect(loadConfig({}).vectorMemoryIndex).toBe(true);
      expect(loadConfig({ VECTOR_MEMORY_INDEX: 'off' }).vectorMemoryIndex).toBe(false);
      const durable = createVectorIndex({ engine: 'lancedb', lanceDir: store.lanceDir });
      expect(durable.engine).toBe('lancedb');
      expect(store.open().engine).toBe(store.handle.hasPgvector ? 'memory+pgvector' : 'memory+lancedb');
    });

    it('keeps recall@10 ≥ 0.98 unfiltered and at 50%, 10% and 1% selectivity, choosing the plan by the filter', async () => {
      const index = store.open(graph);
      const name = fresh();
      await index.ensureIndex({ name, dims: DIMS, distance: 'cosine' });
      for (let i = 0; i < N; i += 1_000) await index.upsert(name, records.slice(i, i + 1_000));
      const cases: Array<[string, number, string]> = [['none', 100, 'ann'], ['50%', 50, 'ann_filtered'], ['10%', 10, 'ann_post_filtered'], ['1%', 1, 'exact']];
      for (const [label, share, plan] of cases) {
        const filter = share < 100 ? parseFilter({ AND: [{ field: 'bucket', operator: 'lt', value: share }] }) : undefined;
        const subset = records.filter((r) => (r.payload.bucket as number) < share);
        const found: string[][] = [];
        const truth: string[][] = [];
        for (const q of queries) {
          const hits = await index.search(name, { vector: q, limit: 10, ...(filter ? { filter } : {}) });
          expect(hits.every((h) => (h.payload.bucket as number) < share)).toBe(true);
          found.push(hits.map((h) => h.id));
          truth.push(bruteForce(subset, q, 'cosine', 10).map((e) => e.id));
        }
        expect(index.lastPlan(name), label).toBe(plan);
        expect(recallAtK(found, truth), `recall@10 with filter ${label}`).toBeGreaterThanOrEqual(0.98);
      }
      await index.dropIndex(name);
    });

    it('answers a narrow filter far from the query exactly, and walks with the filter when told to', async () => {
      // `low`: the 10% of vectors with the smallest first component, one region of the space. Queries far from
      // it find too few of them among their unfiltered neighbours: the matches are scanned exactly instead.
      const cut = [...vectors.map((v) => v[0]!)].sort((a, b) => a - b)[N / 10]!;
      const regional = records.map((r, i) => ({ ...r, payload: { ...r.payload, low: vectors[i]![0]! < cut } }));
      const filter = parseFilter({ AND: [{ field: 'low', operator: 'eq', value: true }] });
      const subset = regional.filter((r) => r.payload.low === true);
      const far = [...queries].sort((a, b) => b[0]! - a[0]!).slice(0, 10);
      for (const [options, plan] of [[graph, 'exact'], [{ ...graph, exactFallbackMax: 0 }, 'ann_filtered'], [{ ...graph, postFilterMaxShare: 0 }, 'ann_filtered']] as const) {
        const index = store.open(options);
        const name = fresh();
        await index.ensureIndex({ name, dims: DIMS, distance: 'cosine' });
        for (let i = 0; i < N; i += 1_000) await index.upsert(name, regional.slice(i, i + 1_000));
        const found: string[][] = [];
        const plans = new Set<string | undefined>();
        for (const q of far) {
          found.push((await index.search(name, { vector: q, limit: 10, filter })).map((h) => h.id));
          plans.add(index.lastPlan(name));
        }
        expect(plans, JSON.stringify(options)).toContain(plan);
        const truth = far.map((q) => bruteForce(subset, q, 'cosine', 10).map((e) => e.id));
        expect(recallAtK(found, truth), `recall@10, ${JSON.stringify(options)}`).toBeGreaterThanOrEqual(plan === 'exact' ? 1 : 0.98);
        await index.dropIndex(name);
      }
    });

    it('scans a small index exactly without a filter, and walks the graph past exactScanMaxUnfiltered', async () => {
      const index = store.open({ exactScanMaxUnfiltered: 1_000 });
      const name = fresh();
      await index.ensureIndex({ name, dims: DIMS, distance: 'cosine' });
      await index.upsert(name, records.slice(0, 1_000));
      await index.search(name, { vector: queries[0]!, limit: 10 });
      expect(index.lastPlan(name)).toBe('exact');
      await index.upsert(name, records.slice(1_000, 1_001));
      const hits = await index.search(name, { vector: queries[0]!, limit: 10 });
      expect(index.lastPlan(name)).toBe('ann');
      expect(hits.map((h) => h.id)).toEqual(bruteForce(records.slice(0, 1_001), queries[0]!, 'cosine', 10).map((e) => e.id));
      await index.dropIndex(name);
    });

    it('a write through one instance is seen by the next search of another sharing the database', async () => {
      const writer = store.open(graph);
      const reader = store.open(graph);
      const name = fresh();
      await writer.ensureIndex({ name, dims: DIMS, distance: 'cosine' });
      await writer.upsert(name, records.slice(0, 1_000));
      const q = queries[0]!;
      // The reader builds its graph from the store on its first search.
      expect((await reader.search(name, { vector: q, limit: 5 })).map((h) => h.id)).toEqual(bruteForce(records.slice(0, 1_000), q, 'cosine', 5).map((e) => e.id));

      // A new vector equal to the query: the best hit everywhere, at once.
      await writer.upsert(name, [{ id: 'new', vector: q, payload: { bucket: 0, tag: 'new' } }]);
      expect((await reader.search(name, { vector: q, limit: 1 }))[0]).toMatchObject({ id: 'new', payload: { tag: 'new' } });
      // A change made through the reader reaches the writer: the vector moves away, the payload changes.
      await reader.upsert(name, [{ id: 'new', vector: q.map((x) => -x), payload: { bucket: 99, tag: 'moved' } }]);
      const top = await writer.search(name, { vector: q, limit: 3 });
      expect(top.map((h) => h.id)).not.toContain('new');
      const moved = await writer.search(name, { vector: q, limit: 1, filter: parseFilter({ AND: [{ field: 'tag', operator: 'eq', value: 'moved' }] }) });
      expect(moved.map((h) => h.id)).toEqual(['new']);
      // A delete through one is gone from the other's next search, whatever the plan.
      await writer.delete(name, ['new', 'd1']);
      const everything = await reader.search(name, { vector: q, limit: 1_000 });
      expect(everything.map((h) => h.id)).not.toContain('new');
      expect(everything.map((h) => h.id)).not.toContain('d1');
      expect(everything).toHaveLength(999);
      // Dropped through one: the other answers NotFound, and a new index of that name starts empty there.
      await writer.dropIndex(name);
      await expect(reader.search(name, { vector: q, limit: 1 })).rejects.toThrow(/not found/);
      await writer.ensureIndex({ name, dims: DIMS, distance: 'cosine' });
      await writer.upsert(name, [{ id: 'only', vector: q, payload: {} }]);
      expect((await reader.search(name, { vector: q, limit: 10 })).map((h) => h.id)).toEqual(['only']);
      await writer.dropIndex(name);
    });

    it('searches the graph it holds while the change-log head is read, not after (one round trip off a search)', async () => {
      const index = store.open(graph);
      const name = fresh();
      await index.ensureIndex({ name, dims: DIMS, distance: 'cosine' });
      await index.upsert(name, records.slice(0, 500));
      const q = queries[1]!;
      await index.search(name, { vector: q, limit: 5 });
      const order: string[] = [];
      const isHead = (sql: string) => /from "?vector_log_versions"? where key/i.test(sql);
      const sent = (q: { sql: string }) => void (isHead(q.sql) && order.push('head sent'));
      const answered = (_: unknown, q: { sql: string }) => void (isHead(q.sql) && order.push('head answered'));
      // Where the walk starts: in this thread, or the moment the search is posted to the graph thread.
      const spy = graphThread
        ? (() => {
            const original = GraphThread.prototype.call;
            return vi.spyOn(GraphThread.prototype, 'call').mockImplementation(function (this: GraphThread, ...args: Parameters<GraphThread['call']>) {
              if (args[1].op === 'search') order.push('graph searched');
              return original.apply(this, args);
            });
          })()
        : (() => {
            const original = MemoryGraph.prototype.search;
            return vi.spyOn(MemoryGraph.prototype, 'search').mockImplementation(function (this: MemoryGraph, ...args: Parameters<MemoryGraph['search']>) {
              order.push('graph searched');
              return original.apply(this, args);
            });
          })();
      store.handle.db.on('query', sent).on('query-response', answered);
      try {
        const hits = await index.search(name, { vector: q, limit: 5 });
        expect(hits.map((h) => h.id)).toEqual(bruteForce(records.slice(0, 500), q, 'cosine', 5).map((e) => e.id));
      } finally {
        store.handle.db.off('query', sent).off('query-response', answered);
        spy.mockRestore();
      }
      // The embedded default without other writers reads no head at all; everywhere else, one, beside the walk.
      if (!order.includes('head sent')) return expect(order).toEqual(['graph searched']);
      expect([...order].sort()).toEqual(['graph searched', 'head answered', 'head sent']);
      expect(order.indexOf('graph searched')).toBeLessThan(order.indexOf('head answered'));
    });

    it('rebuilds from the store after a restart, with the same answers', async () => {
      const before = store.open();
      const name = fresh();
      await before.ensureIndex({ name, dims: DIMS, distance: 'l2' });
      await before.upsert(name, records.slice(0, 2_000));
      const expected = await Promise.all(queries.slice(0, 5).map((q) => before.search(name, { vector: q, limit: 10 })));
      await before.close().catch(() => undefined);
      // A new process: nothing in memory; the first search builds the graph from the durable engine.
      const after = store.open();
      expect(after.memory(name)).toBeUndefined();
      for (const [i, q] of queries.slice(0, 5).entries()) {
        const hits = await after.search(name, { vector: q, limit: 10 });
        expect(hits.map((h) => h.id)).toEqual(expected[i]!.map((h) => h.id));
        expect(hits.map((h) => h.payload)).toEqual(expected[i]!.map((h) => h.payload));
      }
      expect(after.memory(name)?.vectors).toBe(2_000);
      await after.dropIndex(name);
    });

    it('after a restart, a large index answers from the durable engine while its graph builds, then from the graph, writes made meanwhile included', async () => {
      const before = store.open();
      const name = fresh();
      await before.ensureIndex({ name, dims: DIMS, distance: 'cosine' });
      await before.upsert(name, records.slice(0, 1_500));
      const expected = await Promise.all(queries.slice(0, 5).map((q) => before.search(name, { vector: q, limit: 10 })));
      await before.close().catch(() => undefined);

      const after = store.open(undefined, 1_000);
      // The first search starts the build and is answered by the durable engine, with the same hits.
      const first = await after.search(name, { vector: queries[0]!, limit: 10 });
      expect(first.map((h) => h.id)).toEqual(expected[0]!.map((h) => h.id));
      expect(after.memory(name)).toBeUndefined();
      // A write while the graph builds is in it once it is in use.
      await after.upsert(name, [{ id: 'late', vector: queries[7]!, payload: { bucket: 1 } }]);
      await after.delete(name, ['d3']);
      await after.built(name);
      expect(after.memory(name)?.vectors).toBe(1_500);
      expect((await after.search(name, { vector: queries[7]!, limit: 1 }))[0]!.id).toBe('late');
      expect(after.lastPlan(name)).toBe('ann');
      const again = await Promise.all(queries.slice(1, 5).map((q) => after.search(name, { vector: q, limit: 10 })));
      for (const [i, hits] of again.entries()) {
        const ids = hits.map((h) => h.id);
        expect(ids).not.toContain('d3');
        expect(ids.filter((id) => id !== 'late')).toEqual(expected[i + 1]!.map((h) => h.id).filter((id) => id !== 'd3').slice(0, ids.filter((id) => id !== 'late').length));
      }
      await after.dropIndex(name);
    });

    it.runIf(graphThread)('loses its graphs with their thread: the durable engine answers, then a new graph in a new thread', async () => {
      const index = store.open();
      const name = fresh();
      await index.ensureIndex({ name, dims: DIMS, distance: 'cosine' });
      await index.upsert(name, records.slice(0, 1_000));
      const expected = await Promise.all(queries.slice(0, 5).map((q) => index.search(name, { vector: q, limit: 10 })));
      expect(index.memory(name)?.vectors).toBe(1_000);
      expect(index.graphThread!.starts).toBe(1);
      await index.graphThread!.terminate();
      // Writes after the crash are stored, and every answer still has them.
      await index.upsert(name, [{ id: 'after-crash', vector: queries[9]!, payload: { bucket: 1 } }]);
      expect((await index.search(name, { vector: queries[9]!, limit: 1 }))[0]!.id).toBe('after-crash');
      for (const [i, q] of queries.slice(0, 5).entries()) {
        const hits = await index.search(name, { vector: q, limit: 10 });
        expect(hits.map((h) => h.id).filter((id) => id !== 'after-crash')).toEqual(expected[i]!.map((h) => h.id).slice(0, hits.filter((h) => h.id !== 'after-crash').length));
      }
      // The graph was rebuilt (in a new thread) from the store, the write made after the crash included.
      expect(index.memory(name)?.vectors).toBe(1_001);
      expect(index.graphThread!.starts).toBe(2);
      expect(index.lastPlan(name)).toBe('ann');
      await index.dropIndex(name);
    });

    it('closes while a background build runs, without an error left behind', async () => {
      const before = store.open();
      const name = fresh();
      await before.ensureIndex({ name, dims: DIMS, distance: 'cosine' });
      await before.upsert(name, records.slice(0, 1_500));
      await before.close().catch(() => undefined);
      const after = store.open(undefined, 100);
      await after.search(name, { vector: queries[0]!, limit: 3 });
      await after.close();
      expect(after.memory(name)).toBeUndefined();
      const cleanup = store.open();
      await cleanup.dropIndex(name);
    });

    it('deleted vectors never come back: not by delete, deleteWhere, re-search, or rebuild', async () => {
      const index = store.open(graph);
      const name = fresh();
      await index.ensureIndex({ name, dims: DIMS, distance: 'cosine' });
      await index.upsert(name, records.slice(0, 3_000));
      const deletedIds = new Set(records.slice(0, 3_000).filter((_, i) => i % 3 === 0).map((r) => r.id));
      await index.delete(name, [...deletedIds]);
      const odd = parseFilter({ AND: [{ field: 'tag', operator: 'eq', value: 'odd' }, { field: 'bucket', operator: 'lt', value: 20 }] });
      const removed = await index.deleteWhere(name, odd);
      expect(removed).toBeGreaterThan(0);
      const gone = (id: string, payload: Record<string, unknown>) => deletedIds.has(id) || (payload.tag === 'odd' && (payload.bucket as number) < 20);
      const check = async (searcher: HnswMemoryIndex) => {
        for (const q of queries.slice(0, 10)) {
          for (const filter of [undefined, parseFilter({ AND: [{ field: 'bucket', operator: 'lt', value: 50 }] }), parseFilter({ AND: [{ field: 'bucket', operator: 'eq', value: 8 }] })]) {
            const hits = await searcher.search(name, { vector: q, limit: 50, ...(filter ? { filter } : {}) });
            expect(hits.length).toBeGreaterThan(0);
            for (const h of hits) expect(gone(h.id, records[Number(h.id.slice(1))]!.payload), h.id).toBe(false);
          }
        }
      };
      await check(index);
      // Another instance (a restart, or another API process) builds its graph from the store without them.
      await check(store.open(graph));
      // And re-adding one brings exactly that one back.
      await index.upsert(name, [records[0]!]);
      expect((await index.search(name, { vector: records[0]!.vector, limit: 1 }))[0]?.id).toBe('d0');
      await index.dropIndex(name);
    });
  });
}
