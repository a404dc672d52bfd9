/**
 * pgvector runs on PGlite started from the test kernel's prepared (migrated) template — the kernel's own
 * database, without booting the HTTP side. When TEST_DATABASE_URL points at a PostgreSQL without
 * pgvector (this machine's), there is no template and the engine runs on a fresh in-memory PGlite: the
 * pgvector SQL is the same either way (DESIGN.md, "Facts about this machine's packages").
 */
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { openDatabase, type DatabaseHandle } from '../../../kernel/db/database.js';
import { parseFilter } from '../../../kernel/filters/filter.js';
import { chooseEngine, createVectorIndex } from '../../../kernel/vectors/index.js';
import { PgvectorIndex } from '../../../kernel/vectors/pgvector.js';
import { bruteForce, payloadFor, randomVectors, runVectorIndexContract } from './contract.js';

/** Always PGlite (the only pgvector here); from the kernel's template when the global setup made one. */
async function pgvectorDatabase(): Promise<{ handle: DatabaseHandle; stop: () => Promise<void> }> {
  const template = inject('pgliteTemplate');
  const handle = await openDatabase({
    url: undefined,
    inMemory: true,
    dataDir: '',
    ...(template ? { pgliteTemplate: new Blob([template]) } : {}),
  });
  return { handle, stop: () => handle.close() };
}

runVectorIndexContract('pgvector', async () => {
  const { handle, stop } = await pgvectorDatabase();
  expect(chooseEngine({ hasPgvector: handle.hasPgvector })).toBe('pgvector');
  const index = createVectorIndex({ engine: 'pgvector', db: handle.db });
  return {
    index,
    cleanup: async () => {
      await index.close();
      await stop();
    },
  };
});

describe('pgvector planner', () => {
  let handle: DatabaseHandle;
  let stop: () => Promise<void>;
  beforeAll(async () => {
    ({ handle, stop } = await pgvectorDatabase());
  });
  afterAll(async () => {
    await stop?.();
  });

  it('uses HNSW above the threshold and an exact scan for a selective filter', async () => {
    {
      // A threshold of 50 rows makes a 400-row table "large" without 20 000 rows of setup.
      const index = new PgvectorIndex(handle.db, { exactScanThreshold: 50 });
      const name = 'planner_test';
      await index.ensureIndex({ name, dims: 16, distance: 'cosine' });
      const records = randomVectors(400, 16, 5).map((vector, i) => ({ id: `r${i}`, vector, payload: payloadFor(i) }));
      const hnsw = async () =>
        (await handle.db.raw<{ rows: unknown[] }>("select 1 from pg_indexes where schemaname = 'tessera_vectors' and tablename = ? and indexdef ilike '%using hnsw%'", [name])).rows.length;
      // Small tables are searched exactly, so no graph is kept up row by row ...
      await index.upsert(name, records.slice(0, 40));
      expect(await hnsw()).toBe(0);
      // ... until the table outgrows the exact-scan threshold: then the HNSW index is built once.
      await index.upsert(name, records.slice(40));
      expect(await hnsw()).toBe(1);

      expect(await index.plan(name)).toBe('ann');
      const q = randomVectors(1, 16, 6)[0]!;
      const hits = await index.search(name, { vector: q, limit: 10 });
      const truth = new Set(bruteForce(records, q, 'cosine', 10).map((e) => e.id));
      // HNSW is approximate: on 400 points with ef_search 100 it finds nearly all of the true top 10.
      expect(hits.filter((h) => truth.has(h.id)).length).toBeGreaterThanOrEqual(8);
      expect(hits.map((h) => h.score)).toEqual([...hits.map((h) => h.score)].sort((a, b) => b - a));

      const selective = parseFilter({ AND: [{ field: 'metadata.rank', operator: 'lt', value: 20 }] });
      expect(await index.plan(name, selective)).toBe('exact');
      const subset = records.filter((r) => (r.payload.metadata as { rank: number }).rank < 20);
      const filtered = await index.search(name, { vector: q, limit: 5, filter: selective });
      expect(filtered.map((h) => h.id)).toEqual(bruteForce(subset, q, 'cosine', 5).map((e) => e.id));

      // A broad filter goes through HNSW with iterative scans and still fills the limit.
      const broad = parseFilter({ AND: [{ field: 'namespace_id', operator: 'eq', value: 'ns_1' }] });
      expect(await index.plan(name, broad)).toBe('ann');
      const broadHits = await index.search(name, { vector: q, limit: 20, filter: broad });
      expect(broadHits).toHaveLength(20);
      expect(broadHits.every((h) => h.payload.namespace_id === 'ns_1')).toBe(true);
      await index.dropIndex(name);
    }
  });

  it('builds no HNSW below annIndexAbove (the in-process index serves those searches), exact scans answering meanwhile', async () => {
    const index = new PgvectorIndex(handle.db, { exactScanThreshold: 50, annIndexAbove: 300 });
    const name = 'ann_above_test';
    await index.ensureIndex({ name, dims: 16, distance: 'cosine' });
    const records = randomVectors(400, 16, 7).map((vector, i) => ({ id: `r${i}`, vector, payload: payloadFor(i) }));
    const hnsw = async () =>
      (await handle.db.raw<{ rows: unknown[] }>("select 1 from pg_indexes where schemaname = 'tessera_vectors' and tablename = ? and indexdef ilike '%using hnsw%'", [name])).rows.length;
    for (let i = 0; i < 280; i += 40) await index.upsert(name, records.slice(i, i + 40));
    expect(await hnsw()).toBe(0);
    // Without the graph, the whole-table plan is a scan ordered by distance: exact.
    const q = randomVectors(1, 16, 8)[0]!;
    const hits = await index.search(name, { vector: q, limit: 10 });
    expect(hits.map((h) => h.id)).toEqual(bruteForce(records.slice(0, 280), q, 'cosine', 10).map((e) => e.id));
    await index.upsert(name, records.slice(280));
    expect(await hnsw()).toBe(1);
    await index.dropIndex(name);
  });

  it('is built without HNSW below the memory budget when the in-process index fronts PGlite', () => {
    const fronted = createVectorIndex({ engine: 'pgvector', db: handle.db, memory: { db: handle.db, lockDuringWrites: false, sharedDatabase: false, maxVectors: 1234 } });
    const durable = (fronted as unknown as { durable: { annIndexAbove: number } }).durable;
    expect(durable.annIndexAbove).toBe(20_000);
    const large = createVectorIndex({ engine: 'pgvector', db: handle.db, memory: { db: handle.db, lockDuringWrites: false, sharedDatabase: false, maxVectors: 500_000 } });
    expect((large as unknown as { durable: { annIndexAbove: number } }).durable.annIndexAbove).toBe(500_000);
    const shared = createVectorIndex({ engine: 'pgvector', db: handle.db, memory: { db: handle.db, lockDuringWrites: true, sharedDatabase: true, maxVectors: 500_000 } });
    expect((shared as unknown as { durable: { annIndexAbove: number } }).durable.annIndexAbove).toBe(20_000);
  });

  it('index tables live in their own schema, so an index name cannot shadow a service table', async () => {
    {
      const index = new PgvectorIndex(handle.db);
      await index.ensureIndex({ name: 'organizations', dims: 2, distance: 'l2' });
      const res = await handle.db.raw<{ rows: Array<{ table_schema: string }> }>(
        "select table_schema from information_schema.tables where table_name = 'organizations' order by table_schema",
      );
      expect(res.rows.map((r) => r.table_schema)).toContain('tessera_vectors');
      await index.dropIndex('organizations');
    }
  });
});

if (process.env.TEST_DATABASE_URL) {
  describe('on PostgreSQL without pgvector', () => {
    it('the service database picks lancedb when it lacks the extension', async () => {
      const pgHandle = await openDatabase({ url: process.env.TEST_DATABASE_URL, inMemory: false, dataDir: '' });
      try {
        expect(chooseEngine({ hasPgvector: pgHandle.hasPgvector })).toBe(pgHandle.hasPgvector ? 'pgvector' : 'lancedb');
      } finally {
        await pgHandle.close();
      }
    });
  });
}
