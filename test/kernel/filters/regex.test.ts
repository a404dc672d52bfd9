/**
 * The user-pattern dialect: linear-time in process, the same answers in process (RE2) and in SQL
 * (PostgreSQL `~`) with and without case sensitivity, and constructs outside the dialect refused with a
 * 422 that names them, on object listings and on collection source filters alike.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RequestValidationError } from '../../../kernel/errors.js';
import { matchesFilter, parseFilter } from '../../../kernel/filters/filter.js';
import { compileUserRegex, UnsupportedPatternError } from '../../../kernel/filters/regex.js';
import { columnFieldResolver, whereFilter } from '../../../kernel/filters/sql.js';
import { DatabaseHandle, TaskQueue } from '../../../kernel/tokens.js';
import { startTestKernel, type TestKernel } from '../../support/kernel.js';

const texts = [
  'Hello World',
  'hello world',
  'HELLO\nWORLD',
  'café au lait',
  'CAFÉ',
  'Straße 12',
  'order-2026-01-31',
  'a+b=c',
  'Kelvin \u212A',
  'emoji 😀 here',
  'tab\tseparated',
  '',
];

const patterns = [
  '^hello',
  'world$',
  'hello.world',
  '^[a-z ]+$',
  '[^a-z]',
  'CAFÉ',
  'caf[é]',
  '\\d{4}-\\d{2}-\\d{2}',
  '\\w+\\s\\w+',
  '\\W',
  'a\\+b',
  '(?:hello|cafe)',
  '(o|l){2,}',
  'k',
  '😀',
  '[😀-😂]',
  '\\x{e9}',
  '^$',
  '',
  'STRASSE|straße',
  '^.*?d\\b'.replace('\\b', ''),
  '\\t',
];

describe('user regex dialect', () => {
  let t: TestKernel;
  beforeAll(async () => {
    t = await startTestKernel();
    const db = t.kernel.services.get(DatabaseHandle).db;
    await db.schema.createTable('regex_samples', (table) => {
      table.integer('id').primary();
      table.jsonb('meta').notNullable();
    });
    await db('regex_samples').insert(texts.map((text, id) => ({ id, meta: JSON.stringify({ text }) })));
  });
  afterAll(async () => {
    await t.stop();
  });

  it('runs a pattern that backtracking engines take exponential time on, on a long input', () => {
    const regex = compileUserRegex('^(a+)+$', true);
    expect(regex.test(`${'a'.repeat(100_000)}!`)).toBe(false);
    expect(regex.test('a'.repeat(100_000))).toBe(true);
    const filter = parseFilter({ AND: [{ field: 'text', operator: 'regex', value: '^(a+)+$' }] });
    expect(matchesFilter(filter, { text: `${'a'.repeat(100_000)}!` })).toBe(false);
  });

  it('runs the same pattern in SQL on a long input', async () => {
    const db = t.kernel.services.get(DatabaseHandle).db;
    const filter = parseFilter({ AND: [{ field: 'meta.text', operator: 'regex', value: '^(a+)+$' }] });
    const q = db.from(db.raw(`(select 1 as id, jsonb_build_object('text', repeat('a', 100000) || '!') as meta) as s`)).select('id');
    whereFilter(q, filter, columnFieldResolver({ columns: ['id'], jsonRoots: ['meta'] }));
    expect(await q).toEqual([]);
  });

  for (const caseSensitive of [true, false]) {
    it.each(patterns.map((p) => [p] as const))(`%s selects the same texts in SQL as in process (case_sensitive=${caseSensitive})`, async (pattern) => {
      const filter = parseFilter({ AND: [{ field: 'meta.text', operator: 'regex', value: pattern }], case_sensitive: caseSensitive });
      const expected = texts.flatMap((text, id) => (matchesFilter(filter, { meta: { text } }) ? [id] : []));
      const db = t.kernel.services.get(DatabaseHandle).db;
      const q = db('regex_samples').select('id').orderBy('id');
      whereFilter(q, filter, columnFieldResolver({ columns: ['id'], jsonRoots: ['meta'] }));
      const rows = (await q) as Array<{ id: number }>;
      expect(rows.map((r) => r.id)).toEqual(expected);
    });
  }

  it('folds case for every letter it names, and only when asked', () => {
    const insensitive = (p: string) => compileUserRegex(p, false);
    expect(insensitive('CAFÉ').test('café')).toBe(true);
    expect(insensitive('[a-c]').test('B')).toBe(true);
    expect(insensitive('[^k]').test('K')).toBe(false);
    expect(insensitive('k').test('\u212A')).toBe(true);
    expect(compileUserRegex('CAFÉ', true).test('café')).toBe(false);
    expect(insensitive('\\W').test('K')).toBe(false);
  });

  it('matches newlines with . as PostgreSQL does', () => {
    expect(compileUserRegex('^a.b$', true).test('a\nb')).toBe(true);
  });

  it.each([
    ['\\p{L}+', /Unicode class/],
    ['(a)\\1', /back-reference/],
    ['(?P<n>a)(?P=n)', /named group/],
    ['(?<n>a)\\k<n>', /named group/],
    ['\\k<n>', /back-reference/],
    ['(?=a)', /lookahead/],
    ['(?<!a)b', /lookbehind/],
    ['(?i)abc', /inline flags/],
    ['\\bword', /word boundary/],
    ['abc\\z', /\\z/],
    ['\\Qa.b\\E', /quoting/],
    ['[[:alpha:]]', /POSIX class/],
    ['a{256}', /255/],
    ['a{,3}', /literal \{/],
    ['((a{200}){200})', /too large|255|invalid/],
    // Shapes PostgreSQL's regex compiler takes seconds over (measured: 10.7 s, 0.9 s, 0.47 s, 0.18 s).
    ['(.?.?.?){0,250}q', /too many optional parts: 751/],
    ['(.{0,3}){250}y', /too many optional parts/],
    ['.?'.repeat(499) + 'q', /too many optional parts/],
    ['(|a|b){0,250}q', /too many optional parts/],
    ['(', /\)/],
    ['a**', /two quantifiers/],
    ['x'.repeat(1001), /longer than/],
  ])('refuses %s, naming the construct', (pattern, message) => {
    expect(() => compileUserRegex(pattern, true)).toThrow(UnsupportedPatternError);
    expect(() => compileUserRegex(pattern, true)).toThrow(message);
    try {
      parseFilter({ AND: [{ field: 'a', operator: 'regex', value: pattern }] });
      expect.unreachable();
    } catch (err) {
      expect(err).toBeInstanceOf(RequestValidationError);
      expect((err as RequestValidationError).problems[0]!.loc).toEqual(['body', 'filters', 'AND', 0, 'value']);
    }
  });

  it('keeps ranges over single characters and small repeated groups', () => {
    for (const pattern of ['a{0,255}b{0,255}c{0,255}q', '.{0,255}x', '(.?.?.?){0,33}q', '(\\d{1,3}\\.){3}\\d{1,3}', '(foo|bar)+baz', '.?'.repeat(100)]) {
      expect(() => compileUserRegex(pattern, true), pattern).not.toThrow();
    }
  });

  describe('over HTTP', () => {
    let bucketId: string;
    const api = (method: string, path: string, body: unknown) =>
      t.request(method, path, { key: t.adminKey, headers: { 'X-Namespace': 'patterns' }, ...(body !== undefined ? { body } : {}) });
    beforeAll(async () => {
      expect((await t.request('POST', '/v1/namespaces', { key: t.adminKey, body: { namespace_name: 'patterns' } })).status).toBe(201);
      const created = await api('POST', '/v1/buckets', { bucket_name: 'regex-bucket' });
      expect(created.status).toBe(201);
      bucketId = created.body.bucket_id;
    });

    it.each(['\\p{L}+', '(a)\\1', '(?P<n>a)(?P=n)', '(.?.?.?){0,250}q'])('object list filter %s is a 422, not a 500', async (pattern) => {
      const res = await api('POST', `/v1/buckets/${bucketId}/objects/list`, {
        filters: { AND: [{ field: 'key', operator: 'regex', value: pattern }] },
      });
      expect(res.status).toBe(422);
      expect(res.body.detail[0].loc).toEqual(['body', 'filters', 'AND', 0, 'value']);
    });

    it('object list filter with a valid pattern lists', async () => {
      const res = await api('POST', `/v1/buckets/${bucketId}/objects/list`, {
        filters: { AND: [{ field: 'key', operator: 'regex', value: '^(a+)+$' }] },
      });
      expect(res.status).toBe(200);
    });

    it.each(['\\p{L}+', '(a)\\1'])('collection source filter %s is a 422, not a 500', async (pattern) => {
      const res = await api('POST', '/v1/collections/create', {
        collection_name: 'regex-collection',
        source: { type: 'bucket', bucket_id: bucketId, filters: { AND: [{ field: 'key', operator: 'regex', value: pattern }] } },
        feature_extractors: [{ feature_extractor_name: 'passthrough_extractor' }],
      });
      expect(res.status).toBe(422);
      expect(res.body.detail[0].loc).toEqual(['body', 'source', 'filters', 'AND', 0, 'value']);
    });

    it('a batch through a collection source filter with a catastrophic-backtracking pattern finishes', async () => {
      const collection = await api('POST', '/v1/collections/create', {
        collection_name: 'redos-source',
        source: { type: 'bucket', bucket_id: bucketId, filters: { AND: [{ field: 'key', operator: 'regex', value: '^(a+)+$' }] } },
        feature_extractors: [{ feature_extractor_name: 'passthrough_extractor' }],
      });
      expect(collection.status).toBe(201);
      const ids: string[] = [];
      for (const key of [`${'a'.repeat(1000)}!`, 'aaa']) {
        const created = await api('POST', `/v1/buckets/${bucketId}/objects`, { key, metadata: {} });
        expect(created.status).toBe(201);
        ids.push(created.body.object_id);
      }
      const batch = await api('POST', `/v1/buckets/${bucketId}/batches`, { object_ids: ids });
      expect(batch.status).toBe(201);
      expect((await api('POST', `/v1/buckets/${bucketId}/batches/${batch.body.batch_id}/submit`, undefined)).status).toBe(202);
      let status = '';
      for (let i = 0; i < 600 && !['COMPLETED', 'COMPLETED_WITH_ERRORS', 'FAILED', 'CANCELED'].includes(status); i++) {
        await t.kernel.services.get(TaskQueue).drain();
        const health = await t.request('GET', '/v1/health');
        expect(health.status).toBeLessThan(500);
        status = (await api('GET', `/v1/buckets/${bucketId}/batches/${batch.body.batch_id}`, undefined)).body.status;
        if (status !== 'COMPLETED') await new Promise((resolve) => setTimeout(resolve, 100));
      }
      expect(status).toBe('COMPLETED');
      const documents = await api('POST', `/v1/collections/${collection.body.collection_id}/documents/list`, {});
      expect(documents.body.results).toHaveLength(1);
    });
  });
});
