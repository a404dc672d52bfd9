/**
 * The knex factory: PostgreSQL when DATABASE_URL is set, otherwise PGlite (Postgres compiled to WASM,
 * with pgvector) in the data folder, run in a thread of its own (pglite-thread.ts). Both are the same SQL dialect, so every store runs on either.
 */
import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import knexFactory, { type Knex } from 'knex';
import type { MessagePort } from 'node:worker_threads';
import pg from 'pg';
import type { Logger } from 'pino';
import { databaseStartupError } from '../startup-errors.js';
import { PgliteClient, PgliteThread, type PreparedParameter, type PreparedParameterType } from './pglite-thread.js';

export type { PreparedParameter, PreparedParameterType };

/**
 * A read on a hot path (a search hydrating its hits): on the embedded database it is prepared once in the
 * database thread and its rows cross the thread as one JSON text, instead of parsed and planned in WASM and
 * sent as row objects at every call (about half the time of a 10-row read). On PostgreSQL it is the same
 * statement through knex.
 */
export interface JsonRead {
  /** The name it is prepared under: one name, one statement, for the life of the database. */
  name: string;
  /** The types of `$1`, `$2`, ... */
  parameterTypes: readonly PreparedParameterType[];
  /** A select with `$n` parameters. Its rows come back as JSON: timestamps as text, jsonb as parsed JSON. */
  sql: string;
}

/** A row read as JSON (a JsonRead, or rows aggregated with json_agg) with its timestamps back to dates, as knex reads give them. */
export function withDates<T extends { created_at: Date; updated_at: Date }>(row: Record<string, unknown>): T {
  return { ...row, created_at: new Date(row.created_at as string), updated_at: new Date(row.updated_at as string) } as unknown as T;
}

export type Database = Knex;

export interface DatabaseHandle {
  db: Database;
  kind: 'postgres' | 'pglite';
  /** Whether the pgvector extension is available in this database. */
  hasPgvector: boolean;
  /** PGlite only: a dump of the data directory, to start other instances from (tests). */
  dump?(): Promise<Blob>;
  /** PGlite, opened by this thread: a port through which another thread of this process uses the same database. */
  connect?(): Promise<MessagePort>;
  /**
   * PGlite: notices between the threads sharing the database (cache invalidations, events), each seen by
   * the others before the reply to anything its sender asks the database afterwards.
   */
  notices?: DatabaseNotices;
  /** The rows of a hot read, as JSON objects (see JsonRead). */
  readJson(read: JsonRead, params: readonly PreparedParameter[]): Promise<Array<Record<string, unknown>>>;
  close(): Promise<void>;
}

/** The statement that returns a read's rows as one JSON array text. */
function asJsonArray(sql: string): string {
  return `select coalesce(json_agg(r), '[]'::json)::text as rows from (${sql}) r`;
}

function parseRows(result: { rows: Array<Record<string, unknown>> }): Array<Record<string, unknown>> {
  const text = result.rows[0]?.rows;
  return typeof text === 'string' ? (JSON.parse(text) as Array<Record<string, unknown>>) : [];
}

/** PostgreSQL: the same statement through knex (`$n` become knex's positional `?`). */
function knexJsonReader(db: Knex): DatabaseHandle['readJson'] {
  const statements = new Map<string, { sql: string; order: number[] }>();
  return async (read, params) => {
    let statement = statements.get(read.name);
    if (!statement) {
      const order: number[] = [];
      const sql = asJsonArray(read.sql).replace(/\$(\d+)/g, (_, n: string) => {
        order.push(Number(n) - 1);
        return '?';
      });
      statement = { sql, order };
      statements.set(read.name, statement);
    }
    const bindings = statement.order.map((i) => params[i] as Knex.RawBinding);
    return parseRows((await db.raw(statement.sql, bindings)) as { rows: Array<Record<string, unknown>> });
  };
}

function pgliteJsonReader(client: PgliteClient): DatabaseHandle['readJson'] {
  return async (read, params) => parseRows(await client.prepared(read.name, read.parameterTypes, asJsonArray(read.sql), params));
}

// Return BIGINT counts as numbers and NUMERIC as floats: every value we store fits a double.
pg.types.setTypeParser(20, (v) => Number(v));
pg.types.setTypeParser(1700, (v) => Number(v));

export interface DatabaseNotices {
  notify(topic: string, payload: unknown): void;
  onNotice(listener: (topic: string, payload: unknown) => void): () => void;
}

export interface DatabaseOptions {
  url: string | undefined;
  /** Folder for PGlite data; ignored with a URL. */
  dataDir: string;
  inMemory: boolean;
  /** A PGlite data dump (tar) to start from instead of running initdb (tests). */
  pgliteTemplate?: Blob;
  /** Use the embedded database another thread opened, through this port (`DatabaseHandle.connect`). */
  pglitePort?: MessagePort;
  /** Where knex's own warnings go (default: its console output). */
  log?: Logger;
}

export async function openDatabase(options: DatabaseOptions): Promise<DatabaseHandle> {
  if (options.url) return openPostgres(options.url, options.log);
  if (options.pglitePort) return attachPglite(options.pglitePort);
  return openPglite(options);
}

async function openPostgres(url: string, log: Logger | undefined): Promise<DatabaseHandle> {
  // Until the first query succeeds, a failure is the one startup line (databaseStartupError), not a logged stack.
  let reachable = false;
  const warn = (message: unknown) => (reachable ? log?.warn({ detail: String(message) }, 'database warning') : log?.debug({ detail: String(message) }, 'database warning'));
  const db = knexFactory({
    client: 'pg',
    connection: url,
    pool: { min: 0, max: 10 },
    acquireConnectionTimeout: 30_000,
    ...(log ? { log: { warn, error: warn, deprecate: warn, debug: (message: unknown) => log.debug({ detail: String(message) }, 'knex') } } : {}),
  });
  try {
    await db.raw('select 1');
    reachable = true;
  } catch (err) {
    await db.destroy();
    throw databaseStartupError(err, url);
  }
  const hasPgvector = await db
    .raw('create extension if not exists vector')
    .then(() => true)
    .catch(() => false);
  return { db, kind: 'postgres', hasPgvector, readJson: knexJsonReader(db), close: () => db.destroy() };
}

async function openPglite(options: DatabaseOptions): Promise<DatabaseHandle> {
  let dataDir: string | undefined;
  if (!options.inMemory) {
    dataDir = path.join(options.dataDir);
    await mkdir(dataDir, { recursive: true });
  }
  const pglite = new PgliteThread({
    ...(dataDir ? { dataDir } : {}),
    ...(options.pgliteTemplate ? { loadDataDir: options.pgliteTemplate } : {}),
  });
  try {
    await pglite.waitReady;
    await pglite.exec('create extension if not exists vector');
  } catch (err) {
    await pglite.close();
    throw err;
  }
  const db = await pgliteKnex(pglite);
  return {
    db,
    kind: 'pglite',
    hasPgvector: true,
    dump: () => pglite.dumpDataDir(),
    connect: () => pglite.connect(),
    notices: pglite,
    readJson: pgliteJsonReader(pglite),
    close: () => db.destroy(),
  };
}

async function attachPglite(port: MessagePort): Promise<DatabaseHandle> {
  const client = new PgliteClient(port, false);
  const db = await pgliteKnex(client);
  return { db, kind: 'pglite', hasPgvector: true, notices: client, readJson: pgliteJsonReader(client), close: () => db.destroy() };
}

async function pgliteKnex(client: PgliteClient): Promise<Knex> {
  const { default: ClientPgLite } = await import('knex-pglite');
  return knexFactory({
    client: ClientPgLite,
    dialect: 'postgres',
    // knex-pglite closes the client it was given when knex is destroyed.
    connection: () => ({ pglite: client }) as object,
  } as Knex.Config);
}
