/**
 * The filter language: parse errors point at the right place, and the SQL compilation agrees with the
 * in-memory evaluation on the same records (run on the real database).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RequestValidationError } from '../../../kernel/errors.js';
import { matchesFilter, parseFilter } from '../../../kernel/filters/filter.js';
import { columnFieldResolver, whereFilter } from '../../../kernel/filters/sql.js';
import { DatabaseHandle } from '../../../kernel/tokens.js';
import { startTestKernel, type TestKernel } from '../../support/kernel.js';

const records = [
  { id: 'a', meta: { color: 'Red', size: 3, tags: ['x', 'y'], when: '2026-01-05', flag: true } },
  { id: 'b', meta: { color: 'red', size: 10, tags: ['y'], when: '2026-02-01', flag: false } },
  { id: 'c', meta: { color: 'blue', size: '3', tags: [], when: '2025-12-31' } },
  { id: 'd', meta: { color: null, size: 7.5, nested: { deep: 'Value' } } },
  { id: 'e', meta: {} },
];

const filters: Array<Record<string, unknown>> = [
  { AND: [{ field: 'meta.color', operator: 'eq', value: 'red' }] },
  { AND: [{ field: 'meta.color', operator: 'eq', value: 'red' }], case_sensitive: true },
  { AND: [{ field: 'meta.size', operator: 'eq', value: 3 }] },
  { AND: [{ field: 'meta.size', operator: 'gte', value: 7.5 }] },
  { AND: [{ field: 'meta.size', operator: 'ne', value: 3 }] },
  { OR: [{ field: 'meta.color', operator: 'eq', value: 'blue' }, { field: 'meta.flag', operator: 'eq', value: true }] },
  { NOT: [{ field: 'meta.color', operator: 'exists', value: true }] },
  { AND: [{ field: 'meta.color', operator: 'in', value: ['BLUE', 'nothing'] }] },
  { AND: [{ field: 'meta.color', operator: 'nin', value: ['red'] }] },
  { AND: [{ field: 'meta.tags', operator: 'contains', value: 'y' }] },
  { AND: [{ field: 'meta.tags', operator: 'contains', value: 'Y' }] },
  { AND: [{ field: 'meta.tags', operator: 'contains', value: 'Y' }], case_sensitive: true },
  { AND: [{ field: 'meta.color', operator: 'contains', value: 'LU' }] },
  { AND: [{ field: 'meta.color', operator: 'starts_with', value: 're' }] },
  { AND: [{ field: 'meta.color', operator: 'ends_with', value: 'UE' }] },
  { AND: [{ field: 'meta.when', operator: 'lt', value: '2026-01-31' }] },
  { AND: [{ field: 'meta.nested.deep', operator: 'regex', value: '^val' }] },
  { AND: [{ field: 'meta.color', operator: 'eq', value: null }] },
  // A missing field is null everywhere: `in`/`nin`/`ne` with null agree with SQL on `e` (no color) and `d` (null).
  { AND: [{ field: 'meta.color', operator: 'in', value: ['blue', null] }] },
  { AND: [{ field: 'meta.color', operator: 'nin', value: [null] }] },
  { AND: [{ field: 'meta.color', operator: 'ne', value: null }] },
  { AND: [{ OR: [{ field: 'meta.size', operator: 'lt', value: 5 }, { field: 'meta.size', operator: 'gt', value: 9 }] }], NOT: [{ field: 'meta.flag', operator: 'eq', value: false }] },
];

describe('filter language', () => {
  let t: TestKernel;
  beforeAll(async () => {
    t = await startTestKernel();
    const db = t.kernel.services.get(DatabaseHandle).db;
    await db.schema.createTable('filter_samples', (table) => {
      table.text('id').primary();
      table.jsonb('meta').notNullable();
    });
    await db('filter_samples').insert(records.map((r) => ({ id: r.id, meta: JSON.stringify(r.meta) })));
  });
  afterAll(async () => {
    await t.stop();
  });

  it.each(filters.map((f, i) => [i, f] as const))('filter %i selects the same records in SQL as in memory', async (_i, raw) => {
    const filter = parseFilter(raw);
    const expected = records.filter((r) => matchesFilter(filter, r as unknown as Record<string, unknown>)).map((r) => r.id);
    const db = t.kernel.services.get(DatabaseHandle).db;
    const q = db('filter_samples').select('id').orderBy('id');
    whereFilter(q, filter, columnFieldResolver({ columns: ['id'], jsonRoots: ['meta'] }));
    const rows = (await q) as Array<{ id: string }>;
    expect(rows.map((r) => r.id)).toEqual(expected);
  });

  it('reports problems with their location', () => {
    const attempt = () =>
      parseFilter({ AND: [{ field: 'a', operator: 'almost', value: 1 }, { field: '1bad', value: 2 }], OR: 'x', XOR: [] });
    expect(attempt).toThrow(RequestValidationError);
    try {
      attempt();
    } catch (err) {
      const locs = (err as RequestValidationError).problems.map((p) => p.loc.join('.'));
      expect(locs).toEqual(
        expect.arrayContaining(['body.filters.AND.0.operator', 'body.filters.AND.1.field', 'body.filters.OR', 'body.filters.XOR']),
      );
    }
    expect(() => parseFilter({ AND: [{ field: 'a', operator: 'in', value: [] }] })).toThrow(RequestValidationError);
    expect(() => parseFilter({ AND: [{ field: 'a', operator: 'regex', value: '(' }] })).toThrow(RequestValidationError);
  });

  it('bounds what a whole filter asks of the database: in/nin values in all, regex conditions', () => {
    const values = Array.from({ length: 1000 }, (_, i) => `v${i}`);
    const lists = (n: number) => ({ AND: Array.from({ length: n }, () => ({ field: 'meta.title', operator: 'in', value: values })) });
    expect(() => parseFilter(lists(10))).not.toThrow();
    // 66 such lists passed PostgreSQL's 65,535 bound parameters: a 500 after seconds.
    expect(() => parseFilter(lists(11))).toThrow(/at most 10000 in\/nin values in all \(this filter has 11000\)/);
    const patterns = (n: number) => ({ OR: Array.from({ length: n }, (_, i) => ({ field: 'meta.title', operator: 'regex', value: `x${i}` })) });
    expect(() => parseFilter(patterns(16))).not.toThrow();
    try {
      parseFilter(patterns(17));
      expect.unreachable();
    } catch (err) {
      expect((err as RequestValidationError).problems).toEqual([expect.objectContaining({ loc: ['body', 'filters'], type: 'filter_size', msg: expect.stringContaining('at most 16 regex conditions') })]);
    }
  });
});
