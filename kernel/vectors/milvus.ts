/**
 * The Milvus engine: one Milvus collection per index (a feature index of naming.ts, prefixed so several
 * deployments or other applications can share one Milvus database). Fields:
 *
 * - `id` (VarChar primary key), `vector` (FloatVector, HNSW index with the index's metric),
 * - `payload` (VarChar): the payload's exact JSON text, returned as written (nulls included),
 * - `fields` / `fields_ci` (JSON): the filterable copies kernel/filters/milvus.ts compiles filters
 *   against (nulls dropped; strings lower-cased in `fields_ci`, since Milvus expressions have no lower()).
 *
 * Isolation works as in the other engines: organization_id and namespace_id are payload fields, and
 * every caller's search, count and delete carries them in its filter; the engine stores and filters
 * them like any other field. Metrics: cosine → COSINE (the score is the similarity), l2 → L2 (Milvus
 * returns the squared distance; the score is its negative root), dot → IP. Dims and distance are kept
 * in the collection's description so a reopened index searches the way it was created.
 *
 * Every read uses Strong consistency: a search right after an upsert sees it, as in the other engines.
 */
import type { ConsistencyLevelEnum, MilvusClient } from '@zilliz/milvus2-sdk-node';
import { ConflictError, InputError, NotFoundError, ServiceUnavailableError } from '../errors.js';
import type { ParsedFilter } from '../filters/filter.js';
import { filterDocuments, filterToMilvus, milvusString } from '../filters/milvus.js';
import {
  checkIndexName, checkLimit, checkSpec, checkVector, dedupeById, DISTANCES,
  type Distance, type IndexSpec, type VectorHit, type VectorIndex, type VectorQuery, type VectorRecord,
} from './vector-index.js';

export interface MilvusSettings {
  /** `host:port` or an http(s) URL of the Milvus proxy (MILVUS_ADDRESS). */
  address: string;
  /** API key or `user:password` (Zilliz Cloud, MILVUS_TOKEN). */
  token?: string | undefined;
  username?: string | undefined;
  password?: string | undefined;
  /** Milvus database (MILVUS_DATABASE); absent means `default`. */
  database?: string | undefined;
  /** Prepended to every index name to make the collection name (MILVUS_COLLECTION_PREFIX). */
  collectionPrefix?: string | undefined;
}

const METRIC: Record<Distance, string> = { cosine: 'COSINE', l2: 'L2', dot: 'IP' };
const SCORE: Record<Distance, (s: number) => number> = {
  cosine: (s) => s,
  l2: (s) => -Math.sqrt(Math.max(0, s)),
  dot: (s) => s,
};
const DESCRIPTION = 'tessera vector index ';
/** Milvus caps one query's limit (offset + limit) at 16,384 rows. */
const QUERY_PAGE = 16_384;
/** VarChar lengths; Milvus counts them in bytes of UTF-8. */
const MAX_ID_LENGTH = 512;
const SCAN_PAGE = 1_000;
const MAX_PAYLOAD_LENGTH = 65_535;
/** ConsistencyLevelEnum.Strong, written as its value: the SDK itself is loaded only on first use. */
const STRONG = 0 as ConsistencyLevelEnum;

interface Status {
  error_code: string | number;
  reason: string;
  code?: number;
}

/** The SDK reports most failures as a status, not a rejection; this turns them into errors. */
function check<T extends { status?: Status } | Status>(result: T, what: string): T {
  const status = ('status' in result ? result.status : result) as Status | undefined;
  if (status && status.error_code !== 'Success' && status.error_code !== 0) {
    throw new ServiceUnavailableError(`Milvus ${what} failed: ${status.reason || String(status.error_code)}`);
  }
  return result;
}

export class MilvusIndex implements VectorIndex {
  readonly engine = 'milvus' as const;
  private client: Promise<MilvusClient> | undefined;
  private readonly specs = new Map<string, Promise<IndexSpec>>();
  private readonly prefix: string;

  constructor(private readonly settings: MilvusSettings) {
    this.prefix = settings.collectionPrefix ?? 'tessera_';
    if (!/^[A-Za-z_][A-Za-z0-9_]{0,120}$/.test(this.prefix)) {
      throw new InputError(`MILVUS_COLLECTION_PREFIX must start with a letter or _ and hold only letters, digits and _, got "${this.prefix}"`);
    }
  }

  private connect(): Promise<MilvusClient> {
    // Loaded on first use: the gRPC client costs nothing to a deployment that never picks Milvus.
    this.client ??= import('@zilliz/milvus2-sdk-node')
      .then(({ MilvusClient: Client }) => {
        const s = this.settings;
        return new Client({
          address: s.address,
          ...(s.token ? { token: s.token } : {}),
          ...(s.username ? { username: s.username } : {}),
          ...(s.password ? { password: s.password } : {}),
          ...(s.database ? { database: s.database } : {}),
          logLevel: 'error',
        });
      })
      .catch((err: unknown) => {
        this.client = undefined;
        throw err;
      });
    return this.client;
  }

  private collection(name: string): string {
    return `${this.prefix}${checkIndexName(name)}`;
  }

  private async exists(name: string): Promise<boolean> {
    const client = await this.connect();
    const res = check(await client.hasCollection({ collection_name: this.collection(name) }), 'hasCollection');
    return Boolean(res.value);
  }

  private async readSpec(name: string): Promise<IndexSpec> {
    const client = await this.connect();
    const desc = check(await client.describeCollection({ collection_name: this.collection(name) }), 'describeCollection');
    const text = desc.schema?.description ?? '';
    const parsed = text.startsWith(DESCRIPTION) ? (JSON.parse(text.slice(DESCRIPTION.length)) as Partial<IndexSpec>) : {};
    if (!Number.isInteger(parsed.dims) || !parsed.distance || !DISTANCES.includes(parsed.distance)) {
      throw new ConflictError(`Milvus collection '${this.collection(name)}' is not a Tessera vector index`, { name });
    }
    return { name, dims: parsed.dims!, distance: parsed.distance };
  }

  /** The index's spec (NotFound for an unknown index); the collection is loaded for search on first open. */
  private open(name: string): Promise<IndexSpec> {
    checkIndexName(name);
    let opened = this.specs.get(name);
    if (!opened) {
      opened = (async () => {
        if (!(await this.exists(name))) throw new NotFoundError(`vector index '${name}' not found`, { name });
        const spec = await this.readSpec(name);
        const client = await this.connect();
        check(await client.loadCollection({ collection_name: this.collection(name) }), 'loadCollection');
        return spec;
      })();
      opened.catch(() => this.specs.delete(name));
      this.specs.set(name, opened);
    }
    return opened;
  }

  async ensureIndex(spec: IndexSpec): Promise<void> {
    checkSpec(spec);
    if (!(await this.exists(spec.name))) {
      const client = await this.connect();
      const collection_name = this.collection(spec.name);
      const created = await client.createCollection({
        collection_name,
        description: `${DESCRIPTION}${JSON.stringify({ dims: spec.dims, distance: spec.distance })}`,
        consistency_level: 'Strong',
        fields: [
          { name: 'id', data_type: 'VarChar', is_primary_key: true, autoID: false, max_length: MAX_ID_LENGTH },
          { name: 'vector', data_type: 'FloatVector', dim: spec.dims },
          { name: 'payload', data_type: 'VarChar', max_length: MAX_PAYLOAD_LENGTH },
          { name: 'fields', data_type: 'JSON' },
          { name: 'fields_ci', data_type: 'JSON' },
        ],
      });
      // Another process may have created it between our check and here; its spec is compared below.
      if (!(await this.exists(spec.name))) check(created, 'createCollection');
      const indexed = await client.createIndex({
        collection_name,
        field_name: 'vector',
        index_type: 'HNSW',
        metric_type: METRIC[spec.distance],
        params: { M: 16, efConstruction: 200 },
      });
      // The same race: a second identical index request is refused as existing, which is fine.
      if (indexed.error_code !== 'Success' && !/exist/i.test(indexed.reason)) check(indexed, 'createIndex');
      this.specs.delete(spec.name);
    }
    const existing = await this.open(spec.name);
    if (existing.dims !== spec.dims || existing.distance !== spec.distance) {
      throw new ConflictError(`vector index '${spec.name}' exists with dims ${existing.dims} and distance ${existing.distance}`, {
        name: spec.name, dims: existing.dims, distance: existing.distance,
      });
    }
  }

  async upsert(name: string, records: VectorRecord[]): Promise<void> {
    const spec = await this.open(name);
    const rows = dedupeById(records).map((r) => {
      if (Buffer.byteLength(r.id) > MAX_ID_LENGTH) throw new InputError(`vector ids are at most ${MAX_ID_LENGTH} bytes (UTF-8) on Milvus`, { id: r.id.slice(0, 64) });
      const payload = r.payload ?? {};
      const text = JSON.stringify(payload);
      if (Buffer.byteLength(text) > MAX_PAYLOAD_LENGTH) {
        throw new InputError(`a vector payload is at most ${MAX_PAYLOAD_LENGTH} bytes of JSON on Milvus`, { id: r.id });
      }
      const { exact, folded } = filterDocuments(payload);
      return { id: r.id, vector: checkVector(r.vector, spec.dims, r.id), payload: text, fields: exact, fields_ci: folded };
    });
    if (rows.length === 0) return;
    const client = await this.connect();
    for (let i = 0; i < rows.length; i += 1_000) {
      check(await client.upsert({ collection_name: this.collection(name), data: rows.slice(i, i + 1_000) }), 'upsert');
    }
  }

  /** Ids among `ids` that exist: Milvus counts a delete by primary key whether or not the row was there. */
  private async existingIds(name: string, ids: string[]): Promise<string[]> {
    const found: string[] = [];
    const client = await this.connect();
    for (let i = 0; i < ids.length; i += 1_000) {
      const slice = ids.slice(i, i + 1_000);
      const res = check(await client.query({
        collection_name: this.collection(name),
        filter: idIn(slice),
        output_fields: ['id'],
        limit: slice.length,
        consistency_level: STRONG,
      }), 'query');
      for (const row of res.data) found.push(String(row.id));
    }
    return found;
  }

  async delete(name: string, ids: string[]): Promise<number> {
    await this.open(name);
    const present = await this.existingIds(name, [...new Set(ids)]);
    if (present.length === 0) return 0;
    const client = await this.connect();
    for (let i = 0; i < present.length; i += 1_000) {
      check(await client.delete({ collection_name: this.collection(name), filter: idIn(present.slice(i, i + 1_000)) }), 'delete');
    }
    return present.length;
  }

  async deleteWhere(name: string, filter: ParsedFilter): Promise<number> {
    await this.open(name);
    const where = filterToMilvus(filter) ?? 'id != ""';
    const client = await this.connect();
    let deleted = 0;
    // Page by ids: a filtered delete's count in Milvus is not the number of rows that matched.
    for (;;) {
      const res = check(await client.query({
        collection_name: this.collection(name),
        filter: where,
        output_fields: ['id'],
        limit: QUERY_PAGE,
        consistency_level: STRONG,
      }), 'query');
      const ids = res.data.map((row) => String(row.id));
      if (ids.length === 0) return deleted;
      for (let i = 0; i < ids.length; i += 1_000) {
        check(await client.delete({ collection_name: this.collection(name), filter: idIn(ids.slice(i, i + 1_000)) }), 'delete');
      }
      deleted += ids.length;
    }
  }

  async count(name: string, filter?: ParsedFilter): Promise<number> {
    await this.open(name);
    const client = await this.connect();
    const res = check(await client.query({
      collection_name: this.collection(name),
      filter: (filter && filterToMilvus(filter)) ?? '',
      output_fields: ['count(*)'],
      consistency_level: STRONG,
    }), 'count');
    return Number(res.data[0]?.['count(*)'] ?? 0);
  }

  async get(name: string, ids: string[]): Promise<VectorRecord[]> {
    await this.open(name);
    const unique = [...new Set(ids)];
    if (unique.length === 0) return [];
    const client = await this.connect();
    const out: VectorRecord[] = [];
    for (let i = 0; i < unique.length; i += 1_000) {
      const slice = unique.slice(i, i + 1_000);
      const res = check(await client.query({
        collection_name: this.collection(name),
        filter: idIn(slice),
        output_fields: ['id', 'vector', 'payload'],
        limit: slice.length,
        consistency_level: STRONG,
      }), 'query');
      for (const row of res.data) out.push(toRecord(row));
    }
    return out;
  }

  async search(name: string, query: VectorQuery): Promise<VectorHit[]> {
    const spec = await this.open(name);
    const limit = checkLimit(query.limit);
    const vector = checkVector(query.vector, spec.dims);
    const where = query.filter ? filterToMilvus(query.filter) : undefined;
    const client = await this.connect();
    const res = check(await client.search({
      collection_name: this.collection(name),
      anns_field: 'vector',
      data: [vector],
      limit,
      ...(where ? { filter: where } : {}),
      output_fields: ['id', 'payload'],
      metric_type: METRIC[spec.distance],
      // ef at least the limit (HNSW needs it) and generous on small limits, for recall under filters.
      params: { ef: Math.max(limit, 256) },
      consistency_level: STRONG,
    }), 'search');
    const hits = res.results as unknown as Array<{ id: string; score: number; payload?: string }>;
    const score = SCORE[spec.distance];
    return hits.map((h) => ({ id: String(h.id), score: score(Number(h.score)), payload: parsePayload(h.payload) }));
  }

  /** The index's dims and distance (NotFound for an unknown index). */
  async describe(name: string): Promise<IndexSpec> {
    return { ...(await this.open(name)) };
  }

  /** Every record, a page at a time (the in-process index loads itself from this). */
  async *scan(name: string): AsyncIterable<VectorRecord[]> {
    await this.open(name);
    const client = await this.connect();
    // Pages by primary key (`id > last`), as the SDK's queryIterator does, but with the last id written
    // as an escaped literal: the SDK quotes it unescaped, so an id holding a quote would break the scan.
    // Milvus returns a limited query's rows in primary-key order, so pages neither overlap nor skip.
    let after: string | undefined;
    for (;;) {
      const res = check(await client.query({
        collection_name: this.collection(name),
        filter: after === undefined ? 'id != ""' : `id > ${milvusString(after)}`,
        output_fields: ['id', 'vector', 'payload'],
        limit: SCAN_PAGE,
        consistency_level: STRONG,
      }), 'query');
      if (res.data.length === 0) return;
      const page = res.data.map(toRecord);
      yield page.map((r) => ({ ...r, vector: Float32Array.from(r.vector) }));
      // The server's order (bytes of UTF-8), not JavaScript's (UTF-16 units): the last row is the largest id.
      after = page[page.length - 1]!.id;
      if (page.length < SCAN_PAGE) return;
    }
  }

  async dropIndex(name: string): Promise<void> {
    checkIndexName(name);
    this.specs.delete(name);
    if (!(await this.exists(name))) return;
    const client = await this.connect();
    const res = await client.dropCollection({ collection_name: this.collection(name) });
    if (res.error_code !== 'Success' && (await this.exists(name))) check(res, 'dropCollection');
  }

  async ping(): Promise<void> {
    const client = await this.connect();
    const health = await client.checkHealth();
    if (!health.isHealthy) {
      throw new ServiceUnavailableError(`Milvus at ${this.settings.address} is not healthy: ${(health.reasons ?? []).join('; ') || 'no reason given'}`);
    }
  }

  async close(): Promise<void> {
    this.specs.clear();
    const client = this.client;
    this.client = undefined;
    if (client) await (await client.catch(() => undefined))?.closeConnection();
  }
}

/**
 * `id in [...]` with every id an escaped literal. Never the SDK's `delete({ ids })`: it joins the ids
 * into the expression unescaped, so an id holding `"` could widen the delete.
 */
export function idIn(ids: readonly string[]): string {
  return `id in [${ids.map(milvusString).join(', ')}]`;
}

function toRecord(row: Record<string, unknown>): VectorRecord {
  return {
    id: String(row.id),
    vector: Array.from(row.vector as Iterable<number>),
    payload: parsePayload(row.payload as string | undefined),
  };
}

function parsePayload(text: string | undefined | null): Record<string, unknown> {
  return text ? (JSON.parse(text) as Record<string, unknown>) : {};
}
