/**
 * Document rows. Writes are idempotent by (collection, source_key), so a redelivered processing task
 * updates the document it already wrote instead of adding a second one. Every read can be narrowed to
 * what one principal owns or was granted (user-scoped `usr_sk_` keys).
 */
import type { Knex } from 'knex';
import { withDates } from '../../../kernel/db/database.js';
import { rowsById } from '../../../kernel/db/rows-by-id.js';
import { cursorFields, decodeCursor, encodeCursor } from '../../../kernel/http/cursor.js';
import type { ParsedFilter } from '../../../kernel/filters/filter.js';
import { whereFilter, type FieldResolver } from '../../../kernel/filters/sql.js';
import { newId } from '../../../kernel/ids.js';
import { textFieldsOf, type TextIndex, type TextWriteInStatement } from '../../../kernel/text/index.js';

export interface DocumentRow {
  document_id: string;
  organization_id: string;
  namespace_id: string;
  collection_id: string;
  source_key: string;
  root_object_id: string | null;
  source_collection_id: string | null;
  source_document_id: string | null;
  processing_tier: number;
  fields: Record<string, unknown>;
  metadata: Record<string, unknown>;
  owner_principal: string | null;
  grants: string[];
  created_at: Date;
  updated_at: Date;
}

export interface DocumentWrite {
  organizationId: string;
  namespaceId: string;
  collectionId: string;
  sourceKey: string;
  rootObjectId: string | null;
  sourceCollectionId: string | null;
  sourceDocumentId: string | null;
  processingTier: number;
  fields: Record<string, unknown>;
  ownerPrincipal?: string | null;
  grants?: string[];
}

export type DocumentSortField = 'created_at' | 'updated_at' | 'document_id';

export interface DocumentQuery {
  organizationId: string;
  collectionId: string;
  /** Set for user-scoped keys: only documents this principal owns or was granted. */
  principalId: string | null;
  filter?: ParsedFilter;
  sort: DocumentSortField;
  direction: 'asc' | 'desc';
  limit: number;
  cursor?: string;
}

const COLUMNS = ['document_id', 'root_object_id', 'source_collection_id', 'source_document_id', 'processing_tier'];

/** `metadata.x` and `fields.x` address those objects; a bare name is a field (`category` = `fields.category`). */
export const resolveDocumentField: FieldResolver = (field) => {
  if (field === 'created_at' || field === 'updated_at') return { expr: `"${field}"`, kind: 'timestamp' };
  if (COLUMNS.includes(field)) return { expr: `to_jsonb("${field}")`, kind: 'jsonb' };
  const [root, ...rest] = field.split('.');
  if ((root === 'metadata' || root === 'fields') && rest.length > 0) return { expr: `("${root}" #> '{${rest.join(',')}}')`, kind: 'jsonb' };
  return { expr: `("fields" #> '{${field.split('.').join(',')}}')`, kind: 'jsonb' };
};

/**
 * Processing writing a document again adds the grants its source has now to those it had, so a grant made
 * through the grants endpoint survives reprocessing (revoking removes it down the chain, document-grants.ts).
 */
const KEEP_GRANTS = "(select coalesce(jsonb_agg(distinct e.g), '[]'::jsonb) from jsonb_array_elements(documents.grants || excluded.grants) as e(g))";

/** Every column but `fields`, for upsertMany's RETURNING: its caller has the fields it wrote. */
const RETURNED_WITHOUT_FIELDS = [
  'document_id', 'organization_id', 'namespace_id', 'collection_id', 'source_key', 'root_object_id', 'source_collection_id',
  'source_document_id', 'processing_tier', 'metadata', 'owner_principal', 'grants', 'created_at', 'updated_at',
].join(', ');

/** A row of upsertMany's RETURNING. */
type WrittenRow = Omit<DocumentRow, 'fields'> & { inserted: boolean };

/** The rows a documents write returned, with the fields just written (an upsert replaces them whole: not read back and parsed again). */
function writtenRows(json: string, bySourceKey: ReadonlyMap<string, DocumentWrite>): DocumentRow[] {
  return (JSON.parse(json) as Array<Record<string, unknown>>)
    .map((row) => withDates<WrittenRow>(row))
    .map(({ inserted: _inserted, ...row }): DocumentRow => ({ ...row, fields: bySourceKey.get(`${row.collection_id}\u0000${row.source_key}`)!.fields }));
}

export interface DocumentStoreOptions {
  /**
   * The database has one connection that runs one statement at a time (the embedded one): `upsertMany`
   * then writes the documents and their text postings in one statement, outside any transaction. A
   * transaction there holds the only connection between its statements, so every other caller waits while
   * the writer's thread prepares the next one (a fifth of the database thread's time in a text batch).
   */
  singleConnection?: boolean;
}

export class DocumentStore {
  private readonly singleConnection: boolean;

  /** Every write and delete here keeps the text index current, in the same transaction when there is one. */
  constructor(
    private readonly db: Knex,
    private readonly text?: TextIndex,
    options: DocumentStoreOptions = {},
  ) {
    this.singleConnection = options.singleConnection ?? false;
  }

  private async indexText(rows: readonly DocumentRow[], db: Knex): Promise<void> {
    if (!this.text) return;
    const byCollection = new Map<string, DocumentRow[]>();
    for (const row of rows) {
      const docs = byCollection.get(row.collection_id);
      if (docs) docs.push(row);
      else byCollection.set(row.collection_id, [row]);
    }
    for (const [collectionId, docs] of byCollection) {
      await this.text.index(collectionId, docs.map((d) => ({ document_id: d.document_id, fields: textFieldsOf(d.fields) })), db);
    }
  }

  /** A deleted collection's text index (its documents go with its row). */
  async forgetCollection(collectionId: string): Promise<void> {
    await this.text?.dropCollection(collectionId);
  }

  private visible<Q extends Knex.QueryBuilder>(q: Q, principalId: string | null): Q {
    if (principalId) {
      q.where((w) => w.where({ owner_principal: principalId }).orWhereRaw('grants @> ?::jsonb', [JSON.stringify([principalId])]));
    }
    return q;
  }

  /** Inserts, or updates the document the same source already produced; keeps the collection's count. */
  async upsert(write: DocumentWrite, db: Knex = this.db): Promise<DocumentRow> {
    // The document and its text postings commit together.
    if (!db.isTransaction) return this.db.transaction((trx) => this.upsert(write, trx));
    const now = new Date();
    const rows = (await db.raw(
      `insert into documents (document_id, organization_id, namespace_id, collection_id, source_key, root_object_id,
         source_collection_id, source_document_id, processing_tier, fields, metadata, owner_principal, grants, created_at, updated_at)
       values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?::jsonb, '{}'::jsonb, ?, ?::jsonb, ?, ?)
       on conflict (collection_id, source_key) do update set fields = excluded.fields,
         root_object_id = excluded.root_object_id, source_document_id = excluded.source_document_id,
         processing_tier = excluded.processing_tier, owner_principal = excluded.owner_principal,
         grants = ${KEEP_GRANTS}, updated_at = excluded.updated_at
       returning *, (xmax = 0) as inserted`,
      [
        newId('doc'), write.organizationId, write.namespaceId, write.collectionId, write.sourceKey, write.rootObjectId,
        write.sourceCollectionId, write.sourceDocumentId, write.processingTier, JSON.stringify(write.fields),
        write.ownerPrincipal ?? null, JSON.stringify(write.grants ?? []), now, now,
      ],
    )) as { rows: Array<DocumentRow & { inserted: boolean }> };
    const { inserted, ...row } = rows.rows[0]!;
    if (inserted) await db('collections').where({ collection_id: write.collectionId }).increment('document_count', 1);
    await this.indexText([row], db);
    return row;
  }

  /**
   * Writes many documents in one statement (batch processing). Same idempotence as `upsert`: a source key
   * written before is updated in place, and only new rows add to the collection's count.
   */
  async upsertMany(writes: readonly DocumentWrite[], db: Knex = this.db): Promise<DocumentRow[]> {
    if (writes.length === 0) return [];
    // One row per source key: a repeated key in one statement would make ON CONFLICT fail.
    const bySourceKey = new Map(writes.map((w) => [`${w.collectionId}\u0000${w.sourceKey}`, w]));
    const unique = [...bySourceKey.values()];
    const collectionId = unique[0]!.collectionId;
    if (!db.isTransaction && this.singleConnection && unique.every((w) => w.collectionId === collectionId)) {
      const text = this.text?.inStatement(collectionId, unique.map((w) => ({ sourceKey: w.sourceKey, fields: textFieldsOf(w.fields) })));
      const result = await this.writeDocuments(db, unique, text);
      if (text) await text.committed(Number(result.text_version));
      return writtenRows(result.rows, bySourceKey);
    }
    if (!db.isTransaction) return this.db.transaction((trx) => this.upsertMany(writes, trx));
    const written = writtenRows((await this.writeDocuments(db, unique)).rows, bySourceKey);
    await this.indexText(written, db);
    return written;
  }

  /**
   * One statement: the documents (the written rows come back as one JSON text, made by the database: on the
   * embedded one, converting RETURNING's rows column by column in its thread cost a third of the statement),
   * the new rows added to their collections' counts, and with `text` their postings.
   */
  private async writeDocuments(db: Knex, unique: readonly DocumentWrite[], text?: TextWriteInStatement): Promise<{ rows: string; text_version: string | number | null }> {
    const now = new Date();
    const columns = {
      document_id: [] as string[], organization_id: [] as string[], namespace_id: [] as string[], collection_id: [] as string[],
      source_key: [] as string[], root_object_id: [] as Array<string | null>, source_collection_id: [] as Array<string | null>,
      source_document_id: [] as Array<string | null>, processing_tier: [] as number[], fields: [] as string[],
      owner_principal: [] as Array<string | null>, grants: [] as string[],
    };
    for (const w of unique) {
      columns.document_id.push(newId('doc'));
      columns.organization_id.push(w.organizationId);
      columns.namespace_id.push(w.namespaceId);
      columns.collection_id.push(w.collectionId);
      columns.source_key.push(w.sourceKey);
      columns.root_object_id.push(w.rootObjectId);
      columns.source_collection_id.push(w.sourceCollectionId);
      columns.source_document_id.push(w.sourceDocumentId);
      columns.processing_tier.push(w.processingTier);
      columns.fields.push(JSON.stringify(w.fields));
      columns.owner_principal.push(w.ownerPrincipal ?? null);
      columns.grants.push(JSON.stringify(w.grants ?? []));
    }
    const result = (await db.raw(
      `with written as (insert into documents (document_id, organization_id, namespace_id, collection_id, source_key, root_object_id,
         source_collection_id, source_document_id, processing_tier, fields, metadata, owner_principal, grants, created_at, updated_at)
       select d, o, n, c, k, r, sc, sd, t, f::jsonb, '{}'::jsonb, p, g::jsonb, ?, ?
       from unnest(?::text[], ?::text[], ?::text[], ?::text[], ?::text[], ?::text[], ?::text[], ?::text[], ?::int[], ?::text[], ?::text[], ?::text[])
         as u(d, o, n, c, k, r, sc, sd, t, f, p, g)
       on conflict (collection_id, source_key) do update set fields = excluded.fields,
         root_object_id = excluded.root_object_id, source_document_id = excluded.source_document_id,
         processing_tier = excluded.processing_tier, owner_principal = excluded.owner_principal,
         grants = ${KEEP_GRANTS}, updated_at = excluded.updated_at
       returning ${RETURNED_WITHOUT_FIELDS}, (xmax = 0) as inserted),
       counted as (
         update collections set document_count = collections.document_count + added.n
         from (select collection_id, count(*)::int as n from written where inserted group by collection_id) as added
         where collections.collection_id = added.collection_id)${text?.ctes ?? ''}
       select coalesce(json_agg(written), '[]'::json)::text as rows, ${text?.version ?? 'null'} as text_version from written`,
      [
        now, now, columns.document_id, columns.organization_id, columns.namespace_id, columns.collection_id, columns.source_key,
        columns.root_object_id, columns.source_collection_id, columns.source_document_id, columns.processing_tier, columns.fields,
        columns.owner_principal, columns.grants, ...(text?.bindings ?? []),
      ] as unknown as Knex.RawBinding[],
    )) as { rows: Array<{ rows: string; text_version: string | number | null }> };
    return result.rows[0] ?? { rows: '[]', text_version: null };
  }

  /** Documents of one collection by id (processing reads its source records a chunk at a time). */
  findMany(organizationId: string, collectionId: string, documentIds: readonly string[]): Promise<DocumentRow[]> {
    if (documentIds.length === 0) return Promise.resolve([]);
    // The ids as one array parameter (not an IN list): one statement text whatever the count, far less to parse
    // and plan; looked up by the primary key first (kernel/db/rows-by-id.ts).
    return rowsById<DocumentRow>(this.db, 'documents', 'document_id', documentIds).where({ organization_id: organizationId, collection_id: collectionId });
  }

  /** Ids of the collection's documents made from these bucket objects, in a stable order. */
  async idsByRoots(organizationId: string, collectionId: string, rootObjectIds: readonly string[]): Promise<string[]> {
    if (rootObjectIds.length === 0) return [];
    const rows = (await this.db('documents')
      .where({ organization_id: organizationId, collection_id: collectionId })
      .whereIn('root_object_id', rootObjectIds)
      .orderBy('document_id')
      .select('document_id')) as Array<{ document_id: string }>;
    return rows.map((r) => r.document_id);
  }

  /**
   * Removes what a source record produced before, except the keys just written (document handling
   * `replace`: stale chunks of an edited text disappear). Returns the removed ids (their vectors go too).
   */
  async deleteStale(collectionId: string, sourceKeyPrefix: string, keep: readonly string[], db: Knex = this.db): Promise<string[]> {
    if (!db.isTransaction) return this.db.transaction((trx) => this.deleteStale(collectionId, sourceKeyPrefix, keep, trx));
    const q = db('documents').where({ collection_id: collectionId }).whereRaw('starts_with(source_key, ?)', [sourceKeyPrefix]);
    if (keep.length > 0) q.whereNotIn('source_key', keep);
    const removed = ((await q.delete().returning('document_id')) as Array<{ document_id: string }>).map((r) => r.document_id);
    if (removed.length > 0) await db('collections').where({ collection_id: collectionId }).decrement('document_count', removed.length);
    await this.text?.remove(collectionId, removed, db);
    return removed;
  }

  get(organizationId: string, collectionId: string, documentId: string, principalId: string | null): Promise<DocumentRow | undefined> {
    return this.visible(this.db<DocumentRow>('documents').where({ organization_id: organizationId, collection_id: collectionId, document_id: documentId }), principalId).first();
  }

  async updateMetadata(documentId: string, metadata: Record<string, unknown>, at: Date): Promise<void> {
    await this.db('documents').where({ document_id: documentId }).update({ metadata: JSON.stringify(metadata), updated_at: at });
  }

  async delete(collectionId: string, documentIds: readonly string[]): Promise<number> {
    if (documentIds.length === 0) return 0;
    return this.db.transaction(async (trx) => {
      // Counted from RETURNING: PGlite's knex client does not report a row count for DELETE.
      const deleted = (await trx('documents').where({ collection_id: collectionId }).whereIn('document_id', documentIds).delete().returning('document_id')).length;
      if (deleted > 0) await trx('collections').where({ collection_id: collectionId }).decrement('document_count', deleted);
      await this.text?.remove(collectionId, documentIds, trx);
      return deleted;
    });
  }

  /** Ids of the documents a filter selects (for bulk deletion), within what the principal may see. */
  async idsMatching(organizationId: string, collectionId: string, filter: ParsedFilter, principalId: string | null): Promise<string[]> {
    const q = this.db('documents').where({ organization_id: organizationId, collection_id: collectionId }).select('document_id');
    whereFilter(q, filter, resolveDocumentField);
    this.visible(q, principalId);
    return ((await q) as Array<{ document_id: string }>).map((r) => r.document_id);
  }

  async list(query: DocumentQuery): Promise<{ rows: DocumentRow[]; nextCursor: string | null }> {
    const q = this.db<DocumentRow>('documents').where({ organization_id: query.organizationId, collection_id: query.collectionId });
    whereFilter(q, query.filter, resolveDocumentField);
    this.visible(q, query.principalId);
    if (query.cursor) {
      const c = decodeCursor(query.cursor, {
        s: cursorFields.literal(query.sort),
        d: cursorFields.literal(query.direction),
        v: query.sort === 'document_id' ? cursorFields.id('doc') : cursorFields.timestamp(),
        id: cursorFields.id('doc'),
      });
      const cast = query.sort === 'document_id' ? '' : '::timestamptz';
      q.whereRaw(`("${query.sort}", document_id) ${query.direction === 'desc' ? '<' : '>'} (?${cast}, ?)`, [c.v, c.id]);
    }
    const rows = await q.orderBy([{ column: query.sort, order: query.direction }, { column: 'document_id', order: query.direction }]).limit(query.limit + 1);
    const page = rows.slice(0, query.limit);
    const last = page.at(-1);
    const value = (row: DocumentRow) => (query.sort === 'document_id' ? row.document_id : (row[query.sort] as Date).toISOString());
    return {
      rows: page,
      nextCursor: rows.length > query.limit && last ? encodeCursor({ s: query.sort, d: query.direction, v: value(last), id: last.document_id }) : null,
    };
  }

  /** Every document made from one bucket object, across collections and tiers, within what the principal may see. */
  tree(organizationId: string, namespaceId: string, rootObjectId: string, principalId: string | null): Promise<DocumentRow[]> {
    return this.visible(
      this.db<DocumentRow>('documents')
        .where({ organization_id: organizationId, namespace_id: namespaceId, root_object_id: rootObjectId })
        .orderBy([{ column: 'processing_tier', order: 'asc' }, { column: 'created_at', order: 'asc' }]),
      principalId,
    );
  }
}
