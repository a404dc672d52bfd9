import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pino } from 'pino';
import { openDatabase, type DatabaseHandle } from '../../../kernel/db/database.js';
import { rowsById, rowsByIdSql } from '../../../kernel/db/rows-by-id.js';

/**
 * Ten rows by id, right after the table grew past what the planner's statistics know (a bulk load before the
 * next ANALYZE): found through the primary key, not by reading every row of the organization.
 */
describe('rows by id', () => {
  let database: DatabaseHandle;
  const ids = Array.from({ length: 10 }, (_, i) => `r${i * 1_777 + 1}`);
  /** Pages a statement touched (EXPLAIN ANALYZE's shared buffer hits and reads), and the indexes it used. */
  const cost = async (sql: string, bindings: unknown[]) => {
    const res = (await database.db.raw(`explain (analyze, buffers, format json) ${sql}`, bindings as never)) as { rows: Array<{ 'QUERY PLAN': unknown }> };
    const raw = res.rows[0]!['QUERY PLAN'];
    const plan = (typeof raw === 'string' ? JSON.parse(raw) : raw) as Array<{ Plan: Record<string, unknown> }>;
    const indexes = new Set<string>();
    const visit = (node: Record<string, unknown>) => {
      if (typeof node['Index Name'] === 'string') indexes.add(node['Index Name']);
      for (const child of (node.Plans as Array<Record<string, unknown>> | undefined) ?? []) visit(child);
    };
    visit(plan[0]!.Plan);
    return { pages: Number(plan[0]!.Plan['Shared Hit Blocks'] ?? 0) + Number(plan[0]!.Plan['Shared Read Blocks'] ?? 0), indexes: [...indexes] };
  };

  beforeAll(async () => {
    database = await openDatabase({ inMemory: true, log: pino({ level: 'silent' }) } as never);
    await database.db.raw('create table grown (id text primary key, org text not null, kind text not null, body text)');
    await database.db.raw('create index grown_org on grown (org)');
    await database.db.raw('create index grown_kind on grown (kind, body)');
    await database.db.raw('analyze grown'); // the statistics of an empty table, as at start
    await database.db.raw("insert into grown select 'r' || g, 'o', 'a', repeat('x', 200) from generate_series(1, 20000) g");
  });
  afterAll(async () => {
    await database?.close();
  });

  it('reads a few pages through the primary key where the plain query reads the organization', async () => {
    const plain = await cost("select * from grown where org = 'o' and kind = any(array['a']) and id = any(?::text[])", [ids]);
    expect(plain.indexes).not.toContain('grown_pkey'); // what the helper exists for
    expect(plain.pages).toBeGreaterThan(500);

    const byId = await cost(`${rowsByIdSql('grown', 'id', '?::text[]')} where org = 'o' and kind = any(array['a'])`, [ids]);
    expect(byId.indexes).toEqual(['grown_pkey']);
    expect(byId.pages).toBeLessThan(50);
    const rows = (await database.db.raw(`${rowsByIdSql('grown', 'id', '?::text[]')} where org = 'o' and kind = any(array['a']) order by id`, [ids])) as { rows: Array<{ id: string }> };
    expect(rows.rows.map((r) => r.id)).toEqual([...ids].sort());
  });

  it('gives the same as a knex query to narrow further', async () => {
    const query = rowsById<{ id: string; org: string }>(database.db, 'grown', 'id', [...ids, 'missing']).where({ org: 'o' }).select('id').orderBy('id');
    const built = query.toSQL().toNative();
    expect((await cost(built.sql.replaceAll(/\$(\d+)/g, '?'), [...built.bindings])).indexes).toEqual(['grown_pkey']);
    expect(((await query) as Array<{ id: string }>).map((r) => r.id)).toEqual([...ids].sort());
    expect(await rowsById(database.db, 'grown', 'id', ids).where({ org: 'elsewhere' })).toEqual([]);
  });

  it('reads only the columns asked for, still through the primary key', async () => {
    const sql = `${rowsByIdSql('grown', 'id', '?::text[]', ['id', 'org'])} where org = 'o' order by id`;
    expect((await cost(sql, [ids])).indexes).toEqual(['grown_pkey']);
    const rows = (await database.db.raw(sql, [ids])) as { rows: Array<Record<string, unknown>> };
    expect(rows.rows).toEqual([...ids].sort().map((id) => ({ id, org: 'o' })));
  });

  it('takes plain identifiers only', () => {
    expect(() => rowsByIdSql('grown; drop table grown', 'id', '$1')).toThrow(/identifier/);
    expect(() => rowsById(database.db, 'grown', 'id" or 1=1 --', ids)).toThrow(/identifier/);
    expect(() => rowsByIdSql('grown', 'id', '$1', ['id', 'body) from grown; --'])).toThrow(/identifier/);
  });
});
