/**
 * The TextIndex on the kernel's database (PGlite by default; PostgreSQL with TEST_DATABASE_URL — run both:
 * the expected numbers are the same). Documents are written through the collections plugin's
 * DocumentStore, so these tests also cover the seam that keeps the index current.
 */
import type { Knex } from 'knex';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseFilter } from '../../../kernel/filters/filter.js';
import { DatabaseHandle, TextIndex } from '../../../kernel/tokens.js';
import { MAX_PREFIX_EXPANSIONS, SqlTextIndex, type TextIndex as TextIndexShape, type TextSearchRequest } from '../../../kernel/text/index.js';
import { DocumentStore, type DocumentRow } from '../../../plugins/resources/collections/document-store.js';
import { startTestKernel, type TestKernel } from '../../support/kernel.js';

let t: TestKernel;
let db: Knex;
let text: TextIndexShape;
let documents: DocumentStore;

const ORG = 'org_text_test';
const NS = 'ns_text_test';

async function createCollection(id: string): Promise<void> {
  const now = new Date();
  await db('collections').insert({
    collection_id: id, organization_id: ORG, namespace_id: NS, collection_name: id, description: null,
    source: JSON.stringify({ type: 'bucket', bucket_id: 'b' }), feature_extractors: '[]', taxonomy_applications: '[]', enabled: true,
    metadata: '{}', document_handling: '{}', cache_config: '{}', source_lineage: '[]', output_schema: '{"properties":{}}',
    status: 'ready', created_at: now, updated_at: now,
  });
}

async function write(collectionId: string, key: string, fields: Record<string, unknown>, access: { owner?: string; grants?: string[] } = {}): Promise<DocumentRow> {
  const [row] = await documents.upsertMany([
    {
      organizationId: ORG, namespaceId: NS, collectionId, sourceKey: key, rootObjectId: null, sourceCollectionId: null, sourceDocumentId: null,
      processingTier: 0, fields, ownerPrincipal: access.owner ?? null, grants: access.grants ?? [],
    },
  ]);
  return row!;
}

function search(collectionIds: string[], query: string, extra: Partial<TextSearchRequest> = {}) {
  return text.search({ collectionIds, query, limit: 10, ...extra });
}

const ids = (hits: Array<{ document_id: string }>) => hits.map((h) => h.document_id);

beforeAll(async () => {
  t = await startTestKernel();
  db = t.kernel.services.get(DatabaseHandle).db;
  text = t.kernel.services.get(TextIndex);
  documents = new DocumentStore(db, text);
});
afterAll(async () => {
  await t?.stop();
});

describe('BM25 over the collection', () => {
  const col = 'col_bm25';
  let d1: DocumentRow, d2: DocumentRow, d3: DocumentRow;
  beforeAll(async () => {
    await createCollection(col);
    d1 = await write(col, 'd1', { text: 'The quick brown fox', page: 1 });
    d2 = await write(col, 'd2', { text: 'the lazy dog' });
    d3 = await write(col, 'd3', { text: 'The quick dog jumps over the lazy fox' });
  });

  it('scores like the hand-computed example', async () => {
    // N = 3 documents with `text`, lengths 4, 3 and 8: avgdl = 15 / 3 = 5. k1 = 1.2, b = 0.75.
    // df(quick) = df(fox) = 2 → idf = ln(1 + (3 − 2 + 0.5) / (2 + 0.5)) = ln(1.6) = 0.4700036292
    // d1 (|D| = 4): per term 0.4700036292 · 2.2 / (1 + 1.2 · (0.25 + 0.75 · 4/5)) = 0.4700036292 · 2.2 / 2.02
    //               = 0.5118851408; two terms → 1.0237702815
    // d3 (|D| = 8): per term 0.4700036292 · 2.2 / (1 + 1.2 · (0.25 + 0.75 · 8/5)) = 0.4700036292 · 2.2 / 2.74
    //               = 0.3773751768; two terms → 0.7547503535
    const hits = await search([col], 'quick fox');
    expect(ids(hits)).toEqual([d1.document_id, d3.document_id]);
    expect(hits[0]!.score).toBeCloseTo(1.0237702815, 8);
    expect(hits[1]!.score).toBeCloseTo(0.7547503535, 8);
    expect(hits.every((h) => h.collection_id === col)).toBe(true);
    expect(await text.statistics(col)).toEqual([{ field: 'text', document_count: 3, average_length: 5 }]);

    // "the" is in every document (df = 3): idf = ln(1 + 0.5 / 3.5) = 0.1335313926, still positive.
    // d2 (|D| = 3, tf 1): 0.1335313926 · 2.2 / (1 + 1.2 · (0.25 + 0.75 · 3/5)) = 0.1335313926 · 2.2 / 1.84 = 0.1596570999
    // d3 (|D| = 8, tf 2): 0.1335313926 · 2 · 2.2 / (2 + 1.2 · 1.45) = 0.1335313926 · 4.4 / 3.74 = 0.1570957560
    // d1 (|D| = 4, tf 1): 0.1335313926 · 2.2 / 2.02 = 0.1454302296
    const the = await search([col], 'the');
    expect(ids(the)).toEqual([d2.document_id, d3.document_id, d1.document_id]);
    expect(the.map((h) => h.score)).toEqual([expect.closeTo(0.1596570999, 8), expect.closeTo(0.157095756, 8), expect.closeTo(0.1454302296, 8)]);
  });

  it('takes k1 and b from the request', async () => {
    // b = 0: no length normalization, so d1 and d3 tie on "quick" (tf 1 each): 0.4700036292 · 2.2 / 2.2.
    const hits = await search([col], 'quick', { b: 0 });
    expect(hits.map((h) => h.score)).toEqual([expect.closeTo(0.4700036292, 8), expect.closeTo(0.4700036292, 8)]);
    await expect(search([col], 'quick', { k1: -1 })).rejects.toThrow(/k1/);
    await expect(search([col], 'quick', { b: 2 })).rejects.toThrow(/b must/);
  });

  it('matches phrases by position', async () => {
    // A phrase weighs the sum of its words' idfs: ln(1.6) + ln(1 + 2.5/1.5) = 0.4700036292 + 0.9808292530;
    // d1 (|D| = 4, tf 1): 1.4508328822 · 2.2 / 2.02 = 1.5801150203.
    const hits = await search([col], '"quick brown"');
    expect(ids(hits)).toEqual([d1.document_id]);
    expect(hits[0]!.score).toBeCloseTo(1.5801150203, 8);
    expect(await search([col], '"brown quick"')).toEqual([]);
    expect(ids(await search([col], '"lazy dog"'))).toEqual([d2.document_id]);
    expect(ids(await search([col], '"the lazy"'))).toEqual(expect.arrayContaining([d2.document_id, d3.document_id]));
  });

  it('expands prefixes', async () => {
    expect(ids(await search([col], 'jum*'))).toEqual([d3.document_id]);
    expect(ids(await search([col], 'qu*')).sort()).toEqual([d1.document_id, d3.document_id].sort());
    expect(await search([col], 'zz*')).toEqual([]);
  });

  it('honours must and must-not', async () => {
    expect(ids(await search([col], '+dog fox'))).toEqual([d3.document_id, d2.document_id]);
    expect(ids(await search([col], '-lazy fox'))).toEqual([d1.document_id]);
    expect(ids(await search([col], 'fox -"lazy fox"'))).toEqual([d1.document_id]);
    expect(ids(await search([col], '+"lazy dog" the'))).toEqual([d2.document_id]);
    expect(await search([col], '-fox')).toEqual([]);
  });

  it('applies min_score, fields, field weights and document filters inside the query', async () => {
    expect(ids(await search([col], 'quick fox', { minScore: 0.9 }))).toEqual([d1.document_id]);
    expect(await search([col], 'quick', { fields: ['title'] })).toEqual([]);
    const weighted = await search([col], 'quick', { fieldWeights: { text: 2 } });
    expect(weighted[0]!.score).toBeCloseTo(2 * 0.5118851408, 8);
    const filtered = await search([col], 'quick fox', { filter: parseFilter({ AND: [{ field: 'page', operator: 'eq', value: 1 }] }), limit: 1 });
    expect(ids(filtered)).toEqual([d1.document_id]);
    const restricted = await search([col], 'quick fox', { documentIds: [d3.document_id], limit: 1 });
    expect(ids(restricted)).toEqual([d3.document_id]);
  });
});

describe('statistics follow writes and deletes', () => {
  const col = 'col_stats';
  it('changes idf when a document is added, updated and removed', async () => {
    await createCollection(col);
    const d1 = await write(col, 'd1', { text: 'The quick brown fox' });
    await write(col, 'd2', { text: 'the lazy dog' });
    await write(col, 'd3', { text: 'The quick dog jumps over the lazy fox' });
    expect(await text.documentFrequency(col, 'text', 'quick')).toBe(2);

    // A fourth document "a quick cat": N = 4, avgdl = 18 / 4 = 4.5, df(quick) = 3:
    // idf = ln(1 + 1.5 / 3.5) = 0.3566749439; d1: 0.3566749439 · 2.2 / (1 + 1.2 · (0.25 + 0.75 · 4/4.5)) = 0.3736594651.
    const d4 = await write(col, 'd4', { text: 'a quick cat' });
    expect(await text.documentFrequency(col, 'text', 'quick')).toBe(3);
    expect(await text.statistics(col)).toEqual([{ field: 'text', document_count: 4, average_length: 4.5 }]);
    const after = await search([col], 'quick');
    expect(after.find((h) => h.document_id === d1.document_id)!.score).toBeCloseTo(0.3736594651, 8);

    // Rewriting d4 without "quick" takes it out of df; deleting it restores the first numbers.
    await write(col, 'd4', { text: 'a small cat' });
    expect(await text.documentFrequency(col, 'text', 'quick')).toBe(2);
    expect(await text.documentFrequency(col, 'text', 'small')).toBe(1);
    expect(await documents.delete(col, [d4.document_id])).toBe(1);
    expect(await text.documentFrequency(col, 'text', 'small')).toBe(0);
    expect(await text.statistics(col)).toEqual([{ field: 'text', document_count: 3, average_length: 5 }]);
    const back = await search([col], 'quick');
    expect(back.find((h) => h.document_id === d1.document_id)!.score).toBeCloseTo(0.5118851408, 8);
    expect(ids(await search([col], 'cat'))).toEqual([]);

    await documents.forgetCollection(col);
    expect(await text.statistics(col)).toEqual([]);
    expect(await search([col], 'quick')).toEqual([]);
  });

  it('indexes every string field, each with its own statistics, and sums field scores', async () => {
    const c = 'col_fields';
    await createCollection(c);
    const a = await write(c, 'a', { text: 'harbour lights', ocr_text: 'harbour', count: 3, thumbnail: { storage_key: 'x' } });
    await write(c, 'b', { text: 'mountain lights' });
    expect((await text.statistics(c)).map((s) => s.field)).toEqual(['ocr_text', 'text']);
    const both = await search([c], 'harbour');
    const textOnly = await search([c], 'harbour', { fields: ['text'] });
    expect(ids(both)).toEqual([a.document_id]);
    expect(both[0]!.score).toBeGreaterThan(textOnly[0]!.score);
  });
});

describe('phrases with a repeated word', () => {
  it('counts every occurrence', async () => {
    const c = 'col_repeat';
    await createCollection(c);
    const twice = await write(c, 'a', { text: 'go go go stop' });
    const once = await write(c, 'b', { text: 'go go stop and more words to make it longer' });
    await write(c, 'c', { text: 'go stop go' });
    const hits = await search([c], '"go go"');
    expect(ids(hits)).toEqual([twice.document_id, once.document_id]);
    expect(ids(await search([c], '"go go go"'))).toEqual([twice.document_id]);
    expect(ids(await search([c], '"stop go"'))).toHaveLength(1);
  });
});

describe('principals', () => {
  const col = 'col_principals';
  it('filters by owner and grants inside the query, before the limit', async () => {
    await createCollection(col);
    // The other principal's document is the best match: a filter after the limit would return nothing.
    await write(col, 'theirs', { text: 'secret secret secret plan' }, { owner: 'usr_b' });
    const mine = await write(col, 'mine', { text: 'a secret plan among many other words here' }, { owner: 'usr_a' });
    const shared = await write(col, 'shared', { text: 'secret notes with many more words in this one' }, { owner: 'usr_b', grants: ['usr_a'] });
    expect(await search([col], 'secret', { limit: 1 })).toHaveLength(1);
    expect(ids(await search([col], 'secret', { principalId: 'usr_a', limit: 1 }))).toEqual([mine.document_id]);
    expect(ids(await search([col], 'secret', { principalId: 'usr_a' })).sort()).toEqual([mine.document_id, shared.document_id].sort());
    expect(await search([col], 'secret', { principalId: 'usr_c' })).toEqual([]);
    // A revoked grant acts at once: the documents table is the source of truth.
    await db('documents').where({ document_id: shared.document_id }).update({ grants: '[]' });
    expect(ids(await search([col], 'secret', { principalId: 'usr_a' }))).toEqual([mine.document_id]);
  });
});

describe('bounded hostile queries', () => {
  const col = 'col_hostile';
  it('caps prefix expansion and query size', async () => {
    await createCollection(col);
    const writes = Array.from({ length: 600 }, (_, i) => ({
      organizationId: ORG, namespaceId: NS, collectionId: col, sourceKey: `k${i}`, rootObjectId: null, sourceCollectionId: null,
      sourceDocumentId: null, processingTier: 0, fields: { text: `a${i.toString(36)} b${i} common` },
    }));
    await documents.upsertMany(writes);
    const prefixed = await search([col], 'a*', { limit: 1000 });
    expect(prefixed.length).toBe(MAX_PREFIX_EXPANSIONS);
    const huge = Array.from({ length: 900 }, (_, i) => `b${i}`).join(' ').slice(0, 4096);
    expect((await search([col], huge, { limit: 1000 })).length).toBeLessThanOrEqual(32);
    await expect(search([col], 'x'.repeat(5000))).rejects.toThrow(/at most 4096/);
    await expect(search([col], 'common', { limit: 0 })).rejects.toThrow(/limit/);
    expect((await search([col], '"common a1*"')).length).toBe(0);
    expect(await search([], 'common')).toEqual([]);
  });
});

describe('several processes', () => {
  const col = 'col_processes';
  it("sees another process's writes, deletes and collection drop at its next search", async () => {
    await createCollection(col);
    // Two index instances on one database stand for two API processes, each with its own in-process copy.
    // The other one keeps a short change log (8 versions), so the loop below goes past its horizon.
    const other = new SqlTextIndex(db, { changeLogVersions: 8 });
    const a = await write(col, 'a', { text: 'northern lights over the fjord' });
    expect(ids(await search([col], 'fjord'))).toEqual([a.document_id]);
    await other.index(col, [{ document_id: 'doc_other_1', fields: { text: 'a fjord in winter' } }]);
    expect(ids(await search([col], 'fjord')).sort()).toEqual([a.document_id, 'doc_other_1'].sort());
    await other.index(col, [{ document_id: 'doc_other_1', fields: { text: 'a lake in winter' } }]);
    expect(ids(await search([col], 'fjord'))).toEqual([a.document_id]);
    expect(await text.documentFrequency(col, 'text', 'lake')).toBe(1);
    await other.remove(col, ['doc_other_1']);
    expect(await search([col], 'lake')).toEqual([]);

    // Past the change log's horizon, a copy reloads instead of catching up, with the same answer.
    for (let i = 0; i < 40; i++) await other.index(col, [{ document_id: `doc_many_${i % 3}`, fields: { text: `fjord number ${i}` } }]);
    const pruned = await db('text_versions').where({ collection_id: col }).first();
    expect(Number(pruned.pruned_below)).toBeGreaterThan(8);
    expect((await search([col], 'fjord')).length).toBe(4);
    expect(await text.documentFrequency(col, 'text', 'number')).toBe(3);
    expect(ids(await search([col], '39'))).toEqual(['doc_many_0']);
    expect(ids(await search([col], '38'))).toEqual(['doc_many_2']);
    expect(await search([col], '36')).toEqual([]);

    await other.dropCollection(col);
    expect(await search([col], 'fjord')).toEqual([]);
    expect(await text.statistics(col)).toEqual([]);
  });

  it('keeps statistics exact under concurrent writers of one collection', async () => {
    const c = 'col_concurrent';
    await createCollection(c);
    // On PostgreSQL these run on separate connections at once; the per-collection lock orders them.
    const writers = Array.from({ length: 8 }, (_, w) =>
      Promise.all(
        Array.from({ length: 5 }, (_, i) =>
          new SqlTextIndex(db).index(c, [{ document_id: `doc_c_${w}_${i}`, fields: { text: `shared words writer${w} item${i}` } }]),
        ),
      ),
    );
    await Promise.all(writers);
    expect(await text.statistics(c)).toEqual([{ field: 'text', document_count: 40, average_length: 4 }]);
    expect(await text.documentFrequency(c, 'text', 'shared')).toBe(40);
    expect((await search([c], 'shared', { limit: 100 })).length).toBe(40);
    expect(Number((await db('text_versions').where({ collection_id: c }).first()).version)).toBe(40);
  });
});

describe('document writes', () => {
  it('commit a document and its postings together', async () => {
    const c = 'col_atomic';
    await createCollection(c);
    const failing: TextIndexShape = { ...text, index: async () => Promise.reject(new Error('index unavailable')), remove: text.remove.bind(text) };
    const store = new DocumentStore(db, failing);
    const write = {
      organizationId: ORG, namespaceId: NS, collectionId: c, sourceKey: 'k', rootObjectId: null, sourceCollectionId: null,
      sourceDocumentId: null, processingTier: 0, fields: { text: 'never half written' },
    };
    await expect(store.upsertMany([write])).rejects.toThrow(/index unavailable/);
    await expect(store.upsert(write)).rejects.toThrow(/index unavailable/);
    expect(Number(((await db('documents').where({ collection_id: c }).count('* as n').first()) as { n: unknown }).n)).toBe(0);
    expect(Number((await db('collections').where({ collection_id: c }).first()).document_count)).toBe(0);
  });
});


describe('one-statement writes (the embedded database\'s single connection)', () => {
  const write = (store: DocumentStore, collectionId: string, key: string, fields: Record<string, unknown>) => ({
    organizationId: ORG, namespaceId: NS, collectionId, sourceKey: key, rootObjectId: null, sourceCollectionId: null,
    sourceDocumentId: null, processingTier: 0, fields,
  });
  const count = async (c: string) => Number((await db('collections').where({ collection_id: c }).first()).document_count);
  const version = async (c: string) => Number((await db('text_versions').where({ collection_id: c }).first()).version);

  it('writes documents and postings together, replaces and removes postings on rewrite, and logs each write as one version', async () => {
    const c = 'col_one_statement';
    await createCollection(c);
    // A short change log, so the writes below also prune it.
    const store = new DocumentStore(db, new SqlTextIndex(db, { changeLogVersions: 4 }), { singleConnection: true });
    const [a, b] = await store.upsertMany([
      write(store, c, 'a', { text: 'amber harbor lights', n: 1 }),
      write(store, c, 'b', { text: 'quiet harbor at dawn' }),
    ]);
    expect(a!.fields).toEqual({ text: 'amber harbor lights', n: 1 });
    expect(await count(c)).toBe(2);
    expect(ids(await search([c], 'harbor')).sort()).toEqual([a!.document_id, b!.document_id].sort());
    const v1 = await version(c);

    // Rewritten by source key: same ids, b's postings replaced, a's removed (no text any more), nothing counted twice.
    const again = await store.upsertMany([write(store, c, 'a', { n: 2 }), write(store, c, 'b', { text: 'quiet meadow at dusk' })]);
    expect(again.map((r) => r.document_id)).toEqual([a!.document_id, b!.document_id]);
    expect(await count(c)).toBe(2);
    expect(await version(c)).toBe(v1 + 1);
    expect(await search([c], 'harbor')).toEqual([]);
    expect(ids(await search([c], 'meadow'))).toEqual([b!.document_id]);
    expect(await db('text_documents').where({ collection_id: c, document_id: a!.document_id })).toEqual([]);
    expect(await text.statistics(c)).toEqual([{ field: 'text', document_count: 1, average_length: 4 }]);

    // Past the short change log: pruned in the same statement that raises the horizon.
    for (let i = 0; i < 6; i++) await store.upsertMany([write(store, c, `more-${i}`, { text: `harbor number ${i}` })]);
    const row = await db('text_versions').where({ collection_id: c }).first();
    expect(Number(row.pruned_below)).toBeGreaterThan(0);
    const logged = (await db('text_changes').where({ collection_id: c }).select('version')) as Array<{ version: string | number }>;
    expect(logged.every((r) => Number(r.version) > Number(row.pruned_below))).toBe(true);
    expect((await search([c], 'harbor')).length).toBe(6);
    expect(await count(c)).toBe(8);
  });

  it('writes documents of several collections at once as before (a transaction)', async () => {
    const [c1, c2] = ['col_one_statement_x', 'col_one_statement_y'];
    await createCollection(c1);
    await createCollection(c2);
    const store = new DocumentStore(db, text, { singleConnection: true });
    const rows = await store.upsertMany([write(store, c1, 'k', { text: 'granite ridge' }), write(store, c2, 'k', { text: 'granite shore' })]);
    expect(rows.map((r) => r.collection_id)).toEqual([c1, c2]);
    expect(ids(await search([c1, c2], 'granite')).sort()).toEqual(rows.map((r) => r.document_id).sort());
    expect([await count(c1), await count(c2)]).toEqual([1, 1]);
  });

  it('changes nothing when the statement fails', async () => {
    const c = 'col_one_statement_fails';
    await createCollection(c);
    const store = new DocumentStore(db, text, { singleConnection: true });
    // A NUL character is refused by jsonb: the whole statement, postings and count included, is undone.
    await expect(store.upsertMany([write(store, c, 'ok', { text: 'fine words' }), write(store, c, 'bad', { text: 'bad \u0000 words' })])).rejects.toThrow();
    expect(await db('documents').where({ collection_id: c })).toEqual([]);
    expect(await db('text_documents').where({ collection_id: c })).toEqual([]);
    expect(await count(c)).toBe(0);
  });

  it('reads none of the collection\'s other postings, whatever the planner believes about its size', async () => {
    const c = 'col_one_statement_grown';
    await createCollection(c);
    const store = new DocumentStore(db, text, { singleConnection: true });
    await store.upsertMany([write(store, c, 'first', { text: 'first words' })]);
    // Statistics taken while the collection held one document, then 300 more: as in a batch, whose
    // collection grows far faster than anything analyzes it again.
    await db.raw('analyze text_documents');
    await store.upsertMany(Array.from({ length: 300 }, (_, i) => write(store, c, `grown-${i}`, { text: `grown words ${i}` })));
    let statement: { sql: string; bindings: unknown[] } | undefined;
    const capture = (q: { sql: string; bindings: unknown[] }) => {
      if (q.sql.startsWith('with written as')) statement = q;
    };
    db.on('query', capture);
    await store.upsertMany(Array.from({ length: 5 }, (_, i) => write(store, c, `new-${i}`, { text: `new words ${i}` })));
    db.removeListener('query', capture);
    expect((await search([c], 'new')).length).toBe(5);
    // The same statement again (now rewriting the five), counting the postings rows it reads.
    // Counted before and after: the view also holds counts of earlier transactions not yet reported.
    const postingsRead = async (trx: Knex.Transaction) => {
      const stats = (await trx.raw(
        "select coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0) as n from pg_stat_xact_user_tables where relname = 'text_documents'",
      )) as { rows: Array<{ n: string | number }> };
      return Number(stats.rows[0]?.n ?? 0);
    };
    let rowsRead = -1;
    const undo = new Error('undo the repeated statement');
    await db.transaction(async (trx) => {
      const before = await postingsRead(trx);
      await trx.raw(statement!.sql.replace(/\$\d+/g, '?'), statement!.bindings as Knex.RawBinding[]);
      rowsRead = (await postingsRead(trx)) - before;
      throw undo;
    }).catch((err: unknown) => {
      if (err !== undo) throw err;
    });
    // Its five rows at most (the rewritten postings): joined to the written rows, it read all 306 of the collection's.
    expect(rowsRead).toBeLessThanOrEqual(10);
  });
});
