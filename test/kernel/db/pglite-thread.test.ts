/**
 * The embedded database thread (kernel/db/pglite-thread.ts): errors keep their SQLSTATE, a transaction
 * holds other clients off until it ends (or its client goes), and notices reach the other clients ahead
 * of the replies that follow them.
 */
import { afterEach, describe, expect, inject, it } from 'vitest';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { PgliteClient, PgliteError, PgliteThread } from '../../../kernel/db/pglite-thread.js';

const opened: PgliteThread[] = [];

async function open(): Promise<PgliteThread> {
  const template = inject('pgliteTemplate');
  const thread = new PgliteThread(template ? { loadDataDir: new Blob([template]) } : {});
  opened.push(thread);
  await thread.waitReady;
  await thread.query('create table t (id int primary key, note text)');
  return thread;
}

afterEach(async () => {
  await Promise.all(opened.splice(0).map((thread) => thread.close()));
});

describe('embedded database thread', () => {
  it('answers queries with rows and rebuilds errors with their PostgreSQL fields', async () => {
    const db = await open();
    await db.query('insert into t values ($1, $2)', [1, 'one']);
    expect((await db.query('select id, note from t')).rows).toEqual([{ id: 1, note: 'one' }]);
    const error = await db.query('insert into t values ($1, $2)', [1, 'again']).catch((err: unknown) => err);
    expect(error).toBeInstanceOf(PgliteError);
    expect(error).toMatchObject({ code: '23505', message: expect.stringContaining('duplicate key') });
  });

  it('runs prepared statements with their arguments as exact literals, whatever the text holds', async () => {
    const db = await open();
    // Quotes, backslashes, dollar signs, comment and statement markers: each must arrive as the same text.
    const hostile = ["o'neil", 'back\\slash', "'); drop table t; --", '$1 $$ $x$', '/* not a comment */', 'é ✓ 𝄞', ''];
    for (const [i, note] of hostile.entries()) await db.query('insert into t values ($1, $2)', [i, note]);
    const read = (ids: number[] | null, notes: string[]) =>
      db.prepared('t_by_notes', ['text[]', 'integer'], 'select id, note from t where note = any($1) and id >= coalesce($2, 0) order by id', [notes, ids?.[0] ?? null]);
    expect((await read(null, hostile)).rows.map((r) => r.note)).toEqual(hostile);
    expect((await read([2], hostile)).rows.map((r) => r.id)).toEqual([2, 3, 4, 5, 6]);
    // The statement stays prepared: later calls take new arguments.
    expect((await read(null, ["o'neil"])).rows).toEqual([{ id: 0, note: "o'neil" }]);
    expect((await db.query('select count(*)::int as n from t')).rows).toEqual([{ n: hostile.length }]);
    // Arguments that do not fit their declared type are refused before any SQL is written.
    await expect(db.prepared('t_by_notes', ['text[]', 'integer'], 'unused', ['not an array' as never, null])).rejects.toMatchObject({ code: '22023' });
    await expect(db.prepared('t_by_notes', ['text[]', 'integer'], 'unused', [['a\u0000b'], null])).rejects.toMatchObject({ code: '22021' });
    await expect(db.prepared('t_by_notes', ['text[]', 'integer'], 'unused', [['a'], 1.5])).rejects.toMatchObject({ code: '22023' });
    await expect(db.prepared('bad name; drop', [], 'select 1', [])).rejects.toMatchObject({ code: '42601' });
  });


  it('sends byte-array parameters in binary format, and the others as before', async () => {
    const db = await open();
    // Bytes a text conversion would change (a zero byte, high bytes): binary format keeps them exact.
    const bytes = Buffer.from([0, 1, 127, 128, 255, 0, 92]);
    await db.query('create table b (id int primary key, data bytea, tags text[])');
    await db.query('insert into b values ($1, $2, $3)', [1, bytes, ['a', 'b']]);
    const rows = (await db.query("select encode(data, 'hex') as hex, tags, octet_length(data) as n from b")).rows;
    expect(rows).toEqual([{ hex: bytes.toString('hex'), tags: ['a', 'b'], n: bytes.length }]);
    // pgvector's binary form (vector_recv) is how vectors are written.
    await db.query('create extension if not exists vector');
    const vector = Buffer.alloc(4 + 8);
    vector.writeInt16BE(2, 0);
    vector.writeFloatBE(0.25, 4);
    vector.writeFloatBE(-1.5, 8);
    expect((await db.query('select $1::vector::text as v', [vector])).rows).toEqual([{ v: '[0.25,-1.5]' }]);
  });
  it('holds another client off while a transaction is open, and runs its statements in order after', async () => {
    const db = await open();
    const other = new PgliteClient(await db.connect(), false);
    await db.query('begin');
    await db.query("insert into t values (1, 'inside')");
    const seen: string[] = [];
    const waiting = other.query('select count(*)::int as n from t').then((res) => {
      seen.push(`other saw ${String(res.rows[0]!.n)}`);
    });
    const after = other.query("insert into t values (2, 'after')");
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(seen).toEqual([]);
    await db.query('rollback');
    await waiting;
    await after;
    expect(seen).toEqual(['other saw 0']);
    expect((await db.query('select id from t order by id')).rows).toEqual([{ id: 2 }]);
    await other.close();
  });

  it('rolls back the transaction of a client that goes away, and lets the others on', async () => {
    const db = await open();
    const leaving = new PgliteClient(await db.connect(), false);
    await leaving.query('begin');
    await leaving.query("insert into t values (7, 'never committed')");
    const blocked = db.query('select count(*)::int as n from t');
    await leaving.close();
    expect((await blocked).rows).toEqual([{ n: 0 }]);
    await expect(leaving.query('select 1')).rejects.toThrow(/closed/);
  });

  it('passes a notice to the other clients before the reply to what its sender asked next', async () => {
    const db = await open();
    const other = new PgliteClient(await db.connect(), false);
    const events: string[] = [];
    db.onNotice((topic, payload) => events.push(`${topic}:${JSON.stringify(payload)}`));
    other.notify('cache.forget', ['d1']);
    await other.query("insert into t values (3, 'written')");
    const read = await db.query('select count(*)::int as n from t');
    events.push(`read ${String(read.rows[0]!.n)}`);
    expect(events).toEqual(['cache.forget:["d1"]', 'read 1']);
    await other.close();
  });

  it('writes the time it spent per statement when TESSERA_DB_PROFILE names a file', async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'tessera-db-profile-'));
    const file = path.join(dir, 'profile.txt');
    process.env.TESSERA_DB_PROFILE = file;
    try {
      const db = await open();
      for (let i = 0; i < 3; i++) await db.query('insert into t values ($1, $2)', [i, 'x']);
      await db.prepared('t_count', [], 'select count(*) from t', []);
      await db.close();
      const lines = (await readFile(file, 'utf8')).trim().split('\n');
      expect(lines[0]).toMatch(/time by statement/);
      expect(lines).toContainEqual(expect.stringMatching(/^\s*[\d.]+ ms\s+3\s+query insert into t values/));
      expect(lines).toContainEqual(expect.stringMatching(/^\s*[\d.]+ ms\s+1\s+prepared t_count$/));
    } finally {
      delete process.env.TESSERA_DB_PROFILE;
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('refuses queries clearly once closed', async () => {
    const db = await open();
    await db.close();
    await expect(db.query('select 1')).rejects.toThrow(/embedded database thread stopped/);
  });
});
