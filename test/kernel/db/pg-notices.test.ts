/**
 * PostgresNotices (kernel/db/pg-notices.ts) on a real PostgreSQL (TEST_DATABASE_URL): a notice reaches the
 * other processes and not its sender, an oversized one forgets everything, and a lost listening connection
 * turns the caches off until it is back, with a reset each way.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NOTICE_CHANNEL, PostgresNotices } from '../../../kernel/db/pg-notices.js';

const url = process.env.TEST_DATABASE_URL;

async function until(check: () => boolean, what: string, ms = 5_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

describe.skipIf(!url)('PostgresNotices', () => {
  let pool: pg.Pool;
  const opened: PostgresNotices[] = [];
  const open = async () => {
    const notices = new PostgresNotices(url!, (channel, payload) => pool.query('select pg_notify($1, $2)', [channel, payload]));
    await notices.start();
    opened.push(notices);
    return notices;
  };

  beforeAll(() => {
    pool = new pg.Pool({ connectionString: url, max: 2 });
  });
  afterAll(async () => {
    for (const notices of opened) await notices.close();
    await pool.end();
  });

  it('delivers a notice to the other processes, not back to its sender', async () => {
    const a = await open();
    const b = await open();
    expect(a.listening && b.listening).toBe(true);
    const atA: unknown[] = [];
    const atB: unknown[] = [];
    a.onNotice((topic, keys) => atA.push([topic, keys]));
    b.onNotice((topic, keys) => atB.push([topic, keys]));
    a.notify('cache:retrievers', ['org\u0000ns\u0000one']);
    b.notify('cache:collections', null);
    await until(() => atA.length === 1 && atB.length === 1, 'both notices');
    expect(atB).toEqual([['cache:retrievers', ['org\u0000ns\u0000one']]]);
    expect(atA).toEqual([['cache:collections', null]]);
  });

  it('turns a notice too large for NOTIFY into "forget everything of this topic"', async () => {
    const a = await open();
    const b = await open();
    const atB: Array<[string, readonly string[] | null]> = [];
    b.onNotice((topic, keys) => atB.push([topic, keys]));
    a.notify('cache:retrievers', Array.from({ length: 2_000 }, (_, i) => `key-${i}`));
    await until(() => atB.length === 1, 'the notice');
    expect(atB[0]).toEqual(['cache:retrievers', null]);
  });

  it('ignores what other programs send on the channel', async () => {
    const b = await open();
    const atB: unknown[] = [];
    b.onNotice((topic, keys) => atB.push([topic, keys]));
    await pool.query('select pg_notify($1, $2)', [NOTICE_CHANNEL, 'not json']);
    await pool.query('select pg_notify($1, $2)', [NOTICE_CHANNEL, JSON.stringify({ from: 'x', topic: 7, keys: null })]);
    const a = await open();
    a.notify('cache:after', null);
    await until(() => atB.length === 1, 'the valid notice');
    expect(atB).toEqual([['cache:after', null]]);
  });

  it('stops listening when its connection is lost, resets, and listens again once it is back', async () => {
    const b = await open();
    let resets = 0;
    b.onReset(() => resets++);
    // End every listening connection of this channel, as a database restart or a network cut would.
    await pool.query(`select pg_terminate_backend(pid) from pg_stat_activity where query = $1 and datname = current_database() and pid <> pg_backend_pid()`, [`listen ${NOTICE_CHANNEL}`]);
    await until(() => !b.listening, 'the loss to be noticed');
    expect(resets).toBeGreaterThanOrEqual(1);
    await until(() => b.listening, 'listening again');
    expect(resets).toBeGreaterThanOrEqual(2);
    const a = await open();
    const atB: unknown[] = [];
    b.onNotice((topic) => atB.push(topic));
    a.notify('cache:after-restart', null);
    await until(() => atB.length === 1, 'a notice after the reconnect');
  });

  it('starts without listening when the database cannot be reached, and does not throw', async () => {
    const bad = new URL(url!);
    bad.port = '1';
    const notices = new PostgresNotices(bad.toString(), async () => undefined);
    opened.push(notices);
    await notices.start();
    expect(notices.listening).toBe(false);
  });
});
