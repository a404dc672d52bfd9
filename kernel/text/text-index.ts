/**
 * TextIndex: BM25 full-text search over chosen text fields of a collection's documents, stored in the
 * database (PGlite or PostgreSQL, the same SQL), so every API process sees a write at its next query and
 * nothing has to be rebuilt at start.
 *
 * Tables (kernel migrations below):
 * - `text_postings` (collection, field, term, document) → term frequency, the field's length, positions.
 *   Its primary key is the search path: one index range per (collection, field, term).
 * - `text_terms` (collection, field, term) → document frequency (idf, prefix expansion by frequency).
 * - `text_stats` (collection, field) → documents that have the field and their summed length (avgdl).
 * Statistics are kept by deltas in the same transaction as the postings, serialized per collection
 * with a transaction-scoped advisory lock (two writers adding the same terms would otherwise deadlock
 * on `text_terms` rows).
 *
 * Scoring is one SQL statement: a tiny table of (collection, field, term, weight, c1, c2) rows computed
 * here from the statistics (see bm25.ts) joins the postings, sums per document and keeps the top k.
 * Phrases are matched here from positions and enter the same statement as precomputed contributions.
 * Who may read a document (owner, grants) and user filters are checked against the `documents` table
 * itself inside that statement, before the limit: grants and revocations act at once, and no caller
 * can get another principal's documents, or fewer results than it may see, because of a later filter.
 */
import type { Knex } from 'knex';
import { InputError } from '../errors.js';
import type { Migration } from '../db/migrations.js';
import type { ParsedFilter } from '../filters/filter.js';
import { filterToSql, type FieldResolver } from '../filters/sql.js';
import { analyzeField } from './analyzer.js';
import { DEFAULT_BM25, idf, lengthConstants, termScore, type Bm25Parameters } from './bm25.js';
import { parseQuery, type Clause } from './query.js';
import { documentFieldResolver } from './documents.js';

/** Terms one prefix expands to at most (the most frequent ones). */
export const MAX_PREFIX_EXPANSIONS = 64;
/** Index entries a prefix expansion reads at most before picking the most frequent terms. */
export const MAX_PREFIX_SCAN = 5_000;
/** Documents a phrase is checked in at most (those holding its rarest word). */
export const MAX_PHRASE_CANDIDATES = 10_000;
export const MAX_SEARCH_LIMIT = 10_000;

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
  /** A filter over the documents (fields, metadata, columns), applied inside the query. */
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

export interface TextIndex {
  /** Indexes (or re-indexes) documents of one collection; `db` lets a caller's transaction include it. */
  index(collectionId: string, documents: readonly TextDocument[], db?: Knex): Promise<void>;
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
      await db.raw(`create table text_postings (
        collection_id text not null,
        field text not null,
        term text collate "C" not null,
        document_id text not null,
        tf integer not null,
        dl integer not null,
        positions integer[] not null,
        primary key (collection_id, field, term, document_id))`);
      await db.raw('create index text_postings_document on text_postings (collection_id, document_id)');
      await db.raw(`create table text_terms (
        collection_id text not null,
        field text not null,
        term text collate "C" not null,
        df integer not null,
        primary key (collection_id, field, term))`);
      await db.raw(`create table text_stats (
        collection_id text not null,
        field text not null,
        document_count bigint not null,
        total_length bigint not null,
        primary key (collection_id, field))`);
    },
  },
];

interface Stat {
  collection_id: string;
  field: string;
  document_count: number;
  total_length: number;
}

/** One row of the scoring statement's query table. */
interface WeightedTerm {
  collection_id: string;
  field: string;
  term: string;
  clause: number;
  /** idf · (k1 + 1) · field weight */
  weight: number;
  c1: number;
  c2: number;
}

interface Contribution {
  collection_id: string;
  document_id: string;
  clause: number;
  score: number;
}

export class SqlTextIndex implements TextIndex {
  constructor(private readonly db: Knex) {}

  async index(collectionId: string, documents: readonly TextDocument[], db: Knex = this.db): Promise<void> {
    if (documents.length === 0) return;
    const unique = [...new Map(documents.map((d) => [d.document_id, d])).values()];
    const postings = { field: [] as string[], term: [] as string[], doc: [] as string[], tf: [] as number[], dl: [] as number[], positions: [] as string[] };
    const df = new Map<string, number>();
    const stats = new Map<string, { count: number; length: number }>();
    for (const doc of unique) {
      for (const [field, text] of Object.entries(doc.fields)) {
        if (typeof text !== 'string') continue;
        const analyzed = analyzeField(text);
        if (analyzed.length === 0) continue;
        const stat = stats.get(field) ?? { count: 0, length: 0 };
        stat.count += 1;
        stat.length += analyzed.length;
        stats.set(field, stat);
        for (const [term, positions] of analyzed.terms) {
          postings.field.push(field);
          postings.term.push(term);
          postings.doc.push(doc.document_id);
          postings.tf.push(positions.length);
          postings.dl.push(analyzed.length);
          postings.positions.push(`{${positions.join(',')}}`);
          const key = `${field}\u0000${term}`;
          df.set(key, (df.get(key) ?? 0) + 1);
        }
      }
    }
    await this.writing(db, collectionId, async (trx) => {
      await this.removeIn(trx, collectionId, unique.map((d) => d.document_id));
      if (postings.doc.length === 0) return;
      for (let start = 0; start < postings.doc.length; start += 50_000) {
        const end = start + 50_000;
        await trx.raw(
          `insert into text_postings (collection_id, field, term, document_id, tf, dl, positions)
           select ?, f, t, d, tf, dl, p::integer[] from unnest(?::text[], ?::text[], ?::text[], ?::integer[], ?::integer[], ?::text[]) as u(f, t, d, tf, dl, p)`,
          [
            collectionId, postings.field.slice(start, end), postings.term.slice(start, end), postings.doc.slice(start, end),
            postings.tf.slice(start, end), postings.dl.slice(start, end), postings.positions.slice(start, end),
          ] as unknown as Knex.RawBinding[],
        );
      }
      const statFields = [...stats.keys()];
      await trx.raw(
        `insert into text_stats (collection_id, field, document_count, total_length)
         select ?, f, n, l from unnest(?::text[], ?::bigint[], ?::bigint[]) as u(f, n, l)
         on conflict (collection_id, field) do update set document_count = text_stats.document_count + excluded.document_count,
           total_length = text_stats.total_length + excluded.total_length`,
        [collectionId, statFields, statFields.map((f) => stats.get(f)!.count), statFields.map((f) => stats.get(f)!.length)] as unknown as Knex.RawBinding[],
      );
      const keys = [...df.keys()];
      await trx.raw(
        `insert into text_terms (collection_id, field, term, df)
         select ?, f, t, n from unnest(?::text[], ?::text[], ?::integer[]) as u(f, t, n)
         on conflict (collection_id, field, term) do update set df = text_terms.df + excluded.df`,
        [
          collectionId, keys.map((k) => k.slice(0, k.indexOf('\u0000'))), keys.map((k) => k.slice(k.indexOf('\u0000') + 1)), keys.map((k) => df.get(k)!),
        ] as unknown as Knex.RawBinding[],
      );
    });
  }

  async remove(collectionId: string, documentIds: readonly string[], db: Knex = this.db): Promise<void> {
    if (documentIds.length === 0) return;
    await this.writing(db, collectionId, (trx) => this.removeIn(trx, collectionId, documentIds));
  }

  async dropCollection(collectionId: string, db: Knex = this.db): Promise<void> {
    await this.writing(db, collectionId, async (trx) => {
      for (const table of ['text_postings', 'text_terms', 'text_stats']) await trx(table).where({ collection_id: collectionId }).delete();
    });
  }

  async statistics(collectionId: string): Promise<FieldStatistics[]> {
    const rows = (await this.db('text_stats').where({ collection_id: collectionId }).where('document_count', '>', 0).orderBy('field')) as Stat[];
    return rows.map((r) => ({
      field: r.field,
      document_count: Number(r.document_count),
      average_length: Number(r.total_length) / Number(r.document_count),
    }));
  }

  async documentFrequency(collectionId: string, field: string, term: string): Promise<number> {
    const row = (await this.db('text_terms').where({ collection_id: collectionId, field, term }).first('df')) as { df: number } | undefined;
    return row ? Number(row.df) : 0;
  }

  async search(request: TextSearchRequest): Promise<TextHit[]> {
    const params = checkParameters(request);
    const clauses = parseQuery(request.query);
    if (request.collectionIds.length === 0 || !clauses.some((c) => c.occur !== 'must_not')) return [];
    const collectionIds = [...new Set(request.collectionIds)];

    // Statistics of the searched fields, per collection (idf and avgdl come from each collection's own).
    const statsQuery = this.db('text_stats').whereIn('collection_id', collectionIds).where('document_count', '>', 0);
    if (request.fields) statsQuery.whereIn('field', [...request.fields]);
    const stats = ((await statsQuery) as Stat[]).map((s) => ({ ...s, document_count: Number(s.document_count), total_length: Number(s.total_length) }));
    if (stats.length === 0) return [];
    const fields = [...new Set(stats.map((s) => s.field))];

    const expansions = await this.expandPrefixes(collectionIds, fields, clauses);
    const allTerms = new Set<string>();
    for (const clause of clauses) for (const term of clauseTerms(clause, expansions)) allTerms.add(term);
    const frequencies = await this.frequencies(collectionIds, fields, [...allTerms]);

    const weighted: WeightedTerm[] = [];
    const excludedTerms: string[] = [];
    const contributions: Contribution[] = [];
    const excludedDocuments: Array<{ collection_id: string; document_id: string }> = [];
    const required: number[] = [];
    for (const [clauseIndex, clause] of clauses.entries()) {
      if (clause.occur === 'must') required.push(clauseIndex);
      if (clause.kind === 'phrase') {
        const matches = await this.phraseMatches(collectionIds, fields, clause.terms, frequencies);
        for (const match of matches) {
          const stat = stats.find((s) => s.collection_id === match.collection_id && s.field === match.field);
          if (!stat) continue;
          if (clause.occur === 'must_not') {
            excludedDocuments.push(match);
            continue;
          }
          // A phrase weighs as much as its words together (Lucene's choice): the sum of their idfs.
          const phraseIdf = clause.terms.reduce((sum, t) => sum + idf(stat.document_count, frequencies.get(frequencyKey(match.collection_id, match.field, t)) ?? 0), 0);
          const weight = request.fieldWeights?.[match.field] ?? 1;
          contributions.push({
            collection_id: match.collection_id,
            document_id: match.document_id,
            clause: clauseIndex,
            score: weight * termScore(params, phraseIdf, match.frequency, match.length, stat.total_length / stat.document_count),
          });
        }
        continue;
      }
      const termsOfClause = clauseTerms(clause, expansions);
      if (clause.occur === 'must_not') {
        excludedTerms.push(...termsOfClause);
        continue;
      }
      for (const stat of stats) {
        const averageLength = stat.total_length / stat.document_count;
        const { c1, c2 } = lengthConstants(params, averageLength);
        const weight = request.fieldWeights?.[stat.field] ?? 1;
        for (const term of termsOfClause) {
          const documentFrequency = frequencies.get(frequencyKey(stat.collection_id, stat.field, term));
          if (!documentFrequency) continue;
          weighted.push({
            collection_id: stat.collection_id,
            field: stat.field,
            term,
            clause: clauseIndex,
            weight: idf(stat.document_count, documentFrequency) * (params.k1 + 1) * weight,
            c1,
            c2,
          });
        }
      }
    }
    if (weighted.length === 0 && contributions.length === 0) return [];
    return this.score({ request, params, fields, weighted, contributions, required, excludedTerms, excludedDocuments });
  }

  private async score(plan: {
    request: TextSearchRequest;
    params: Bm25Parameters & { limit: number; minScore: number | undefined };
    fields: string[];
    weighted: WeightedTerm[];
    contributions: Contribution[];
    required: number[];
    excludedTerms: string[];
    excludedDocuments: Array<{ collection_id: string; document_id: string }>;
  }): Promise<TextHit[]> {
    const { request, params, weighted, contributions } = plan;
    const bindings: unknown[] = [];
    const bind = (value: unknown) => {
      bindings.push(value);
      return '?';
    };
    const conditions: string[] = [];
    if (params.minScore !== undefined) conditions.push(`g.score >= ${bind(params.minScore)}`);
    if (plan.required.length > 0) conditions.push(`g.clauses @> ${bind(plan.required)}::integer[]`);
    if (plan.excludedTerms.length > 0) {
      conditions.push(`not exists (select 1 from text_postings x where x.collection_id = g.collection_id and x.field = any(${bind(plan.fields)}::text[])
        and x.term = any(${bind(plan.excludedTerms)}::text[]) and x.document_id = g.document_id)`);
    }
    if (plan.excludedDocuments.length > 0) {
      conditions.push(`(g.collection_id, g.document_id) not in (select c, d from unnest(${bind(plan.excludedDocuments.map((d) => d.collection_id))}::text[],
        ${bind(plan.excludedDocuments.map((d) => d.document_id))}::text[]) as x(c, d))`);
    }
    if (request.documentIds) conditions.push(`g.document_id = any(${bind([...request.documentIds])}::text[])`);
    const access: string[] = [];
    if (request.principalId) {
      access.push(`(doc.owner_principal = ${bind(request.principalId)} or doc.grants @> ${bind(JSON.stringify([request.principalId]))}::jsonb)`);
    }
    if (request.filter) {
      const sql = filterToSql(request.filter, request.resolveField ?? documentFieldResolver);
      if (sql) {
        access.push(sql.text);
        bindings.push(...sql.bindings);
      }
    }
    if (access.length > 0) {
      conditions.push(`exists (select 1 from documents doc where doc.document_id = g.document_id and doc.collection_id = g.collection_id and ${access.join(' and ')})`);
    }
    const clauseColumn = plan.required.length > 0 ? ', array_agg(distinct clause) as clauses' : '';
    const sql = `
      with q as (
        select * from unnest(?::text[], ?::text[], ?::text[], ?::integer[], ?::float8[], ?::float8[], ?::float8[])
          as q(collection_id, field, term, clause, w, c1, c2)
      ), hits as (
        select p.collection_id, p.document_id, q.clause, q.w * p.tf / (p.tf + q.c1 + q.c2 * p.dl) as s
        from q join text_postings p on p.collection_id = q.collection_id and p.field = q.field and p.term = q.term
        union all
        select * from unnest(?::text[], ?::text[], ?::integer[], ?::float8[]) as x(collection_id, document_id, clause, s)
      ), g as (
        select collection_id, document_id, sum(s) as score${clauseColumn} from hits group by collection_id, document_id
      )
      select g.collection_id, g.document_id, g.score from g
      ${conditions.length > 0 ? `where ${conditions.join(' and ')}` : ''}
      order by g.score desc, g.document_id
      limit ${Number(params.limit)}`;
    const head = [
      weighted.map((w) => w.collection_id), weighted.map((w) => w.field), weighted.map((w) => w.term), weighted.map((w) => w.clause),
      weighted.map((w) => w.weight), weighted.map((w) => w.c1), weighted.map((w) => w.c2),
      contributions.map((c) => c.collection_id), contributions.map((c) => c.document_id), contributions.map((c) => c.clause), contributions.map((c) => c.score),
    ];
    const result = (await this.db.raw(sql, [...head, ...bindings] as unknown as Knex.RawBinding[])) as { rows: Array<{ collection_id: string; document_id: string; score: number | string }> };
    return result.rows.map((r) => ({ document_id: r.document_id, collection_id: r.collection_id, score: Number(r.score) }));
  }

  /** Each prefix's most frequent indexed terms, reading a bounded slice of the term index. */
  private async expandPrefixes(collectionIds: string[], fields: string[], clauses: Clause[]): Promise<Map<string, string[]>> {
    const expansions = new Map<string, string[]>();
    for (const clause of clauses) {
      if (clause.kind !== 'prefix' || expansions.has(clause.prefix)) continue;
      const rows = (await this.db.raw(
        `select term, df from text_terms where collection_id = any(?::text[]) and field = any(?::text[]) and term >= ? and term < ? and df > 0 limit ${MAX_PREFIX_SCAN}`,
        [collectionIds, fields, clause.prefix, prefixUpperBound(clause.prefix)] as unknown as Knex.RawBinding[],
      )) as { rows: Array<{ term: string; df: number }> };
      const byTerm = new Map<string, number>();
      for (const row of rows.rows) byTerm.set(row.term, (byTerm.get(row.term) ?? 0) + Number(row.df));
      const chosen = [...byTerm.entries()].sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1)).slice(0, MAX_PREFIX_EXPANSIONS);
      expansions.set(clause.prefix, chosen.map(([term]) => term));
    }
    return expansions;
  }

  private async frequencies(collectionIds: string[], fields: string[], terms: string[]): Promise<Map<string, number>> {
    const result = new Map<string, number>();
    if (terms.length === 0) return result;
    const rows = (await this.db.raw(
      'select collection_id, field, term, df from text_terms where collection_id = any(?::text[]) and field = any(?::text[]) and term = any(?::text[]) and df > 0',
      [collectionIds, fields, terms] as unknown as Knex.RawBinding[],
    )) as { rows: Array<{ collection_id: string; field: string; term: string; df: number }> };
    for (const r of rows.rows) result.set(frequencyKey(r.collection_id, r.field, r.term), Number(r.df));
    return result;
  }

  /**
   * Documents where the phrase's words stand next to each other in order, with how often. Candidates are
   * the documents holding the phrase's rarest word (at most MAX_PHRASE_CANDIDATES per field).
   */
  private async phraseMatches(collectionIds: string[], fields: string[], words: string[], frequencies: Map<string, number>) {
    const matches: Array<{ collection_id: string; document_id: string; field: string; frequency: number; length: number }> = [];
    const distinct = [...new Set(words)];
    for (const collectionId of collectionIds) {
      for (const field of fields) {
        const dfs = distinct.map((t) => frequencies.get(frequencyKey(collectionId, field, t)) ?? 0);
        if (dfs.some((n) => n === 0)) continue;
        const rarest = distinct[dfs.indexOf(Math.min(...dfs))]!;
        const rows = (await this.db.raw(
          `with c as (
             select document_id from text_postings where collection_id = ? and field = ? and term = ? limit ${MAX_PHRASE_CANDIDATES}
           )
           select p.document_id, p.term, p.dl, p.positions from c
           join text_postings p on p.collection_id = ? and p.field = ? and p.term = any(?::text[]) and p.document_id = c.document_id`,
          [collectionId, field, rarest, collectionId, field, distinct] as unknown as Knex.RawBinding[],
        )) as { rows: Array<{ document_id: string; term: string; dl: number; positions: number[] | string }> };
        const byDocument = new Map<string, { length: number; positions: Map<string, Set<number>> }>();
        for (const row of rows.rows) {
          const entry = byDocument.get(row.document_id) ?? { length: Number(row.dl), positions: new Map<string, Set<number>>() };
          entry.positions.set(row.term, new Set(parsePositions(row.positions)));
          byDocument.set(row.document_id, entry);
        }
        for (const [documentId, entry] of byDocument) {
          if (entry.positions.size < distinct.length) continue;
          let frequency = 0;
          for (const start of entry.positions.get(words[0]!)!) {
            if (words.every((w, i) => entry.positions.get(w)!.has(start + i))) frequency++;
          }
          if (frequency > 0) matches.push({ collection_id: collectionId, document_id: documentId, field, frequency, length: entry.length });
        }
      }
    }
    return matches;
  }

  private async removeIn(trx: Knex, collectionId: string, documentIds: readonly string[]): Promise<void> {
    const ids = [...documentIds];
    // What the removed postings counted is subtracted from the statistics in the same statement.
    const changed = (await trx.raw(
      `with gone as (
         delete from text_postings where collection_id = ? and document_id = any(?::text[]) returning field, term, document_id, dl
       ), lengths as (
         insert into text_stats (collection_id, field, document_count, total_length)
         select ?, field, -count(*), -sum(dl) from (select distinct document_id, field, dl from gone) d group by field
         on conflict (collection_id, field) do update set document_count = text_stats.document_count + excluded.document_count,
           total_length = text_stats.total_length + excluded.total_length
       )
       insert into text_terms (collection_id, field, term, df)
       select ?, field, term, -count(*) from gone group by field, term
       on conflict (collection_id, field, term) do update set df = text_terms.df + excluded.df
       returning field, term, df`,
      [collectionId, ids, collectionId, collectionId] as unknown as Knex.RawBinding[],
    )) as { rows: Array<{ field: string; term: string; df: number }> };
    const emptied = changed.rows.filter((r) => Number(r.df) <= 0);
    if (emptied.length > 0) {
      await trx.raw(
        `delete from text_terms where collection_id = ? and (field, term) in (select f, t from unnest(?::text[], ?::text[]) as u(f, t)) and df <= 0`,
        [collectionId, emptied.map((r) => r.field), emptied.map((r) => r.term)] as unknown as Knex.RawBinding[],
      );
    }
  }

  /** Runs index writes of one collection one at a time (in the caller's transaction when given one). */
  private writing(db: Knex, collectionId: string, work: (trx: Knex) => Promise<void>): Promise<void> {
    return db.transaction(async (trx) => {
      await trx.raw('select pg_advisory_xact_lock(hashtext(?))', [`tessera.text:${collectionId}`]);
      await work(trx);
    });
  }
}

function checkParameters(request: TextSearchRequest): Bm25Parameters & { limit: number; minScore: number | undefined } {
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

function clauseTerms(clause: Clause, expansions: Map<string, string[]>): string[] {
  if (clause.kind === 'term') return [clause.term];
  if (clause.kind === 'prefix') return expansions.get(clause.prefix) ?? [];
  return clause.terms;
}

function frequencyKey(collectionId: string, field: string, term: string): string {
  return `${collectionId}\u0000${field}\u0000${term}`;
}

/** The smallest string above every string starting with `prefix`, in code point order (collate "C"). */
export function prefixUpperBound(prefix: string): string {
  const points = Array.from(prefix);
  const last = points.pop()!;
  const code = last.codePointAt(0)!;
  if (code >= 0x10ffff) return prefix + '\u{10ffff}';
  // Skip the surrogate range, which has no code points of its own.
  const next = code + 1 >= 0xd800 && code + 1 <= 0xdfff ? 0xe000 : code + 1;
  return points.join('') + String.fromCodePoint(next);
}

function parsePositions(value: number[] | string): number[] {
  if (Array.isArray(value)) return value.map(Number);
  return value.replace(/[{}]/g, '').split(',').filter(Boolean).map(Number);
}
