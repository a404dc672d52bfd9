/** Object rows and their listing: filters, sort and keyset (cursor) pagination. */
import type { Knex } from 'knex';
import { withDates, type DatabaseHandle, type JsonRead } from '../../../kernel/db/database.js';
import { rowsByIdSql } from '../../../kernel/db/rows-by-id.js';
import { cursorFields, decodeCursor, encodeCursor, type CursorField } from '../../../kernel/http/cursor.js';
import type { ParsedFilter } from '../../../kernel/filters/filter.js';
import { columnFieldResolver, whereFilter } from '../../../kernel/filters/sql.js';
import type { StoredBlob } from './ingest.js';

export interface ObjectRow {
  object_id: string;
  organization_id: string;
  namespace_id: string;
  bucket_id: string;
  key: string;
  metadata: Record<string, unknown>;
  blobs: StoredBlob[];
  size_bytes: number;
  created_by: string | null;
  /** The principal (end user) who owns the object; user-scoped keys see only their own. */
  owner_principal: string | null;
  created_at: Date;
  updated_at: Date;
}

/** Narrows a query to what a user-scoped key's principal owns; keys without a principal see everything. */
function ownedBy<Q extends Knex.QueryBuilder>(q: Q, principalId: string | null | undefined): Q {
  if (principalId) q.where({ owner_principal: principalId });
  return q;
}

export type SortField = 'created_at' | 'updated_at' | 'key' | 'size_bytes';

export interface ListQuery {
  principalId?: string | null;
  bucketId: string;
  organizationId: string;
  filter?: ParsedFilter;
  prefix?: string;
  sort: SortField;
  direction: 'asc' | 'desc';
  limit: number;
  cursor?: string;
}

const resolveField = columnFieldResolver({
  columns: ['object_id', 'key', 'size_bytes'],
  timestamps: ['created_at', 'updated_at'],
  jsonRoots: ['metadata'],
});

/** The sort value's field in a cursor, by sort. */
const SORT_VALUE = {
  created_at: cursorFields.timestamp(),
  updated_at: cursorFields.timestamp(),
  key: cursorFields.text(),
  size_bytes: cursorFields.bigint(),
} as const satisfies Record<SortField, CursorField>;

function decodeListCursor(raw: string, sort: SortField, direction: 'asc' | 'desc'): { v: string | number; id: string } {
  return decodeCursor(raw, {
    s: cursorFields.literal(sort),
    d: cursorFields.literal(direction),
    v: SORT_VALUE[sort],
    id: cursorFields.id('obj'),
  });
}

/** A batch chunk's objects by id: prepared once on the embedded database, rows back as one JSON text (see JsonRead). */
const OBJECTS_BY_IDS: JsonRead = {
  name: 'objects_by_ids',
  parameterTypes: ['text', 'text', 'text[]'],
  // Through the primary key first (kernel/db/rows-by-id.ts), then the organization and bucket.
  sql: `${rowsByIdSql('objects', 'object_id', '$3::text[]')} where organization_id = $1 and bucket_id = $2`,
};

/** Which of these ids are the bucket's objects, and their owners: only those columns read (see OBJECTS_BY_IDS). */
const OBJECT_OWNERS_BY_IDS: JsonRead = {
  name: 'object_owners_by_ids',
  parameterTypes: ['text', 'text', 'text[]'],
  sql: `${rowsByIdSql('objects', 'object_id', '$3::text[]', ['object_id', 'organization_id', 'bucket_id', 'owner_principal'])}
    where organization_id = $1 and bucket_id = $2`,
};

export class ObjectStore {
  private readonly db: Knex;

  constructor(private readonly database: Pick<DatabaseHandle, 'db' | 'readJson'>) {
    this.db = database.db;
  }

  async find(organizationId: string, bucketId: string, objectId: string, principalId: string | null = null): Promise<ObjectRow | undefined> {
    return ownedBy(this.db<ObjectRow>('objects').where({ organization_id: organizationId, bucket_id: bucketId, object_id: objectId }), principalId).first();
  }

  /** The bucket's objects among `objectIds`, in one query (batch processing reads them a chunk at a time). */
  async findMany(organizationId: string, bucketId: string, objectIds: readonly string[]): Promise<ObjectRow[]> {
    if (objectIds.length === 0) return [];
    // The ids as one array parameter (one statement whatever the count), the rows as one JSON text: on the
    // embedded database, converting each row's columns in its thread cost more than reading them.
    return (await this.database.readJson(OBJECTS_BY_IDS, [organizationId, bucketId, [...objectIds]])).map((row) => withDates<ObjectRow>(row));
  }

  /**
   * The owner principal of each of `objectIds` that is an object of the bucket (unknown or foreign ids are
   * absent): a batch checks thousands of ids, and reading whole rows (inline texts) to do it cost more than
   * the check.
   */
  async ownersOf(organizationId: string, bucketId: string, objectIds: readonly string[]): Promise<Map<string, string | null>> {
    if (objectIds.length === 0) return new Map();
    const rows = await this.database.readJson(OBJECT_OWNERS_BY_IDS, [organizationId, bucketId, [...objectIds]]);
    return new Map(rows.map((row) => [row.object_id as string, (row.owner_principal as string | null) ?? null]));
  }

  async keyTaken(bucketId: string, key: string): Promise<boolean> {
    return Boolean(await this.db('objects').where({ bucket_id: bucketId, key }).first('object_id'));
  }

  /** Keys among `keys` the bucket already has. */
  async keysTaken(bucketId: string, keys: readonly string[]): Promise<string[]> {
    const taken: string[] = [];
    for (let i = 0; i < keys.length; i += 1000) {
      const rows = (await this.db('objects').where({ bucket_id: bucketId }).whereIn('key', keys.slice(i, i + 1000)).select('key')) as Array<{ key: string }>;
      taken.push(...rows.map((r) => r.key));
    }
    return taken;
  }

  /**
   * Inserts objects of one bucket and adds them to the bucket's totals, in one statement (atomic by itself,
   * no transaction): the columns go as one array each, so the statement's text is the same whatever the
   * count (a row of placeholders per object made PGlite parse and plan ~40 µs of SQL per object).
   */
  async insertMany(db: Knex, bucketId: string, rows: readonly ObjectRow[]): Promise<void> {
    if (rows.length === 0) return;
    if (rows.some((row) => row.bucket_id !== bucketId)) throw new Error('insertMany: every object must belong to the bucket given');
    const column = <T>(pick: (row: ObjectRow) => T): T[] => rows.map(pick);
    await db.raw(
      `with inserted as (
         insert into objects (object_id, organization_id, namespace_id, bucket_id, key, metadata, blobs, size_bytes, created_by, owner_principal, created_at, updated_at)
         select i, o, n, ?, k, m::jsonb, b::jsonb, s, c, p, ca, ua
         from unnest(?::text[], ?::text[], ?::text[], ?::text[], ?::text[], ?::text[], ?::bigint[], ?::text[], ?::text[], ?::timestamptz[], ?::timestamptz[])
           as u(i, o, n, k, m, b, s, c, p, ca, ua)
         returning size_bytes)
       update buckets set object_count = object_count + (select count(*) from inserted),
         total_size_bytes = total_size_bytes + (select coalesce(sum(size_bytes), 0) from inserted)
       where bucket_id = ?`,
      [
        bucketId,
        column((r) => r.object_id), column((r) => r.organization_id), column((r) => r.namespace_id), column((r) => r.key),
        column((r) => JSON.stringify(r.metadata)), column((r) => JSON.stringify(r.blobs)), column((r) => r.size_bytes),
        column((r) => r.created_by), column((r) => r.owner_principal), column((r) => r.created_at.toISOString()), column((r) => r.updated_at.toISOString()),
        bucketId,
      ] as unknown as Knex.RawBinding[],
    );
  }

  async insert(db: Knex, row: ObjectRow): Promise<void> {
    await db('objects').insert({ ...row, metadata: JSON.stringify(row.metadata), blobs: JSON.stringify(row.blobs) });
  }

  async updateMetadata(db: Knex, objectId: string, metadata: Record<string, unknown>, at: Date): Promise<void> {
    await db('objects').where({ object_id: objectId }).update({ metadata: JSON.stringify(metadata), updated_at: at });
  }

  async delete(db: Knex, objectId: string): Promise<void> {
    await db('objects').where({ object_id: objectId }).delete();
  }

  async list(query: ListQuery): Promise<{ rows: ObjectRow[]; nextCursor: string | null }> {
    const q = ownedBy(this.db<ObjectRow>('objects').where({ organization_id: query.organizationId, bucket_id: query.bucketId }), query.principalId);
    whereFilter(q, query.filter, resolveField);
    if (query.prefix) q.whereRaw('left(key, length(?)) = ?', [query.prefix, query.prefix]);
    const cmp = query.direction === 'desc' ? '<' : '>';
    if (query.cursor) {
      const c = decodeListCursor(query.cursor, query.sort, query.direction);
      const cast = query.sort === 'created_at' || query.sort === 'updated_at' ? '::timestamptz' : query.sort === 'size_bytes' ? '::bigint' : '';
      q.whereRaw(`("${query.sort}", object_id) ${cmp} (?${cast}, ?)`, [c.v, c.id]);
    }
    q.orderBy([{ column: query.sort, order: query.direction }, { column: 'object_id', order: query.direction }]).limit(query.limit + 1);
    const rows = await q;
    const page = rows.slice(0, query.limit);
    const last = page.at(-1);
    const nextCursor =
      rows.length > query.limit && last
        ? encodeCursor({
            s: query.sort,
            d: query.direction,
            v: last[query.sort] instanceof Date ? (last[query.sort] as Date).toISOString() : (last[query.sort] as string | number),
            id: last.object_id,
          })
        : null;
    return { rows: page, nextCursor };
  }

}
