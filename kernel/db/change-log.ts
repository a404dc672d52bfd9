/**
 * A per-key change log in the database, for in-process copies of data whose source of truth is
 * elsewhere (the text index keeps postings this way; the in-process vector index does too). Each write
 * bumps its key's version and records which ids it touched; a process holding a copy reads the head
 * (one indexed row) before using it and replays the ids changed since its copy's version. So a write
 * acknowledged by any process is seen by the next read of every process sharing the database.
 *
 * `generation` changes when a key is dropped and created again, so a copy of the old data is never
 * mistaken for a copy of the new one. Old entries are pruned every `keepVersions` versions; a copy older
 * than the horizon (`prunedBelow`) reloads instead of replaying.
 */
import { randomBytes } from 'node:crypto';
import type { Knex } from 'knex';

export interface ChangeLogHead {
  version: number;
  prunedBelow: number;
  generation: string;
}

export interface ChangeLogOptions {
  /** Table name prefix: `<prefix>_versions` and `<prefix>_changes`. */
  prefix: string;
  keepVersions?: number;
}

export class ChangeLog {
  private readonly versions: string;
  private readonly changes: string;
  private readonly keepVersions: number;
  private ready: Promise<void> | undefined;

  constructor(private readonly db: Knex, options: ChangeLogOptions) {
    if (!/^[a-z][a-z0-9_]{0,40}$/.test(options.prefix)) throw new Error(`bad change log prefix '${options.prefix}'`);
    this.versions = `${options.prefix}_versions`;
    this.changes = `${options.prefix}_changes`;
    this.keepVersions = options.keepVersions ?? 256;
  }

  /** Creates the tables on first use (under a lock: two processes may start at once). */
  setup(): Promise<void> {
    this.ready ??= this.db
      .transaction(async (trx) => {
        await trx.raw('select pg_advisory_xact_lock(hashtext(?))', [`tessera.changelog:${this.versions}`]);
        await trx.raw(`create table if not exists ${this.versions} (
          key text primary key, version bigint not null, pruned_below bigint not null, generation text not null)`);
        await trx.raw(`create table if not exists ${this.changes} (key text not null, version bigint not null, id text not null)`);
        await trx.raw(`create index if not exists ${this.changes}_by_version on ${this.changes} (key, version)`);
      })
      .catch((err: unknown) => {
        this.ready = undefined;
        throw err;
      });
    return this.ready;
  }

  /** The key's head, or undefined when nothing was ever written under it (or it was dropped). */
  async head(key: string): Promise<ChangeLogHead | undefined> {
    await this.setup();
    const res = (await this.db.raw(`select version, pruned_below, generation from ${this.versions} where key = ?`, [key])) as {
      rows: Array<{ version: string | number; pruned_below: string | number; generation: string }>;
    };
    const row = res.rows[0];
    return row ? { version: Number(row.version), prunedBelow: Number(row.pruned_below), generation: row.generation } : undefined;
  }

  /** Creates the key's head at version 0 when it has none; returns the head. */
  async open(key: string): Promise<ChangeLogHead> {
    await this.setup();
    await this.db.raw(`insert into ${this.versions} (key, version, pruned_below, generation) values (?, 0, 0, ?) on conflict (key) do nothing`, [
      key, newGeneration(),
    ]);
    return (await this.head(key))!;
  }

  /**
   * Runs `work` (the write to the source of truth) and then records `ids` as changed, all under the
   * key's lock, so versions are in the same order as the writes they describe. With `lockDuringWork`
   * false, `work` runs first and only the record is locked (for a database with one connection, where
   * `work` needs that connection itself: callers then serialize writes in-process).
   */
  async write<T>(
    key: string,
    ids: readonly string[],
    work: () => Promise<T>,
    lockDuringWork: boolean,
    /** The write changed ids it cannot name: start a new generation, so every copy reloads. */
    reset = false,
  ): Promise<{ result: T; head: ChangeLogHead }> {
    await this.setup();
    let result: T | undefined;
    let bumped: BumpedRow;
    if (lockDuringWork) {
      bumped = await this.db.transaction(async (trx) => {
        await trx.raw('select pg_advisory_xact_lock(hashtext(?))', [`tessera.changelog:${this.versions}:${key}`]);
        result = await work();
        return this.record(trx, key, ids, reset);
      });
    } else {
      result = await work();
      // One statement, atomic by itself, with no transaction around it: the bump's row lock holds concurrent
      // writers of the key until it commits, so versions still follow the order of the records.
      bumped = await this.record(this.db, key, ids, reset);
    }
    return { result: result as T, head: await this.bumped(key, bumped) };
  }

  /**
   * `write` where the write to the source of truth is one data-modifying statement on this same database
   * (`work`, e.g. an INSERT): it runs as the first part of the statement that bumps and records, so the
   * whole write is one statement, atomic by itself. For a database with one connection (nothing runs
   * between two statements there, and each statement is a round trip to its thread).
   */
  async writeInStatement(key: string, ids: readonly string[], work: { sql: string; bindings: readonly unknown[] }): Promise<ChangeLogHead> {
    await this.setup();
    return this.bumped(key, await this.record(this.db, key, ids, false, work));
  }

  /** The head after a bump; prunes the log every `keepVersions` versions. */
  private async bumped(key: string, bumped: BumpedRow): Promise<ChangeLogHead> {
    const version = Number(bumped.version);
    let prunedBelow = Number(bumped.pruned_below);
    if (version % this.keepVersions === 0) {
      prunedBelow = version - this.keepVersions;
      await this.prune(key, prunedBelow);
    }
    return { version, prunedBelow, generation: bumped.generation };
  }

  /** Bumps the key's version and records `ids` under it, in one statement (after `work`, when given, in the same one). */
  private async record(db: Knex, key: string, ids: readonly string[], reset: boolean, work?: { sql: string; bindings: readonly unknown[] }): Promise<BumpedRow> {
    const res = (await db.raw(
      `with ${work ? `work as (${work.sql}), ` : ''}bumped as (
         insert into ${this.versions} (key, version, pruned_below, generation) values (?, 1, 0, ?)
         on conflict (key) do update set version = ${this.versions}.version + 1${reset ? ', generation = excluded.generation' : ''}
         returning version, pruned_below, generation),
       logged as (insert into ${this.changes} (key, version, id) select ?, bumped.version, unnest(?::text[]) from bumped)
       select version, pruned_below, generation from bumped`,
      [...(work?.bindings ?? []), key, newGeneration(), key, [...ids]] as unknown as Knex.RawBinding[],
    )) as { rows: BumpedRow[] };
    return res.rows[0]!;
  }

  /** Forgets the entries at or below `horizon`: a copy older than that reloads. */
  private async prune(key: string, horizon: number): Promise<void> {
    await this.db.transaction(async (trx) => {
      await trx.raw(`delete from ${this.changes} where key = ? and version <= ?`, [key, horizon]);
      await trx.raw(`update ${this.versions} set pruned_below = greatest(pruned_below, ?) where key = ?`, [horizon, key]);
    });
  }

  /**
   * Ids changed after `version`, with the head read in the same statement (one snapshot, so a prune
   * racing this read cannot hide changes). Undefined when the log no longer reaches back that far (or
   * the key was dropped): reload instead.
   */
  async since(key: string, version: number, generation: string): Promise<{ ids: string[]; head: ChangeLogHead } | undefined> {
    await this.setup();
    const res = (await this.db.raw(
      `select v.version as head, v.pruned_below, v.generation, c.id from ${this.versions} v
       left join (select distinct id from ${this.changes} where key = ? and version > ?) c on true
       where v.key = ?`,
      [key, version, key],
    )) as { rows: Array<{ head: string | number; pruned_below: string | number; generation: string; id: string | null }> };
    const first = res.rows[0];
    if (!first || first.generation !== generation || Number(first.pruned_below) > version) return undefined;
    return {
      ids: res.rows.flatMap((r) => (r.id === null ? [] : [r.id])),
      head: { version: Number(first.head), prunedBelow: Number(first.pruned_below), generation: first.generation },
    };
  }

  /** Forgets the key (its next write starts a new generation). */
  async drop(key: string): Promise<void> {
    await this.setup();
    await this.db.transaction(async (trx) => {
      await trx.raw('select pg_advisory_xact_lock(hashtext(?))', [`tessera.changelog:${this.versions}:${key}`]);
      await trx.raw(`delete from ${this.changes} where key = ?`, [key]);
      await trx.raw(`delete from ${this.versions} where key = ?`, [key]);
    });
  }
}

interface BumpedRow {
  version: string | number;
  pruned_below: string | number;
  generation: string;
}

function newGeneration(): string {
  return randomBytes(8).toString('hex');
}
