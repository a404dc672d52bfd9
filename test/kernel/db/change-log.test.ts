/**
 * The change log in front of in-process copies (vector graphs): each write bumps its key's version and
 * records the ids it touched, in one statement when the write itself runs outside the lock (the embedded
 * database), or under the key's lock around the write (PostgreSQL). Runs on whichever database the suite uses.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Knex } from 'knex';
import { ChangeLog } from '../../../kernel/db/change-log.js';
import { DatabaseHandle } from '../../../kernel/tokens.js';
import { startTestKernel, type TestKernel } from '../../support/kernel.js';

describe('ChangeLog', () => {
  let t: TestKernel;
  let db: Knex;
  beforeAll(async () => {
    t = await startTestKernel();
    db = t.kernel.services.get(DatabaseHandle).db;
  }, 60_000);
  afterAll(async () => {
    await t?.stop();
  });

  for (const lockDuringWork of [false, true]) {
    it(`numbers writes in order and replays the ids changed since a version (lock during work: ${lockDuringWork})`, async () => {
      const log = new ChangeLog(db, { prefix: `cl_order_${lockDuringWork ? 'locked' : 'free'}`, keepVersions: 100 });
      const first = await log.write('k', ['a', 'b'], async () => 'done', lockDuringWork);
      expect(first.result).toBe('done');
      expect(first.head).toMatchObject({ version: 1, prunedBelow: 0 });
      const second = await log.write('k', ['b', 'c'], async () => undefined, lockDuringWork);
      expect(second.head).toEqual({ ...first.head, version: 2 });
      expect(await log.head('k')).toEqual(second.head);
      expect((await log.since('k', 0, first.head.generation))?.ids.sort()).toEqual(['a', 'b', 'c']);
      expect(await log.since('k', 1, first.head.generation)).toEqual({ ids: expect.arrayContaining(['b', 'c']), head: second.head });
      expect((await log.since('k', 2, first.head.generation))?.ids).toEqual([]);
      // A write with no ids still moves the version; another key has versions of its own.
      expect((await log.write('k', [], async () => undefined, lockDuringWork)).head.version).toBe(3);
      expect((await log.write('other', ['z'], async () => undefined, lockDuringWork)).head.version).toBe(1);
    });
  }

  it('gives concurrent writes of one key distinct versions, each with its own ids', async () => {
    const log = new ChangeLog(db, { prefix: 'cl_concurrent', keepVersions: 100 });
    const heads = await Promise.all(Array.from({ length: 12 }, (_, i) => log.write('k', [`id${i}`], async () => i, false)));
    expect(heads.map((h) => h.head.version).sort((a, b) => a - b)).toEqual(Array.from({ length: 12 }, (_, i) => i + 1));
    const generation = heads[0]!.head.generation;
    for (const { result, head } of heads) {
      // Exactly the ids of this write were recorded under its version.
      const after = await log.since('k', head.version - 1, generation);
      const later = await log.since('k', head.version, generation);
      expect(after!.ids.filter((id) => !later!.ids.includes(id))).toEqual([`id${result}`]);
    }
  });

  it('records nothing when the write fails first', async () => {
    const log = new ChangeLog(db, { prefix: 'cl_failed', keepVersions: 100 });
    await expect(log.write('k', ['a'], async () => { throw new Error('store refused'); }, false)).rejects.toThrow('store refused');
    await expect(log.write('k', ['a'], async () => { throw new Error('store refused'); }, true)).rejects.toThrow('store refused');
    expect(await log.head('k')).toBeUndefined();
  });

  it('writes and records in one statement (writeInStatement): both or neither', async () => {
    const log = new ChangeLog(db, { prefix: 'cl_statement', keepVersions: 3 });
    await db.raw('create table cl_statement_source (id text primary key, value int not null)');
    const upsert = (rows: Array<[string, number]>) => ({
      sql: `insert into cl_statement_source (id, value) values ${rows.map(() => '(?, ?)').join(', ')}
            on conflict (id) do update set value = excluded.value`,
      bindings: rows.flat(),
    });
    const first = await log.writeInStatement('k', ['a', 'b'], upsert([['a', 1], ['b', 2]]));
    expect(first).toMatchObject({ version: 1, prunedBelow: 0 });
    expect(await log.writeInStatement('k', ['a'], upsert([['a', 3]]))).toEqual({ ...first, version: 2 });
    expect((await db('cl_statement_source').orderBy('id')).map((r: { id: string; value: number }) => [r.id, r.value])).toEqual([['a', 3], ['b', 2]]);
    expect((await log.since('k', 1, first.generation))?.ids).toEqual(['a']);
    // The write fails (null into a not-null column): no row, no version.
    await expect(log.writeInStatement('k', ['c'], { sql: 'insert into cl_statement_source (id, value) values (?, null)', bindings: ['c'] })).rejects.toThrow();
    expect(await log.head('k')).toEqual({ ...first, version: 2 });
    expect(await db('cl_statement_source').where({ id: 'c' })).toEqual([]);
    // Pruned like any write: the third version passes keepVersions.
    expect(await log.writeInStatement('k', ['d'], upsert([['d', 4]]))).toMatchObject({ version: 3, prunedBelow: 0 });
    expect(await log.writeInStatement('k', ['e'], upsert([['e', 5]]))).toMatchObject({ version: 4 });
  });

  it('prunes old entries every keepVersions writes: a copy older than the horizon reloads', async () => {
    const log = new ChangeLog(db, { prefix: 'cl_prune', keepVersions: 4 });
    let head = (await log.write('k', ['v1'], async () => undefined, false)).head;
    for (let v = 2; v <= 9; v++) head = (await log.write('k', [`v${v}`], async () => undefined, v % 2 === 0)).head;
    expect(head).toMatchObject({ version: 9, prunedBelow: 4 });
    expect(await log.head('k')).toEqual(head);
    expect(await log.since('k', 3, head.generation)).toBeUndefined();
    expect((await log.since('k', 4, head.generation))?.ids.sort()).toEqual(['v5', 'v6', 'v7', 'v8', 'v9']);
    const kept = (await db.raw('select count(*)::int as n from cl_prune_changes where key = ?', ['k'])) as { rows: Array<{ n: number }> };
    expect(kept.rows[0]!.n).toBe(5);
  });

  it('starts a new generation on a reset write, and after a drop', async () => {
    const log = new ChangeLog(db, { prefix: 'cl_generation', keepVersions: 100 });
    const before = (await log.write('k', ['a'], async () => undefined, false)).head;
    const reset = (await log.write('k', [], async () => undefined, false, true)).head;
    expect(reset.generation).not.toBe(before.generation);
    expect(await log.since('k', before.version, before.generation)).toBeUndefined();
    await log.drop('k');
    expect(await log.head('k')).toBeUndefined();
    const again = (await log.write('k', ['b'], async () => undefined, false)).head;
    expect(again.version).toBe(1);
    expect(again.generation).not.toBe(reset.generation);
  });
});
