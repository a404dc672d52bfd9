/**
 * The pgvector engine: one table per index in the `tessera_vectors` schema (so index names can never
 * collide with the service's own tables), `id text primary key, embedding vector(d), payload jsonb`,
 * with an HNSW index using the distance's operator class.
 *
 * Filters compile through kernel/filters/sql.ts. Every filter field is a path into `payload`
 * (`metadata.category` → `payload #> '{metadata,category}'`), the same reading matchesFilter gives.
 *
 * Search is planned per query: when the rows a filter selects number at most `exactScanThreshold`, an
 * exact scan ordered by distance is both fast and perfect (recall 1.0); above it the HNSW index runs
 * with iterative scans, so a filter that rejects many candidates still fills the limit.
 */
import type { Knex } from 'knex';
import os from 'node:os';
import { ConflictError, NotFoundError } from '../errors.js';
import type { Database } from '../db/database.js';
import type { ParsedFilter } from '../filters/filter.js';
import { filterToSql, type FieldResolver } from '../filters/sql.js';
import {
  checkFloats, checkIndexName, checkLimit, checkSpec, dedupeById,
  type Distance, type IndexSpec, type VectorHit, type VectorIndex, type VectorQuery, type VectorRecord,
} from './vector-index.js';

const SCHEMA = 'tessera_vectors';
const REGISTRY = `"${SCHEMA}"."indexes"`;

/** Operator, HNSW operator class, and the score (higher is more similar) from the operator's distance. */
const OPS: Record<Distance, { op: string; opclass: string; score: (d: number) => number }> = {
  cosine: { op: '<=>', opclass: 'vector_cosine_ops', score: (d) => 1 - d },
  l2: { op: '<->', opclass: 'vector_l2_ops', score: (d) => -d },
  // `<#>` is the negative inner product, so ascending order is descending similarity.
  dot: { op: '<#>', opclass: 'vector_ip_ops', score: (d) => -d },
};

/** Every field is a path into the payload column (FIELD paths are [A-Za-z0-9_] segments, checked by the parser). */
export const payloadFieldResolver: FieldResolver = (field) => {
  if (!/^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z0-9_]+)*$/.test(field)) return undefined;
  return { expr: `("payload" #> '{${field.split('.').join(',')}}')`, kind: 'jsonb' };
};

export interface PgvectorOptions {
  /** At most this many selected rows → exact scan; more → HNSW. */
  exactScanThreshold?: number;
  /** Floor for `hnsw.ef_search`; the query uses max(this, 2 × limit). */
  efSearch?: number;
  /**
   * Build a table's HNSW index once it holds more rows than this (default `exactScanThreshold`). The
   * in-process index in front of PGlite sets its memory budget here: every search it can hold is answered
   * from memory, and pgvector's HNSW, maintained row by row in WASM, would cost most of each write (a
   * bulk load at 100,000 vectors ran at a third of the speed) for searches it never serves.
   */
  annIndexAbove?: number;
}

export type SearchPlan = 'exact' | 'ann';

export class PgvectorIndex implements VectorIndex {
  readonly engine = 'pgvector' as const;
  private readonly specs = new Map<string, IndexSpec>();
  private readonly exactScanThreshold: number;
  private readonly efSearch: number;
  private readonly annIndexAbove: number;
  private ready: Promise<void> | undefined;

  /** Tables known to have their HNSW index, and rows inserted since their size was last checked. */
  private readonly indexed = new Set<string>();
  private readonly sinceCheck = new Map<string, number>();

  constructor(private readonly db: Database, options: PgvectorOptions = {}) {
    this.exactScanThreshold = options.exactScanThreshold ?? 20_000;
    this.efSearch = options.efSearch ?? 100;
    this.annIndexAbove = Math.max(this.exactScanThreshold, options.annIndexAbove ?? this.exactScanThreshold);
  }

  private table(name: string): string {
    return `"${SCHEMA}"."${checkIndexName(name)}"`;
  }

  private setup(): Promise<void> {
    this.ready ??= (async () => {
      await this.db.raw(`create schema if not exists "${SCHEMA}"`);
      // The registry remembers each index's distance (the column type only knows dims).
      await this.db.raw(
        `create table if not exists ${REGISTRY} (name text primary key, dims integer not null, distance text not null, created_at timestamptz not null default now())`,
      );
    })().catch((err: unknown) => {
      this.ready = undefined;
      throw err;
    });
    return this.ready;
  }

  async ensureIndex(spec: IndexSpec): Promise<void> {
    checkSpec(spec);
    await this.setup();
    const { opclass } = OPS[spec.distance];
    await this.db.transaction(async (trx) => {
      // Two services creating the same index at once: the second waits, then sees the first's row.
      await trx.raw('select pg_advisory_xact_lock(hashtext(?))', [`tessera_vectors:${spec.name}`]);
      const existing = await trx.raw<{ rows: Array<{ dims: number; distance: Distance }> }>(
        `select dims, distance from ${REGISTRY} where name = ?`, [spec.name],
      );
      const row = existing.rows[0];
      if (row) {
        if (row.dims !== spec.dims || row.distance !== spec.distance) {
          throw new ConflictError(`vector index '${spec.name}' exists with dims ${row.dims} and distance ${row.distance}`, {
            name: spec.name, dims: row.dims, distance: row.distance,
          });
        }
        return;
      }
      const table = this.table(spec.name);
      await trx.raw(`create table ${table} (id text primary key, embedding vector(${spec.dims}) not null, payload jsonb not null default '{}')`);
      // No HNSW yet: while a table holds at most `exactScanThreshold` rows every search is an exact scan
      // anyway, and maintaining the graph row by row costs far more than building it once (15× in PGlite).
      // `upsert` builds it when the table outgrows the threshold.
      await trx.raw(`insert into ${REGISTRY} (name, dims, distance) values (?, ?, ?)`, [spec.name, spec.dims, spec.distance]);
    });
    this.specs.set(spec.name, { ...spec });
  }

  private async spec(name: string): Promise<IndexSpec> {
    checkIndexName(name);
    const cached = this.specs.get(name);
    if (cached) return cached;
    await this.setup();
    const res = await this.db.raw<{ rows: Array<{ dims: number; distance: Distance }> }>(
      `select dims, distance from ${REGISTRY} where name = ?`, [name],
    );
    const row = res.rows[0];
    if (!row) throw new NotFoundError(`vector index '${name}' not found`, { name });
    const spec: IndexSpec = { name, dims: row.dims, distance: row.distance };
    this.specs.set(name, spec);
    return spec;
  }

  /**
   * Builds the table's HNSW index once it holds more than `annIndexAbove` rows (pgvector's HNSW takes at
   * most 2000 dims; above that every search stays exact). Counted at most once per `annIndexAbove / 4`
   * inserted rows per process, so the check costs nothing on the write path.
   */
  private async buildAnnIndexWhenLarge(spec: IndexSpec, inserted: number): Promise<void> {
    if (spec.dims > 2000 || this.indexed.has(spec.name)) return;
    const pending = (this.sinceCheck.get(spec.name) ?? this.annIndexAbove) + inserted;
    if (pending < Math.max(1, Math.floor(this.annIndexAbove / 4))) {
      this.sinceCheck.set(spec.name, pending);
      return;
    }
    this.sinceCheck.set(spec.name, 0);
    const table = this.table(spec.name);
    const exists = await this.db.raw<{ rows: unknown[] }>(
      `select 1 from pg_indexes where schemaname = ? and tablename = ? and indexdef ilike '%using hnsw%'`, [SCHEMA, spec.name],
    );
    if (exists.rows.length > 0) {
      this.indexed.add(spec.name);
      return;
    }
    const counted = await this.db.raw<{ rows: Array<{ n: number | string }> }>(
      `select count(*) as n from (select 1 from ${table} limit ${this.annIndexAbove + 1}) s`,
    );
    if (Number(counted.rows[0]?.n ?? 0) <= this.annIndexAbove) return;
    await this.db.transaction(async (trx) => {
      await trx.raw('select pg_advisory_xact_lock(hashtext(?))', [`tessera_vectors:${spec.name}`]);
      await trx.raw(`create index if not exists "${spec.name}_hnsw" on ${table} using hnsw (embedding ${OPS[spec.distance].opclass})`);
    });
    this.indexed.add(spec.name);
  }

  async upsert(name: string, records: VectorRecord[]): Promise<void> {
    const spec = await this.spec(name);
    const rows = this.rows(spec, records);
    for (let i = 0; i < rows.length; i += UPSERT_ROWS) {
      const { sql, bindings } = this.upsertSql(name, rows.slice(i, i + UPSERT_ROWS));
      await this.db.raw(sql, bindings as Knex.RawBinding[]);
    }
    await this.buildAnnIndexWhenLarge(spec, rows.length);
  }

  /**
   * The upsert of at most UPSERT_ROWS records as one statement, for a caller that runs it inside a statement
   * of its own (hnsw-memory.ts: with its change-log record, one round trip on the embedded database);
   * undefined for more records. `written` must run once the statement ran.
   */
  async upsertStatement(name: string, records: VectorRecord[]): Promise<{ sql: string; bindings: unknown[]; written(): Promise<void> } | undefined> {
    const spec = await this.spec(name);
    const rows = this.rows(spec, records);
    if (rows.length > UPSERT_ROWS) return undefined;
    return { ...this.upsertSql(name, rows), written: () => this.buildAnnIndexWhenLarge(spec, rows.length) };
  }

  private rows(spec: IndexSpec, records: VectorRecord[]): Array<{ id: string; embedding: Buffer; payload: string }> {
    return dedupeById(records).map((r) => ({
      id: r.id,
      embedding: vectorBytes(checkFloats(r.vector, spec.dims, r.id)),
      payload: JSON.stringify(r.payload ?? {}),
    }));
  }

  private upsertSql(name: string, rows: ReadonlyArray<{ id: string; embedding: Buffer; payload: string }>): { sql: string; bindings: unknown[] } {
    return {
      sql: `insert into ${this.table(name)} (id, embedding, payload) values ${rows.map(() => '(?, ?::vector, ?::jsonb)').join(', ')}
         on conflict (id) do update set embedding = excluded.embedding, payload = excluded.payload`,
      bindings: rows.flatMap((r) => [r.id, r.embedding, r.payload]),
    };
  }

  async delete(name: string, ids: string[]): Promise<number> {
    await this.spec(name);
    if (ids.length === 0) return 0;
    // Raw SQL: knex's delete() returns a count on pg but a result object through knex-pglite.
    const unique = [...new Set(ids)];
    const res = await this.db.raw<{ rowCount: number | null }>(
      `delete from ${this.table(name)} where id in (${unique.map(() => '?').join(', ')})`, unique,
    );
    return Number(res.rowCount ?? 0);
  }

  async deleteWhere(name: string, filter: ParsedFilter): Promise<number> {
    await this.spec(name);
    const where = compile(filter);
    const res = await this.db.raw<{ rowCount: number | null }>(`delete from ${this.table(name)} where ${where.text}`, where.bindings);
    return Number(res.rowCount ?? 0);
  }

  async count(name: string, filter?: ParsedFilter): Promise<number> {
    await this.spec(name);
    const where = compile(filter);
    const res = await this.db.raw<{ rows: Array<{ n: number | string }> }>(
      `select count(*) as n from ${this.table(name)} where ${where.text}`, where.bindings,
    );
    return Number(res.rows[0]?.n ?? 0);
  }

  async get(name: string, ids: string[]): Promise<VectorRecord[]> {
    await this.spec(name);
    if (ids.length === 0) return [];
    const rows = await this.db
      .withSchema(SCHEMA)
      .table(name)
      .select('id', this.db.raw(`${VECTOR_AS_HEX} as embedding`), 'payload')
      .whereIn('id', ids);
    return (rows as Array<{ id: string; embedding: string; payload: Record<string, unknown> | string }>).map((r) => ({
      id: r.id,
      vector: vectorFromHex(r.embedding),
      payload: typeof r.payload === 'string' ? (JSON.parse(r.payload) as Record<string, unknown>) : r.payload,
    }));
  }

  /**
   * Exact when the filter (or the whole table) selects at most `exactScanThreshold` rows. The count
   * stops at threshold + 1, so deciding costs at most that many rows read.
   */
  async plan(name: string, filter?: ParsedFilter): Promise<SearchPlan> {
    const spec = await this.spec(name);
    if (spec.dims > 2000) return 'exact';
    const where = compile(filter);
    const res = await this.db.raw<{ rows: Array<{ n: number | string }> }>(
      `select count(*) as n from (select 1 from ${this.table(name)} where ${where.text} limit ${this.exactScanThreshold + 1}) s`,
      where.bindings,
    );
    return Number(res.rows[0]?.n ?? 0) <= this.exactScanThreshold ? 'exact' : 'ann';
  }

  async search(name: string, query: VectorQuery): Promise<VectorHit[]> {
    const spec = await this.spec(name);
    const limit = checkLimit(query.limit);
    const vector = vectorBytes(checkFloats(query.vector, spec.dims));
    const where = compile(query.filter);
    const plan = await this.plan(name, query.filter);
    const { op, score } = OPS[spec.distance];
    const distance = `(embedding ${op} ?::vector)`;
    const rows = await this.db.transaction(async (trx) => {
      if (plan === 'exact') {
        // Keep the planner off the HNSW index: over a small subset a sequential scan is exact and cheap.
        await trx.raw('set local enable_indexscan = off');
      } else {
        await trx.raw(`set local hnsw.ef_search = ${Math.min(1000, Math.max(this.efSearch, 2 * limit))}`);
        // Keep walking the graph until `limit` rows pass the filter (pgvector ≥ 0.8).
        await trx.raw('set local hnsw.iterative_scan = relaxed_order');
      }
      // relaxed_order may return slightly out of order: the outer query sorts exactly.
      const res = await trx.raw<{ rows: Array<{ id: string; d: number; payload: Record<string, unknown> | string }> }>(
        `select id, d, payload from (
           select id, ${distance} as d, payload from ${this.table(name)} where ${where.text} order by ${distance} limit ${limit}
         ) s order by d, id`,
        [vector, ...where.bindings, vector],
      );
      return res.rows;
    });
    return rows.map((r) => ({
      id: r.id,
      score: score(Number(r.d)),
      payload: typeof r.payload === 'string' ? (JSON.parse(r.payload) as Record<string, unknown>) : r.payload,
    }));
  }

  /** The index's dims and distance (NotFound for an unknown index). */
  describe(name: string): Promise<IndexSpec> {
    return this.spec(name);
  }

  /** Every record, in pages of `pageSize` ordered by id (the in-process index loads itself from this). */
  async *scan(name: string, pageSize = 5_000): AsyncIterable<VectorRecord[]> {
    await this.spec(name);
    let after = '';
    for (;;) {
      const res = await this.db.raw<{ rows: Array<{ id: string; embedding: string; payload: string }> }>(
        `select id, ${VECTOR_AS_HEX} as embedding, payload::text as payload from ${this.table(name)} where id > ? order by id limit ${pageSize}`,
        [after],
      );
      if (res.rows.length === 0) return;
      yield res.rows.map((r) => ({ id: r.id, vector: vectorFromHex(r.embedding), payload: JSON.parse(r.payload) as Record<string, unknown> }));
      after = res.rows[res.rows.length - 1]!.id;
      if (res.rows.length < pageSize) return;
    }
  }

  async dropIndex(name: string): Promise<void> {
    checkIndexName(name);
    await this.setup();
    await this.db.transaction(async (trx) => {
      await trx.raw('select pg_advisory_xact_lock(hashtext(?))', [`tessera_vectors:${name}`]);
      await trx.raw(`drop table if exists ${this.table(name)}`);
      await trx.raw(`delete from ${REGISTRY} where name = ?`, [name]);
    });
    this.specs.delete(name);
    this.indexed.delete(name);
    this.sinceCheck.delete(name);
  }

  async ping(): Promise<void> {
    await this.db.raw(`select '[1]'::vector`);
  }

  /** The database belongs to the kernel, which closes it. */
  async close(): Promise<void> {
    this.specs.clear();
  }
}

/** Records one upsert statement writes at most. */
const UPSERT_ROWS = 500;

function compile(filter: ParsedFilter | undefined): { text: string; bindings: Array<string | number | boolean> } {
  if (!filter) return { text: 'true', bindings: [] };
  const sql = filterToSql(filter, payloadFieldResolver);
  return sql ? { text: sql.text, bindings: sql.bindings as Array<string | number | boolean> } : { text: 'true', bindings: [] };
}

/**
 * pgvector's binary form (what `vector_recv` reads and `vector_send` writes: int16 dims, int16 zero, then
 * big-endian float4s), bound as a parameter. A Buffer goes over the protocol in binary format, so the
 * database never parses text: in PGlite (WASM, where strtof runs on software long doubles) parsing one
 * 384-d text literal cost ~0.5 ms, ten times the rest of the insert.
 */
/** pgvector's binary form: dimensions and a reserved word (int16 each), then big-endian float32s. */
function vectorBytes(floats: Float32Array): Buffer {
  const bytes = Buffer.allocUnsafe(4 + floats.byteLength);
  bytes.writeInt16BE(floats.length, 0);
  bytes.writeInt16BE(0, 2);
  Buffer.from(floats.buffer, floats.byteOffset, floats.byteLength).copy(bytes, 4);
  if (LITTLE_ENDIAN) bytes.subarray(4).swap32();
  return bytes;
}

const LITTLE_ENDIAN = os.endianness() === 'LE';

/** Selects a vector column as hex of its binary form (`vectorFromHex` reads it): no float formatting in the database. */
const VECTOR_AS_HEX = "encode(vector_send(embedding), 'hex')";

function vectorFromHex(hex: string): number[] {
  const bytes = Buffer.from(hex, 'hex');
  const dims = bytes.readInt16BE(0);
  const out = new Array<number>(dims);
  for (let i = 0; i < dims; i++) out[i] = bytes.readFloatBE(4 + 4 * i);
  return out;
}
