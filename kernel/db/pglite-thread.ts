/**
 * PGlite in its own thread. PGlite is PostgreSQL compiled to WASM: every query it runs is CPU on the
 * thread that owns it. Owned by the HTTP thread, a batch's writes or a big scan stall every request behind
 * them; owned by this thread, the HTTP thread only posts the SQL and receives the rows, and the two cores
 * work side by side.
 *
 * `PgliteThread` is the connection object knex-pglite expects (`query`, `exec`, `waitReady`, `close`),
 * so knex's single-connection pool still serializes transactions exactly as before. Errors come back
 * with their PostgreSQL fields (`code`, `detail`, `constraint`, ...) so callers that branch on a SQLSTATE
 * see the same error they saw in process.
 */
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';

export interface PgliteThreadOptions {
  /** Data folder; in memory when absent. */
  dataDir?: string;
  /** A data dump (tar) to start from instead of running initdb. */
  loadDataDir?: Blob;
}

export interface PgliteQueryResult {
  rows: Array<Record<string, unknown>>;
  fields: Array<{ name: string; dataTypeID: number }>;
  affectedRows?: number;
}

type Request =
  | { op: 'query'; sql: string; params: unknown[] | undefined; options: Record<string, unknown> | undefined }
  | { op: 'exec'; sql: string }
  | { op: 'dump' }
  | { op: 'close' };

type Reply = { id: number; ok: true; value: unknown } | { id: number; ok: false; error: Record<string, unknown> & { message: string } };

/** What the thread runs: plain ESM, so it loads the same under tsx, vitest and compiled builds. */
const THREAD_SOURCE = `
import { parentPort, workerData } from 'node:worker_threads';
const [{ PGlite }, { vector }] = await Promise.all([import(workerData.pglite), import(workerData.pgvector)]);
let db;
let failure;
try {
  db = await PGlite.create({
    ...(workerData.dataDir ? { dataDir: workerData.dataDir } : {}),
    ...(workerData.loadDataDir ? { loadDataDir: workerData.loadDataDir } : {}),
    extensions: { vector },
  });
} catch (err) {
  failure = err;
}
const plain = (err) => {
  const out = { message: err instanceof Error ? err.message : String(err), name: err?.name ?? 'Error' };
  for (const key of Object.keys(err ?? {})) {
    const value = err[key];
    if (value === undefined || typeof value === 'function' || (typeof value === 'object' && value !== null)) continue;
    out[key] = value;
  }
  return out;
};
parentPort.postMessage({ id: 0, ok: !failure, ...(failure ? { error: plain(failure) } : { value: null }) });
if (failure) process.exit(1);
parentPort.on('message', async (request) => {
  try {
    let value;
    if (request.op === 'query') value = await db.query(request.sql, request.params, request.options);
    else if (request.op === 'exec') value = await db.exec(request.sql);
    else if (request.op === 'dump') value = await db.dumpDataDir('none');
    else if (request.op === 'close') {
      await db.close();
      parentPort.postMessage({ id: request.id, ok: true, value: null });
      parentPort.close();
      return;
    }
    if (request.op === 'query') value = { rows: value.rows, fields: value.fields, affectedRows: value.affectedRows };
    parentPort.postMessage({ id: request.id, ok: true, value });
  } catch (err) {
    parentPort.postMessage({ id: request.id, ok: false, error: plain(err) });
  }
});
`;

/** Both packages ship their ESM build beside the CommonJS one that require() resolves to. */
function esmEntry(name: string): string {
  const entry = createRequire(import.meta.url).resolve(name);
  return pathToFileURL(entry.replace(/\.cjs$/, '.js')).href;
}

/** A PostgreSQL error rebuilt on this side of the thread boundary, with the server's fields. */
export class PgliteError extends Error {
  [field: string]: unknown;
  constructor(fields: Record<string, unknown> & { message: string }) {
    super(fields.message);
    for (const [key, value] of Object.entries(fields)) {
      if (key !== 'message' && key !== 'stack') this[key] = value;
    }
    this.name = typeof fields.name === 'string' ? fields.name : 'error';
  }
}

export class PgliteThread {
  readonly waitReady: Promise<void>;
  private readonly worker: Worker;
  private readonly pending = new Map<number, { resolve: (value: unknown) => void; reject: (error: Error) => void }>();
  private nextId = 1;
  private exited: Error | undefined;
  private closing: Promise<void> | undefined;

  constructor(options: PgliteThreadOptions) {
    this.worker = new Worker(THREAD_SOURCE, {
      eval: true,
      workerData: {
        pglite: esmEntry('@electric-sql/pglite'),
        pgvector: esmEntry('@electric-sql/pglite-pgvector'),
        dataDir: options.dataDir,
        loadDataDir: options.loadDataDir,
      },
    });
    let started: { resolve: () => void; reject: (error: Error) => void };
    this.waitReady = new Promise<void>((resolve, reject) => {
      started = { resolve, reject };
    });
    this.pending.set(0, { resolve: () => started.resolve(), reject: (error) => started.reject(error) });
    this.worker.on('message', (reply: Reply) => {
      const waiter = this.pending.get(reply.id);
      if (!waiter) return;
      this.pending.delete(reply.id);
      // Idle, the thread must not keep the process alive; waiting on it, it must.
      if (this.pending.size === 0) this.worker.unref();
      if (reply.ok) waiter.resolve(reply.value);
      else waiter.reject(new PgliteError(reply.error));
    });
    this.worker.on('error', (error) => this.fail(new Error(`the embedded database thread failed: ${error.message}`, { cause: error })));
    this.worker.on('exit', (code) => this.fail(new Error(`the embedded database thread stopped (exit code ${code})`)));
  }

  query(sql: string, params?: unknown[], options?: Record<string, unknown>): Promise<PgliteQueryResult> {
    return this.send({ op: 'query', sql, params, options }) as Promise<PgliteQueryResult>;
  }

  exec(sql: string): Promise<PgliteQueryResult[]> {
    return this.send({ op: 'exec', sql }) as Promise<PgliteQueryResult[]>;
  }

  /** The data directory as a tar (tests start other instances from it). */
  dumpDataDir(): Promise<Blob> {
    return this.send({ op: 'dump' }) as Promise<Blob>;
  }

  close(): Promise<void> {
    this.closing ??= this.exited
      ? Promise.resolve()
      : (this.send({ op: 'close' }) as Promise<void>).then(
          () => undefined,
          () => undefined,
        ).finally(() => this.worker.terminate().then(() => undefined));
    return this.closing;
  }

  private send(request: Request): Promise<unknown> {
    if (this.exited) return Promise.reject(this.exited);
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      if (this.pending.size === 0) this.worker.ref();
      this.pending.set(id, { resolve, reject });
      this.worker.postMessage({ ...request, id });
    });
  }

  private fail(error: Error): void {
    this.exited ??= error;
    for (const waiter of this.pending.values()) waiter.reject(error);
    this.pending.clear();
  }
}
