/**
 * Array parameters made into PostgreSQL array literals by the thread that sends them (kernel/db/array-literal.ts):
 * the embedded database reads back exactly the array that was sent, whatever its strings hold, and what the
 * conversion does not cover is left to PGlite as before.
 */
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { arrayLiteral, withArrayLiterals } from '../../../kernel/db/array-literal.js';
import { PgliteThread } from '../../../kernel/db/pglite-thread.js';

let thread: PgliteThread;

beforeAll(async () => {
  const template = inject('pgliteTemplate');
  thread = new PgliteThread(template ? { loadDataDir: new Blob([template]) } : {});
  await thread.waitReady;
});

afterAll(async () => {
  await thread?.close();
});

const TRICKY = [
  'plain', '', 'NULL', 'null', 'with "quotes"', 'back\\slash', 'ends with \\', '\\"', 'a,b', '{braces}', ' spaced ', 'tab\there',
  'new\nline', "single ' quote", 'ünïcödé ✓ 日本', '😀', 'x'.repeat(10_000),
];

describe('array parameters as literals', () => {
  it('writes the literal node-postgres writes: every element quoted and escaped, NULL for null', () => {
    expect(arrayLiteral(['a', null, 'b"c', 'd\\e', undefined])).toBe('{"a",NULL,"b\\"c","d\\\\e",NULL}');
    expect(arrayLiteral([1, 2.5, -3, true])).toBe('{"1","2.5","-3","true"}');
    expect(arrayLiteral([['a', 'b'], ['c', null]])).toBe('{{"a","b"},{"c",NULL}}');
    expect(arrayLiteral([])).toBe('{}');
  });

  it('leaves to PGlite what it does not cover, and returns the same parameters when nothing changes', () => {
    expect(arrayLiteral([new Date(0)])).toBeUndefined();
    expect(arrayLiteral([{ a: 1 }])).toBeUndefined();
    expect(arrayLiteral([Number.NaN])).toBeUndefined();
    expect(arrayLiteral([['a'], [new Uint8Array(1)]])).toBeUndefined();
    const params = ['a', 1, null, new Uint8Array(2)];
    expect(withArrayLiterals(params)).toBe(params);
    expect(withArrayLiterals(undefined)).toBeUndefined();
    const mixed = [['x'], [{ a: 1 }]];
    expect(withArrayLiterals(mixed)).toEqual(['{"x"}', [{ a: 1 }]]);
  });

  it('reads back in the embedded database exactly the arrays that were sent', async () => {
    const texts = await thread.query('select $1::text[] as a, cardinality($1::text[]) as n', [[...TRICKY, null]]);
    expect(texts.rows[0]).toEqual({ a: [...TRICKY, null], n: TRICKY.length + 1 });
    const unnested = await thread.query('select u.v from unnest($1::text[]) with ordinality as u(v, i) order by u.i', [TRICKY]);
    expect(unnested.rows.map((r) => r.v)).toEqual(TRICKY);
    const numbers = await thread.query('select $1::int[] as i, $2::float8[] as f, $3::bool[] as b', [[1, -2, null], [0.5, 1e-7, -3], [true, false]]);
    expect(numbers.rows[0]).toEqual({ i: [1, -2, null], f: [0.5, 1e-7, -3], b: [true, false] });
    const nested = await thread.query('select $1::text[] as a', [[['a', 'b"'], ['c\\', null]]]);
    expect(nested.rows[0]!.a).toEqual([['a', 'b"'], ['c\\', null]]);
  });

  it('keeps a NUL character an error, as before', async () => {
    await expect(thread.query('select $1::text[] as a', [['a\u0000b']])).rejects.toMatchObject({ code: '22021' });
  });
});
