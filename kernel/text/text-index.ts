/**
 * TextIndex: BM25 full-text search over the text fields of a collection's documents.
 *
 * Where things live:
 * - The database (PGlite or PostgreSQL, the same SQL) is the source of truth: `text_documents` holds
 *   each document's postings (field, term, positions; one row per document, written in the document
 *   write's transaction, or its very statement on the embedded database: `inStatement`); `text_versions`
 *   and `text_changes` say which documents each write touched. Writes of one collection are serialized by
 *   a transaction-scoped advisory lock (one connection needs none), so versions commit in order. (A row
 *   per posting was measured first: 16 times the rows to write, and reading them back on PGlite took
 *   seconds per 10,000 documents.)
 * - Each process scores from an in-process copy of a collection's postings (memory.ts), loaded on its
 *   first search and brought up to date from the change log before every search: a write committed by
 *   any process is seen by the next search everywhere, and nothing has to be rebuilt at start. Scoring
 *   in SQL was measured first: a common word over 100,000 documents costs tens of milliseconds as an
 *   aggregate on PGlite, against about a millisecond as a loop here.
 * - Statistics (documents with the field, their average length, document frequencies) are counted on the
 *   copy from the live documents, so idf always reflects the collection as it is now.
 *
 * Who may read a document (owner, grants) and user filters are checked against the `documents` table
 * itself, in score order, until top_k visible documents are found: the answer is exactly "the best k
 * among the documents the caller may see", never another principal's document and never fewer results
 * because others ranked higher; and a grant or revocation acts at once.
 */
import type { Knex } from 'knex';
import { InputError } from '../errors.js';
import type { Migration } from '../db/migrations.js';
import type { ParsedFilter } from '../filters/filter.js';
import { filterToSql, type FieldResolver } from '../filters/sql.js';
import { DEFAULT_BM25, idf, lengthConstants, termScore, type Bm25Parameters } from './bm25.js';
import { parseQuery, type Clause } from './query.js';
import { documentFieldResolver } from './documents.js';
import { CollectionPostings, decodePostings, encodePostings, DOCUMENT, DOCUMENT_ID, type FieldPostings, type TermPostings } from './memory.js';

/** Terms one prefix expands to at most in a field (the most frequent ones). */
export const MAX_PREFIX_EXPANSIONS = 64;
/** Terms a prefix expansion looks at most before picking the most frequent ones. */
export const MAX_PREFIX_SCAN = 5_000;
/** Documents a phrase is checked in at most per field (those holding its rarest word). */
export const MAX_PHRASE_CANDIDATES = 100_000;
export const MAX_SEARCH_LIMIT = 10_000;
/** Change-log versions kept per collection; a copy older than that reloads instead of catching up. */
const CHANGE_LOG_VERSIONS = 256;
/** Collections whose postings a process keeps in memory at most (least recently searched go first). */
const MAX_CACHED_COLLECTIONS = 64;

export interface TextDocument {
  document_id: string;
  /** The text fields to index, by field name (other values are ignored). */
  fields: Record<string, string>;
}

export interface TextSearchRequest {
  collectionIds: readonly string[];
  query: string;
  /** Fields to search; all the collections' indexed fields when absent. */
  fields?: readonly string[];
  /** Multiplies a field's scores (1 when absent). */
  fieldWeights?: Readonly<Record<string, number>>;
  k1?: number;
  b?: number;
  limit: number;
  minScore?: number;
  /** Set for user-scoped keys: only documents this principal owns or was granted. */
  principalId?: string | null;
  /** A filter over the documents (fields, metadata, columns). */
  filter?: ParsedFilter;
  /** How filter fields map to `documents` columns (default: bare names and `fields.x` are fields, `metadata.x` metadata). */
  resolveField?: FieldResolver;
  /** Only these documents may match (e.g. what an earlier stage kept). */
  documentIds?: readonly string[];
}

export interface TextHit {
  document_id: string;
  collection_id: string;
  score: number;
}

export interface FieldStatistics {
  field: string;
  document_count: number;
  average_length: number;
}

/**
 * Indexing the documents a statement writes, as part of that statement (`TextIndex.inStatement`): its CTEs
 * read the statement's own `written` CTE, whose rows have `document_id`, `source_key` and `inserted`.
 */
export interface TextWriteInStatement {
  /** CTEs to append to the statement's WITH list, each preceded by a comma. */
  ctes: string;
  bindings: unknown[];
  /** A scalar subquery giving the collection's text version after the statement. */
  version: string;
  /** Runs after the statement committed, with the version it returned (keeps the change log bounded). */
  committed(version: number, db?: Knex): Promise<void>;
}

export interface TextIndex {
  /** Indexes (or re-indexes) documents of one collection; `db` lets a caller's transaction include it. */
  index(collectionId: string, documents: readonly TextDocument[], db?: Knex): Promise<void>;
  /**
   * Indexes, inside one statement that writes them, documents of one collection known by source key (their
   * ids are the statement's to decide). Only where nothing else can write between two statements' rows (the
   * embedded database's single connection): no lock orders writers, the version row does.
   */
  inStatement(collectionId: string, documents: ReadonlyArray<{ sourceKey: string; fields: Record<string, string> }>): TextWriteInStatement;
  remove(collectionId: string, documentIds: readonly string[], db?: Knex): Promise<void>;
  dropCollection(collectionId: string, db?: Knex): Promise<void>;
  search(request: TextSearchRequest): Promise<TextHit[]>;
  statistics(collectionId: string): Promise<FieldStatistics[]>;
  /** How many documents contain a term in a field (tests, explain). */
  documentFrequency(collectionId: string, field: string, term: string): Promise<number>;
}

export const textIndexMigrations: Migration[] = [
  {
    name: '0004_text_index',
    async up(db) {
      // One row per document: its postings in the compact form of memory.ts (field, term, positions).
      await db.raw(`create table text_documents (
        collection_id text not null,
        document_id text not null,
        postings text not null,
        primary key (collection_id, document_id))`);
      await db.raw(`create table text_versions (
        collection_id text primary key,
        version bigint not null,
        pruned_below bigint not null)`);
      await db.raw(`create table text_changes (
        collection_id text not null,
        version bigint not null,
        document_id text not null)`);
      await db.raw('create index text_changes_version on text_changes (collection_id, version)');
    },
  },
];

/** Matching documents of every searched collection, as parallel typed arrays (no object per match). */
class Candidates {
  readonly copies: CollectionPostings[] = [];
  copyOf = new Int32Array(0);
  docs = new Int32Array(0);
  scores = new Float64Array(0);
  length = 0;

  /** Room for `more` candidates. */
  reserve(more: number): void {
    if (this.length + more <= this.docs.length) return;
    const capacity = Math.max(this.length + more, this.docs.length * 2);
    const grow = <T extends Int32Array | Float64Array>(old: T, make: (n: number) => T): T => {
      const next = make(capacity);
      next.set(old.subarray(0, this.length));
      return next;
    };
    this.copyOf = grow(this.copyOf, (n) => new Int32Array(n));
    this.docs = grow(this.docs, (n) => new Int32Array(n));
    this.scores = grow(this.scores, (n) => new Float64Array(n));
  }

  documentId(i: number): string {
    return this.copies[this.copyOf[i]!]!.documentId(this.docs[i]!);
  }

  hit(i: number): TextHit {
    return { document_id: this.documentId(i), collection_id: this.copies[this.copyOf[i]!]!.collectionId, score: this.scores[i]! };
  }
}

type Parameters = Bm25Parameters & { limit: number; minScore: number | undefined };

export class SqlTextIndex implements TextIndex {
  /** In-process copies by collection, in least-recently-searched order. */
  private readonly copies = new Map<string, CollectionPostings>();
  /** One catch-up at a time per collection in this process. */
  private readonly catchingUp = new Map<string, Promise<CollectionPostings | undefined>>();

  private readonly changeLogVersions: number;

  constructor(
    private readonly db: Knex,
    options: { changeLogVersions?: number } = {},
  ) {
    this.changeLogVersions = options.changeLogVersions ?? CHANGE_LOG_VERSIONS;
  }

  async index(collectionId: string, documents: readonly TextDocument[], db: Knex = this.db): Promise<void> {
    if (documents.length === 0) return;
    const unique = [...new Map(documents.map((d) => [d.document_id, d])).values()];
    const { put, without } = encodeAll(unique.map((d) => ({ key: d.document_id, fields: d.fields })));
    await this.writing(db, collectionId, unique.map((d) => d.document_id), { put: { doc: put.keys, postings: put.postings }, remove: without });
  }

  inStatement(collectionId: string, documents: ReadonlyArray<{ sourceKey: string; fields: Record<string, string> }>): TextWriteInStatement {
    const { put, without } = encodeAll(documents.map((d) => ({ key: d.sourceKey, fields: d.fields })));
    // Only a write with documents without text can remove postings, so only such a write has this part.
    // Its ids are gathered first (an array, looked up by the index): joined to the written rows, a planner whose
    // statistics predate the collection's growth (as in any batch) read all its postings once per written row.
    const removal = without.length === 0 ? { sql: '', bindings: [] } : {
      sql: `
        text_removed as (
          delete from text_documents t
          where t.collection_id = ?
            and t.document_id = any(array(select w.document_id from written w where not w.inserted and w.source_key = any(?::text[])))),`,
      bindings: [collectionId, without],
    };
    return {
      // As `writing` does: a rewritten document without text loses its postings, the others get theirs,
      // and every written document is one change of the new version.
      ctes: `,${removal.sql}
        text_put as (
          insert into text_documents (collection_id, document_id, postings)
          select ?, w.document_id, u.p from unnest(?::text[], ?::text[]) as u(k, p) join written w on w.source_key = u.k
          on conflict (collection_id, document_id) do update set postings = excluded.postings),
        text_bumped as (
          insert into text_versions (collection_id, version, pruned_below) values (?, 1, 0)
          on conflict (collection_id) do update set version = text_versions.version + 1 returning version),
        text_logged as (insert into text_changes (collection_id, version, document_id) select ?, b.version, w.document_id from text_bumped b, written w)`,
      bindings: [...removal.bindings, collectionId, put.keys, put.postings, collectionId, collectionId],
      version: '(select version from text_bumped)',
      committed: (version, db = this.db) => this.prune(db, collectionId, version),
    };
  }

  async remove(collectionId: string, documentIds: readonly string[], db: Knex = this.db): Promise<void> {
    if (documentIds.length === 0) return;
    const ids = [...new Set(documentIds)];
    await this.writing(db, collectionId, ids, { put: { doc: [], postings: [] }, remove: ids });
  }

  async dropCollection(collectionId: string, db: Knex = this.db): Promise<void> {
    await db.transaction(async (trx) => {
      await trx.raw('select pg_advisory_xact_lock(hashtext(?))', [`tessera.text:${collectionId}`]);
      for (const table of ['text_documents', 'text_changes', 'text_versions']) await trx(table).where({ collection_id: collectionId }).delete();
    });
    this.copies.delete(collectionId);
  }

  async statistics(collectionId: string): Promise<FieldStatistics[]> {
    const [copy] = await this.current([collectionId]);
    if (!copy) return [];
    return [...copy.fields.entries()]
      .filter(([, f]) => f.documentCount > 0)
      .sort(([a], [b]) => (a < b ? -1 : 1))
      .map(([field, f]) => ({ field, document_count: f.documentCount, average_length: f.averageLength }));
  }

  async documentFrequency(collectionId: string, field: string, term: string): Promise<number> {
    const [copy] = await this.current([collectionId]);
    return copy?.fields.get(field)?.terms.get(term)?.df ?? 0;
  }

  async search(request: TextSearchRequest): Promise<TextHit[]> {
    const params = checkParameters(request);
    const clauses = parseQuery(request.query);
    if (request.collectionIds.length === 0 || !clauses.some((c) => c.occur !== 'must_not')) return [];
    const copies = await this.current([...new Set(request.collectionIds)]);
    const candidates = new Candidates();
    for (const copy of copies) scoreCollection(copy, clauses, params, request, candidates);
    if (candidates.length === 0) return [];
    const chosen = request.principalId || request.filter ? await this.visibleBest(candidates, params.limit, request) : best(candidates, params.limit);
    return chosen.map((i) => candidates.hit(i));
  }

  /**
   * The best `limit` candidates the caller may see, checked against the documents table in score order:
   * a few more than needed first, then widening rounds until enough are found or none are left.
   */
  private async visibleBest(candidates: Candidates, limit: number, request: TextSearchRequest): Promise<number[]> {
    const access: string[] = [];
    const bindings: unknown[] = [];
    if (request.principalId) {
      access.push('(doc.owner_principal = ? or doc.grants @> ?::jsonb)');
      bindings.push(request.principalId, JSON.stringify([request.principalId]));
    }
    if (request.filter) {
      const sql = filterToSql(request.filter, request.resolveField ?? documentFieldResolver);
      if (sql) {
        access.push(sql.text);
        bindings.push(...sql.bindings);
      }
    }
    const visible: number[] = [];
    let checked = 0;
    let round = Math.max(limit * 2, 32);
    while (visible.length < limit && checked < candidates.length) {
      const ranked = best(candidates, Math.min(candidates.length, checked + round));
      const batch = ranked.slice(checked);
      checked = ranked.length;
      const ids = batch.map((i) => candidates.documentId(i));
      const rows = (await this.db.raw(
        `select doc.document_id from documents doc where doc.document_id = any(?::text[])${access.length > 0 ? ` and ${access.join(' and ')}` : ''}`,
        [ids, ...bindings] as unknown as Knex.RawBinding[],
      )) as { rows: Array<{ document_id: string }> };
      const allowed = new Set(rows.rows.map((r) => r.document_id));
      for (const i of batch) if (allowed.has(candidates.documentId(i)) && visible.length < limit) visible.push(i);
      // The next round is sized by the share of visible documents seen so far (at least doubling).
      const share = Math.max(visible.length, 1) / checked;
      round = Math.max(round * 2, Math.ceil(((limit - visible.length) / share) * 1.5));
    }
    return visible;
  }

  /** The collections' in-process copies, brought up to date with the database (absent: nothing indexed). */
  private async current(collectionIds: readonly string[]): Promise<CollectionPostings[]> {
    const rows = (await this.db.raw('select collection_id, version, pruned_below from text_versions where collection_id = any(?::text[])', [
      [...collectionIds],
    ] as unknown as Knex.RawBinding[])) as { rows: Array<{ collection_id: string; version: string | number; pruned_below: string | number }> };
    const versions = new Map(rows.rows.map((r) => [r.collection_id, { version: Number(r.version), prunedBelow: Number(r.pruned_below) }]));
    const copies: CollectionPostings[] = [];
    for (const collectionId of collectionIds) {
      const version = versions.get(collectionId);
      if (!version) {
        this.copies.delete(collectionId);
        continue;
      }
      let pending = this.catchingUp.get(collectionId);
      if (!pending) {
        pending = this.catchUp(collectionId, version.version, version.prunedBelow).finally(() => this.catchingUp.delete(collectionId));
        this.catchingUp.set(collectionId, pending);
      }
      const copy = await pending;
      if (copy) copies.push(copy);
    }
    return copies;
  }

  private async catchUp(collectionId: string, version: number, prunedBelow: number): Promise<CollectionPostings | undefined> {
    let copy = this.copies.get(collectionId);
    if (copy && copy.version < version) {
      if (copy.version < prunedBelow || copy.wasteful) copy = undefined;
      else if (!(await this.replay(copy, version))) copy = undefined;
    }
    if (!copy) copy = await this.load(collectionId, version);
    // Most recently used last; the least recently used copy goes when there are too many.
    this.copies.delete(collectionId);
    this.copies.set(collectionId, copy);
    while (this.copies.size > MAX_CACHED_COLLECTIONS) this.copies.delete(this.copies.keys().next().value!);
    return copy;
  }

  /** Re-reads the documents changed since the copy's version; false when a reload is cheaper. */
  private async replay(copy: CollectionPostings, version: number): Promise<boolean> {
    // The horizon is read in the same statement (one snapshot): a prune racing this read cannot hide changes.
    const result = (await this.db.raw(
      `select v.pruned_below, c.document_id, c.version from text_versions v
       left join (
         select document_id, max(version) as version from text_changes where collection_id = ? and version > ? group by document_id
       ) c on true
       where v.collection_id = ?`,
      [copy.collectionId, copy.version, copy.collectionId],
    )) as { rows: Array<{ pruned_below: string | number; document_id: string | null; version: string | number | null }> };
    if (result.rows.length === 0 || Number(result.rows[0]!.pruned_below) > copy.version) return false;
    const changes = result.rows.filter((r): r is typeof r & { document_id: string } => r.document_id !== null);
    if (changes.length > Math.max(5_000, copy.size / 4)) return false;
    const ids = changes.map((r) => r.document_id);
    const rows = (await this.db.raw('select document_id, postings from text_documents where collection_id = ? and document_id = any(?::text[])', [
      copy.collectionId,
      ids,
    ] as unknown as Knex.RawBinding[])) as { rows: Array<{ document_id: string; postings: string }> };
    const byDocument = new Map(rows.rows.map((r) => [r.document_id, r.postings]));
    for (const id of ids) {
      const postings = byDocument.get(id);
      copy.put(id, postings ? decodePostings(postings) : []);
    }
    copy.version = Math.max(version, ...changes.map((r) => Number(r.version)));
    return true;
  }

  /** A fresh copy, read 20,000 documents at a time, each page as one string (a row object per document costs more on PGlite). */
  private async load(collectionId: string, version: number): Promise<CollectionPostings> {
    const copy = new CollectionPostings(collectionId, version);
    let after = '';
    for (;;) {
      const page = (await this.db.raw(
        `with page as (
           select document_id, postings from text_documents where collection_id = ? and document_id > ? order by document_id limit 20000
         )
         select max(document_id) as last, string_agg(document_id || chr(29) || postings, chr(28)) as documents from page`,
        [collectionId, after],
      )) as { rows: Array<{ last: string | null; documents: string | null }> };
      const { last, documents } = page.rows[0] ?? { last: null, documents: null };
      if (!last || !documents) break;
      for (const entry of documents.split(DOCUMENT)) {
        const cut = entry.indexOf(DOCUMENT_ID);
        copy.put(entry.slice(0, cut), decodePostings(entry.slice(cut + 1)));
      }
      after = last;
    }
    return copy;
  }

  /**
   * Writes one collection's postings (`put` replaces a document's, `remove` drops them) with its change-log
   * entry, one writer per collection at a time: the lock, then one statement for the rest (on the embedded
   * database, each statement is a round trip to its thread, and the five this took cost as much as the rows).
   * Inside the caller's transaction when there is one.
   */
  private writing(
    db: Knex,
    collectionId: string,
    documentIds: readonly string[],
    change: { put: { doc: string[]; postings: string[] }; remove: readonly string[] },
  ): Promise<void> {
    const run = async (trx: Knex) => {
      await trx.raw('select pg_advisory_xact_lock(hashtext(?))', [`tessera.text:${collectionId}`]);
      const bumped = (await trx.raw(
        `with removed as (delete from text_documents where collection_id = ? and document_id = any(?::text[])),
         put as (
           insert into text_documents (collection_id, document_id, postings) select ?, d, p from unnest(?::text[], ?::text[]) as u(d, p)
           on conflict (collection_id, document_id) do update set postings = excluded.postings),
         bumped as (
           insert into text_versions (collection_id, version, pruned_below) values (?, 1, 0)
           on conflict (collection_id) do update set version = text_versions.version + 1 returning version),
         logged as (insert into text_changes (collection_id, version, document_id) select ?, bumped.version, unnest(?::text[]) from bumped)
         select version from bumped`,
        [
          collectionId, [...change.remove], collectionId, change.put.doc, change.put.postings, collectionId, collectionId, [...documentIds],
        ] as unknown as Knex.RawBinding[],
      )) as { rows: Array<{ version: string | number }> };
      await this.prune(trx, collectionId, Number(bumped.rows[0]!.version));
    };
    return db.isTransaction ? run(db) : db.transaction(run);
  }

  /**
   * Every `changeLogVersions` versions, drops the changes a copy can no longer catch up from. One statement:
   * a reader never sees the changes gone while `pruned_below` still promises them.
   */
  private async prune(db: Knex, collectionId: string, version: number): Promise<void> {
    if (version % this.changeLogVersions !== 0) return;
    const horizon = version - this.changeLogVersions;
    await db.raw(
      `with raised as (update text_versions set pruned_below = greatest(pruned_below, ?) where collection_id = ?)
       delete from text_changes where collection_id = ? and version <= ?`,
      [horizon, collectionId, collectionId, horizon],
    );
  }
}

/** Each document's encoded postings by its key, and the keys of those without any text to index. */
function encodeAll(documents: ReadonlyArray<{ key: string; fields: Record<string, string> }>): {
  put: { keys: string[]; postings: string[] };
  without: string[];
} {
  const put = { keys: [] as string[], postings: [] as string[] };
  const without: string[] = [];
  for (const doc of documents) {
    const encoded = encodePostings(doc.fields);
    if (encoded) {
      put.keys.push(doc.key);
      put.postings.push(encoded);
    } else {
      without.push(doc.key);
    }
  }
  return { put, without };
}

/** Scores one collection's documents for the query's clauses; adds the matching ones to `out`. */
function scoreCollection(copy: CollectionPostings, clauses: Clause[], params: Parameters, request: TextSearchRequest, out: Candidates): void {
  const { scores, masks, seen, excluded, touched } = copy.scratchFor(copy.documents.length);
  const alive = copy.alive;
  // touched[0 .. touchedCount): the documents scored so far (each once).
  let touchedCount = 0;
  const excludedDocs: number[] = [];
  const fields = request.fields ? request.fields.filter((f) => copy.fields.has(f)) : [...copy.fields.keys()];
  let required = 0;
  for (const [index, clause] of clauses.entries()) {
    const bit = 2 ** index;
    if (clause.occur === 'must') required |= bit;
    for (const name of fields) {
      const field = copy.fields.get(name)!;
      if (field.documentCount === 0) continue;
      const weight = request.fieldWeights?.[name] ?? 1;
      const averageLength = field.averageLength;
      const lengths = field.lengths;
      if (clause.kind === 'phrase') {
        // A phrase weighs as much as its words together (Lucene's choice): the sum of their idfs.
        const phraseIdf = clause.terms.reduce((sum, t) => sum + idf(field.documentCount, field.terms.get(t)?.df ?? 0), 0);
        for (const { doc, frequency } of phraseMatches(copy, field, clause.terms)) {
          if (clause.occur === 'must_not') {
            if (!excluded[doc]) excludedDocs.push(doc);
            excluded[doc] = 1;
            continue;
          }
          if (!seen[doc]) {
            seen[doc] = 1;
            touched[touchedCount++] = doc;
          }
          scores[doc] = scores[doc]! + weight * termScore(params, phraseIdf, frequency, lengths[doc]!, averageLength);
          masks[doc] = masks[doc]! | bit;
        }
        continue;
      }
      const { c1, c2 } = lengthConstants(params, averageLength);
      const words = clause.kind === 'term' ? [clause.term] : expandPrefix(field, clause.prefix);
      for (const word of words) {
        const list = field.terms.get(word);
        if (!list || list.df <= 0) continue;
        const w = idf(field.documentCount, list.df) * (params.k1 + 1) * weight;
        const { docs, tfs } = list;
        const n = docs.length;
        if (clause.occur === 'must_not') {
          for (let i = 0; i < n; i++) {
            const doc = docs[i]!;
            if (alive[doc] && !excluded[doc]) {
              excluded[doc] = 1;
              excludedDocs.push(doc);
            }
          }
          continue;
        }
        for (let i = 0; i < n; i++) {
          const doc = docs[i]!;
          if (alive[doc] === 0) continue;
          const tf = tfs[i]!;
          if (seen[doc] === 0) {
            seen[doc] = 1;
            touched[touchedCount++] = doc;
          }
          scores[doc] = scores[doc]! + (w * tf) / (tf + c1 + c2 * lengths[doc]!);
          masks[doc] = masks[doc]! | bit;
        }
      }
    }
  }
  const allowed = request.documentIds ? new Set(request.documentIds.map((id) => copy.internalId(id))) : undefined;
  const copyIndex = out.copies.push(copy) - 1;
  const minScore = params.minScore ?? -Infinity;
  out.reserve(touchedCount);
  const { copyOf, docs: outDocs, scores: outScores } = out;
  let n = out.length;
  for (let t = 0; t < touchedCount; t++) {
    const doc = touched[t]!;
    const score = scores[doc]!;
    if ((masks[doc]! & required) === required && excluded[doc] === 0 && score >= minScore && (!allowed || allowed.has(doc))) {
      copyOf[n] = copyIndex;
      outDocs[n] = doc;
      outScores[n] = score;
      n++;
    }
    // Leave the scratch space zeroed for the next query.
    scores[doc] = 0;
    masks[doc] = 0;
    seen[doc] = 0;
  }
  out.length = n;
  for (const doc of excludedDocs) excluded[doc] = 0;
}

/** Documents where the words stand next to each other in order, with how often (from the rarest word's documents). */
function phraseMatches(copy: CollectionPostings, field: FieldPostings, words: string[]): Array<{ doc: number; frequency: number }> {
  const lists = words.map((w) => field.terms.get(w));
  if (lists.some((l) => !l || l.df <= 0)) return [];
  const postings = lists as TermPostings[];
  const rarest = postings.reduce((a, b) => (b.docs.length < a.docs.length ? b : a));
  const entries = new Array<number>(words.length);
  const matches: Array<{ doc: number; frequency: number }> = [];
  let checked = 0;
  for (let i = 0; i < rarest.docs.length && checked < MAX_PHRASE_CANDIDATES; i++) {
    const doc = rarest.docs[i]!;
    if (!copy.isAlive(doc)) continue;
    checked++;
    let all = true;
    for (let k = 0; k < postings.length && all; k++) {
      entries[k] = postings[k]!.find(doc);
      all = entries[k]! >= 0;
    }
    if (!all) continue;
    // Each start of the first word where word k stands at start + k, for every k.
    let frequency = 0;
    const first = postings[0]!;
    const firstStart = first.starts[entries[0]!]!;
    for (let p = firstStart; p < firstStart + first.tfs[entries[0]!]!; p++) {
      const start = first.positions[p]!;
      let adjacent = true;
      for (let k = 1; k < postings.length && adjacent; k++) adjacent = hasPosition(postings[k]!, entries[k]!, start + k);
      if (adjacent) frequency++;
    }
    if (frequency > 0) matches.push({ doc, frequency });
  }
  return matches;
}

function hasPosition(list: TermPostings, entry: number, position: number): boolean {
  const from = list.starts[entry]!;
  const to = from + list.tfs[entry]!;
  for (let p = from; p < to; p++) if (list.positions[p] === position) return true;
  return false;
}

/** The field's most frequent terms starting with `prefix`, looking at a bounded number of terms. */
function expandPrefix(field: FieldPostings, prefix: string): string[] {
  const sorted = field.sortedTerms();
  let lo = 0;
  let hi = sorted.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (sorted[mid]! < prefix) lo = mid + 1;
    else hi = mid;
  }
  const found: Array<[string, number]> = [];
  for (let i = lo; i < sorted.length && found.length < MAX_PREFIX_SCAN && sorted[i]!.startsWith(prefix); i++) {
    const df = field.terms.get(sorted[i]!)!.df;
    if (df > 0) found.push([sorted[i]!, df]);
  }
  return found
    .sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1))
    .slice(0, MAX_PREFIX_EXPANSIONS)
    .map(([term]) => term);
}

/** Indexes of the `n` best candidates, best first (ties by document id): a bounded heap, not a full sort. */
function best(candidates: Candidates, n: number): number[] {
  const { scores } = candidates;
  const better = (a: number, b: number) =>
    scores[a]! > scores[b]! || (scores[a] === scores[b] && candidates.documentId(a) < candidates.documentId(b));
  const order = (a: number, b: number) => (better(a, b) ? -1 : better(b, a) ? 1 : 0);
  if (n >= candidates.length) return Array.from({ length: candidates.length }, (_, i) => i).sort(order);
  // Min-heap of the best n so far: its root is the worst of them.
  const heap: number[] = [];
  const up = (i: number) => {
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!better(heap[parent]!, heap[i]!)) break;
      [heap[parent], heap[i]] = [heap[i]!, heap[parent]!];
      i = parent;
    }
  };
  const down = (i: number) => {
    for (;;) {
      const l = 2 * i + 1;
      const r = l + 1;
      let worst = i;
      if (l < heap.length && better(heap[worst]!, heap[l]!)) worst = l;
      if (r < heap.length && better(heap[worst]!, heap[r]!)) worst = r;
      if (worst === i) return;
      [heap[worst], heap[i]] = [heap[i]!, heap[worst]!];
      i = worst;
    }
  };
  for (let c = 0; c < candidates.length; c++) {
    if (heap.length < n) {
      heap.push(c);
      up(heap.length - 1);
    } else if (scores[c]! >= scores[heap[0]!]! && better(c, heap[0]!)) {
      heap[0] = c;
      down(0);
    }
  }
  return heap.sort(order);
}

function checkParameters(request: TextSearchRequest): Parameters {
  const k1 = request.k1 ?? DEFAULT_BM25.k1;
  const b = request.b ?? DEFAULT_BM25.b;
  if (!Number.isFinite(k1) || k1 < 0 || k1 > 10) throw new InputError(`k1 must be a number in 0..10, got ${k1}`, { k1 });
  if (!Number.isFinite(b) || b < 0 || b > 1) throw new InputError(`b must be a number in 0..1, got ${b}`, { b });
  if (!Number.isInteger(request.limit) || request.limit < 1 || request.limit > MAX_SEARCH_LIMIT) {
    throw new InputError(`limit must be an integer in 1..${MAX_SEARCH_LIMIT}, got ${request.limit}`, { limit: request.limit });
  }
  for (const [field, weight] of Object.entries(request.fieldWeights ?? {})) {
    if (!Number.isFinite(weight) || weight < 0) throw new InputError(`the weight of field '${field}' must be a non-negative number`, { field });
  }
  return { k1, b, limit: request.limit, minScore: request.minScore };
}
