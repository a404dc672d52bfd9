/**
 * The LanceDB engine: a LanceDB database in a folder (or any URI LanceDB accepts), one table per index
 * with `id` (utf8), `vector` (fixed-size list of float32) and `payload`.
 *
 * Payload storage: one JSON column (written as an `arrow.json` string, stored by Lance as its JSON
 * type), not flattened scalar columns. Payload fields vary per collection and over time; a JSON column
 * keeps one fixed schema (no schema evolution racing writers) while kernel/filters/lance.ts still
 * filters on any nested path with JSON types respected. Reads turn it back into text with
 * `json_extract(payload, '$')`.
 *
 * The index's distance lives in the table's schema metadata, so a reopened table searches the way it
 * was created. Small tables are searched exactly (LanceDB brute-forces unindexed data); an ANN index
 * (IVF_HNSW_SQ) is built once the table passes `annThreshold` rows, and rows added after it are still
 * searched exactly alongside the index until `optimize()` folds them in.
 */
import * as arrow from 'apache-arrow';
import type { Connection, Table } from '@lancedb/lancedb';
import { ConflictError, NotFoundError } from '../errors.js';
import type { ParsedFilter } from '../filters/filter.js';
import { filterToLance, lanceString } from '../filters/lance.js';
import {
  checkIndexName, checkLimit, checkSpec, checkVector, dedupeById, DISTANCES,
  type Distance, type IndexSpec, type VectorHit, type VectorIndex, type VectorQuery, type VectorRecord,
} from './vector-index.js';

const DISTANCE_KEY = 'tessera.distance';

/** LanceDB's `_distance` → our score (higher is more similar). l2 is squared; dot is `1 - a·b`. */
const SCORE: Record<Distance, (d: number) => number> = {
  cosine: (d) => 1 - d,
  l2: (d) => -Math.sqrt(Math.max(0, d)),
  dot: (d) => 1 - d,
};

export interface LanceDbOptions {
  /** Folder or URI of the LanceDB database. */
  uri: string;
  /** Build an ANN index once a table holds at least this many rows. */
  annThreshold?: number;
}

interface Opened {
  table: Table;
  spec: IndexSpec;
}

export class LanceDbIndex implements VectorIndex {
  readonly engine = 'lancedb' as const;
  private connection: Promise<Connection> | undefined;
  private readonly tables = new Map<string, Promise<Opened>>();
  /** Writes to one table are serialized: concurrent merge-inserts on one table conflict in Lance. */
  private readonly writeChains = new Map<string, Promise<unknown>>();
  private readonly annThreshold: number;

  constructor(private readonly options: LanceDbOptions) {
    this.annThreshold = options.annThreshold ?? 100_000;
  }

  private connect(): Promise<Connection> {
    // Read consistency 0: every read sees the latest committed version, including other processes' writes
    // (the default never looks again, so a second process sharing the folder would read stale data).
    this.connection ??= import('@lancedb/lancedb').then((lancedb) => lancedb.connect(this.options.uri, { readConsistencyInterval: 0 })).catch((err: unknown) => {
      this.connection = undefined;
      throw err;
    });
    return this.connection;
  }

  private async exists(name: string): Promise<boolean> {
    const db = await this.connect();
    return (await db.tableNames()).includes(name);
  }

  private open(name: string): Promise<Opened> {
    checkIndexName(name);
    let opened = this.tables.get(name);
    if (!opened) {
      opened = (async () => {
        if (!(await this.exists(name))) throw new NotFoundError(`vector index '${name}' not found`, { name });
        const table = await (await this.connect()).openTable(name);
        return { table, spec: specOf(name, await table.schema()) };
      })();
      opened.catch(() => this.tables.delete(name));
      this.tables.set(name, opened);
    }
    return opened;
  }

  private serialize<T>(name: string, work: () => Promise<T>): Promise<T> {
    const previous = this.writeChains.get(name) ?? Promise.resolve();
    const next = previous.then(work, work);
    this.writeChains.set(name, next.catch(() => undefined));
    return next;
  }

  async ensureIndex(spec: IndexSpec): Promise<void> {
    checkSpec(spec);
    await this.serialize(spec.name, async () => {
      if (await this.exists(spec.name)) {
        const { spec: existing } = await this.open(spec.name);
        if (existing.dims !== spec.dims || existing.distance !== spec.distance) {
          throw new ConflictError(`vector index '${spec.name}' exists with dims ${existing.dims} and distance ${existing.distance}`, {
            name: spec.name, dims: existing.dims, distance: existing.distance,
          });
        }
        return;
      }
      const db = await this.connect();
      // existOk: another process may have created it between our check and here; it is re-checked below.
      const table = await db.createEmptyTable(spec.name, schemaFor(spec), { existOk: true });
      const actual = specOf(spec.name, await table.schema());
      if (actual.dims !== spec.dims || actual.distance !== spec.distance) {
        throw new ConflictError(`vector index '${spec.name}' exists with dims ${actual.dims} and distance ${actual.distance}`, {
          name: spec.name, dims: actual.dims, distance: actual.distance,
        });
      }
      this.tables.set(spec.name, Promise.resolve({ table, spec: actual }));
    });
  }

  async upsert(name: string, records: VectorRecord[]): Promise<void> {
    const { table, spec } = await this.open(name);
    const rows = dedupeById(records).map((r) => ({
      id: r.id,
      vector: checkVector(r.vector, spec.dims, r.id),
      payload: JSON.stringify(r.payload ?? {}),
    }));
    if (rows.length === 0) return;
    await this.serialize(name, async () => {
      for (let i = 0; i < rows.length; i += 5_000) {
        await table
          .mergeInsert('id')
          .whenMatchedUpdateAll()
          .whenNotMatchedInsertAll()
          .execute(batchFor(spec, rows.slice(i, i + 5_000)));
      }
      await this.maybeBuildAnnIndex(table, spec);
    });
  }

  private async maybeBuildAnnIndex(table: Table, spec: IndexSpec): Promise<void> {
    if ((await table.countRows()) < this.annThreshold) return;
    const indices = await table.listIndices();
    if (indices.some((ix) => ix.columns.includes('vector'))) return;
    const { Index } = await import('@lancedb/lancedb');
    await table.createIndex('vector', { config: Index.hnswSq({ distanceType: spec.distance }) });
  }

  async delete(name: string, ids: string[]): Promise<number> {
    const { table } = await this.open(name);
    if (ids.length === 0) return 0;
    const where = `id IN (${[...new Set(ids)].map(lanceString).join(', ')})`;
    return this.serialize(name, async () => (await table.delete(where)).numDeletedRows);
  }

  async deleteWhere(name: string, filter: ParsedFilter): Promise<number> {
    const { table } = await this.open(name);
    const where = compile(filter) ?? 'true';
    return this.serialize(name, async () => (await table.delete(where)).numDeletedRows);
  }

  async count(name: string, filter?: ParsedFilter): Promise<number> {
    const { table } = await this.open(name);
    const where = compile(filter);
    return where ? table.countRows(where) : table.countRows();
  }

  async get(name: string, ids: string[]): Promise<VectorRecord[]> {
    const { table } = await this.open(name);
    if (ids.length === 0) return [];
    const rows = await table
      .query()
      .where(`id IN (${[...new Set(ids)].map(lanceString).join(', ')})`)
      .select({ id: 'id', vector: 'vector', payload: "json_extract(payload, '$')" })
      .toArray();
    return rows.map((row: unknown) => {
      const r = row as { id: string; vector: Iterable<number>; payload: string | null };
      return { id: r.id, vector: Array.from(r.vector), payload: parsePayload(r.payload) };
    });
  }

  async search(name: string, query: VectorQuery): Promise<VectorHit[]> {
    const { table, spec } = await this.open(name);
    const limit = checkLimit(query.limit);
    const vector = checkVector(query.vector, spec.dims);
    let q = table
      .vectorSearch(vector)
      .distanceType(spec.distance)
      .limit(limit)
      // Re-rank the ANN candidates on full vectors (IVF_HNSW_SQ stores quantized ones).
      .refineFactor(4)
      .select({ id: 'id', payload: "json_extract(payload, '$')", _distance: '_distance' });
    const where = compile(query.filter);
    // Prefilter (the default): the filter picks the rows first, so a selective filter still fills the limit.
    if (where) q = q.where(where);
    const rows = await q.toArray();
    const score = SCORE[spec.distance];
    return rows.map((row: unknown) => {
      const r = row as { id: string; payload: string | null; _distance: number };
      return { id: r.id, score: score(r._distance), payload: parsePayload(r.payload) };
    });
  }

  /** The index's dims and distance (NotFound for an unknown index). */
  async describe(name: string): Promise<IndexSpec> {
    return { ...(await this.open(name)).spec };
  }

  /** Every record, a batch at a time (the in-process index loads itself from this). */
  async *scan(name: string): AsyncIterable<VectorRecord[]> {
    const { table } = await this.open(name);
    const query = table.query().select({ id: 'id', vector: 'vector', payload: "json_extract(payload, '$')" });
    for await (const batch of query) {
      const rows = batch.toArray() as unknown as Array<{ id: string; vector: Iterable<number>; payload: string | null }>;
      yield rows.map((r) => ({ id: String(r.id), vector: Float32Array.from(r.vector), payload: parsePayload(r.payload) }));
    }
  }

  async dropIndex(name: string): Promise<void> {
    checkIndexName(name);
    await this.serialize(name, async () => {
      const opened = this.tables.get(name);
      this.tables.delete(name);
      if (opened) await opened.then((o) => o.table.close()).catch(() => undefined);
      if (await this.exists(name)) await (await this.connect()).dropTable(name);
    });
  }

  async ping(): Promise<void> {
    await (await this.connect()).tableNames();
  }

  async close(): Promise<void> {
    for (const opened of this.tables.values()) await opened.then((o) => o.table.close()).catch(() => undefined);
    this.tables.clear();
    const connection = this.connection;
    this.connection = undefined;
    if (connection) (await connection.catch(() => undefined))?.close();
  }
}

function compile(filter: ParsedFilter | undefined): string | undefined {
  if (!filter) return undefined;
  return filterToLance(filter, 'payload');
}

function vectorType(dims: number): arrow.FixedSizeList<arrow.Float32> {
  return new arrow.FixedSizeList(dims, new arrow.Field('item', new arrow.Float32(), true));
}

function schemaFor(spec: IndexSpec): arrow.Schema {
  return new arrow.Schema(
    [
      new arrow.Field('id', new arrow.Utf8(), false),
      new arrow.Field('vector', vectorType(spec.dims), false),
      // `arrow.json` makes Lance store the column as JSON, which its json_* functions read.
      new arrow.Field('payload', new arrow.Utf8(), false, new Map([['ARROW:extension:name', 'arrow.json']])),
    ],
    new Map([[DISTANCE_KEY, spec.distance]]),
  );
}

/**
 * Builds the Arrow batch by hand: lancedb's makeArrowTable drops field metadata, and without the
 * `arrow.json` tag Lance refuses strings for the JSON column.
 */
function batchFor(spec: IndexSpec, rows: Array<{ id: string; vector: number[]; payload: string }>): arrow.Table {
  const schema = schemaFor(spec);
  const id = arrow.vectorFromArray(rows.map((r) => r.id), new arrow.Utf8());
  const vector = arrow.vectorFromArray(rows.map((r) => r.vector), vectorType(spec.dims));
  const payload = arrow.vectorFromArray(rows.map((r) => r.payload), new arrow.Utf8());
  const data = arrow.makeData({
    type: new arrow.Struct(schema.fields),
    length: rows.length,
    nullCount: 0,
    children: [id.data[0]!, vector.data[0]!, payload.data[0]!],
  });
  return new arrow.Table(schema, new arrow.RecordBatch(schema, data));
}

function specOf(name: string, schema: arrow.Schema): IndexSpec {
  const field = schema.fields.find((f) => f.name === 'vector');
  const type = field?.type as arrow.DataType | undefined;
  const dims = type && arrow.DataType.isFixedSizeList(type) ? type.listSize : Number.NaN;
  const distance = schema.metadata.get(DISTANCE_KEY) as Distance | undefined;
  if (!Number.isInteger(dims) || !distance || !DISTANCES.includes(distance)) {
    throw new ConflictError(`table '${name}' is not a Tessera vector index`, { name });
  }
  return { name, dims, distance };
}

function parsePayload(text: string | null): Record<string, unknown> {
  return text ? (JSON.parse(text) as Record<string, unknown>) : {};
}
