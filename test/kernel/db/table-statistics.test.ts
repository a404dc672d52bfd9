import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pino } from 'pino';
import { openDatabase, type DatabaseHandle } from '../../../kernel/db/database.js';
import { keepsOwnStatistics, TableStatistics } from '../../../kernel/db/table-statistics.js';

/** The embedded database's planner learns that a table grew, and then finds rows by id through the index. */
describe('TableStatistics', () => {
  let database: DatabaseHandle;
  const planOf = async () =>
    ((await database.db.raw("explain select * from grown where org = 'o' and kind = 'a' and id = any(?)", [['r10', 'r20']])) as { rows: Array<{ 'QUERY PLAN': string }> }).rows
      .map((r) => r['QUERY PLAN']).join('\n');

  beforeAll(async () => {
    database = await openDatabase({ inMemory: true, log: pino({ level: 'silent' }) } as never);
    await database.db.raw('create table grown (id text primary key, org text, kind text, body text)');
    await database.db.raw('create index grown_org on grown (org)');
    await database.db.raw('create index grown_kind on grown (kind)');
  });
  afterAll(async () => {
    await database?.close();
  });

  it('analyzes tables that grew since their last statistics, and only those', async () => {
    const statistics = new TableStatistics(database.db, pino({ level: 'silent' }));
    expect(await statistics.refresh()).toEqual([]); // empty: nothing to learn
    await database.db.raw("insert into grown select 'r' || g, 'o', 'a', repeat('x', 200) from generate_series(1, 20000) g");
    // Without statistics the planner reads every row of the organization and kind (all of them) through their indexes.
    expect(await planOf()).toContain('grown_kind');
    expect(await statistics.refresh()).toEqual(['grown']);
    const plan = await planOf();
    expect(plan).toContain('grown_pkey');
    expect(plan).not.toContain('grown_kind');
    expect(await statistics.refresh()).toEqual([]); // nothing grew since
  });

  it('is kept by the embedded database\'s owner, not by a thread attached to it', async () => {
    expect(await keepsOwnStatistics(database, false)).toBe(true);
    expect(await keepsOwnStatistics(database, true)).toBe(false);
  });

  it.runIf(process.env.TEST_DATABASE_URL)('is kept on PostgreSQL exactly when the server runs without autovacuum', async () => {
    const postgres = await openDatabase({ url: process.env.TEST_DATABASE_URL, log: pino({ level: 'silent' }) } as never);
    try {
      const { rows } = (await postgres.db.raw('show autovacuum')) as { rows: Array<{ autovacuum: string }> };
      expect(await keepsOwnStatistics(postgres, false)).toBe(rows[0]!.autovacuum === 'off');
    } finally {
      await postgres.close();
    }
  });
});
