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
import { MessageChannel, type MessagePort, Worker } from 'node:worker_threads';
import { DATA_THREAD_LIMITS } from '../thread-entry.js';
import { withArrayLiterals } from './array-literal.js';

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
  | { op: 'prepared'; name: string; parameterTypes: readonly PreparedParameterType[]; sql: string; params: readonly PreparedParameter[] }
  | { op: 'dump' }
  | { op: 'close' };

/** The parameter types a prepared statement may take (each has its literal form in the thread). */
export type PreparedParameterType = 'text' | 'text[]' | 'integer';
export type PreparedParameter = string | number | readonly string[] | null;

type Reply = { id: number; ok: true; value: unknown } | { id: number; ok: false; error: Record<string, unknown> & { message: string } };

/**
 * What the thread runs: plain ESM, so it loads the same under tsx, vitest and compiled builds.
 *
 * Clients are message ports: the thread's parent, and any port attached later (the task thread's). PGlite
 * has one connection, so a transaction belongs to the client that began it: until that client commits or
 * rolls back, other clients' statements wait in the queue (each client's own stay in order). A client
 * whose port closes mid-transaction is rolled back. `notify` messages are passed on at once to every other
 * client, on the same port as their replies, so a client sees a notice before the reply to any statement
 * the sender issued after sending it (how caches in other threads hear of a write before its result).
 */
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

// Byte-array parameters go over the protocol in binary format (pgvector's vectors: no text to parse in WASM);
// PGlite would otherwise turn them into text, by their type's serializer or toString.
const binaryAware = new Proxy({}, {
  get: (_, oid) => (value) => (value instanceof Uint8Array ? value : db.serializers[oid] ? db.serializers[oid](value) : value.toString()),
});
const withBinary = (params, options) => (params?.some((p) => p instanceof Uint8Array) ? { ...options, serializers: binaryAware } : options);

// Prepared statements (PREPARE once, then EXECUTE with literal arguments): a hot read skips parsing and
// planning its SQL in WASM each time. PGlite's query() has no named statements, so the arguments are
// written as literals, each checked against its declared type first.
const prepared = new Set();
const NAME = /^[a-z_][a-z0-9_]{0,62}$/;
const TYPES = new Set(['text', 'text[]', 'integer']);
const quoteText = (value) => {
  if (typeof value !== 'string') throw Object.assign(new Error('a text parameter must be a string'), { code: '22023' });
  if (value.includes('\\u0000')) throw Object.assign(new Error('invalid byte sequence for encoding "UTF8": 0x00'), { code: '22021' });
  return "'" + value.replaceAll("'", "''") + "'";
};
const literal = (type, value) => {
  if (value === null) return 'null::' + type;
  if (type === 'integer') {
    if (!Number.isSafeInteger(value)) throw Object.assign(new Error('an integer parameter must be a safe integer'), { code: '22023' });
    return String(value);
  }
  if (type === 'text') return quoteText(value);
  if (!Array.isArray(value)) throw Object.assign(new Error('a text[] parameter must be an array of strings'), { code: '22023' });
  return 'array[' + value.map(quoteText).join(',') + ']::text[]';
};
async function runPrepared({ name, parameterTypes, sql, params }) {
  if (!NAME.test(name) || !parameterTypes.every((t) => TYPES.has(t)) || params.length !== parameterTypes.length) {
    throw Object.assign(new Error('malformed prepared statement ' + String(name)), { code: '42601' });
  }
  if (!prepared.has(name)) {
    await db.exec('prepare ' + name + (parameterTypes.length > 0 ? '(' + parameterTypes.join(', ') + ')' : '') + ' as ' + sql);
    prepared.add(name);
  }
  const args = params.map((value, i) => literal(parameterTypes[i], value));
  // The simple query protocol (one message, no parse/bind/describe round): about a fifth less time per read.
  const [result] = await db.exec('execute ' + name + (args.length > 0 ? '(' + args.join(', ') + ')' : ''));
  return result;
}

const BEGIN = /^\\s*(begin|start\\s+transaction)\\b/i;
const END = /^\\s*(commit|end|abort|rollback)\\b(?!\\s+(transaction\\s+)?to\\b)/i;
const clients = new Map();
const queue = [];
let nextClient = 0;
let owner = null;
let running = false;
let closed = false;

function attach(port) {
  const client = nextClient++;
  clients.set(client, port);
  port.on('message', (request) => receive(client, request));
  if (client !== 0) port.on('close', () => detach(client));
}

function detach(client) {
  if (!clients.delete(client)) return;
  for (let i = queue.length - 1; i >= 0; i--) if (queue[i].client === client) queue.splice(i, 1);
  if (owner === client) queue.unshift({ client, request: { id: -1, op: 'query', sql: 'rollback' } });
  pump();
}

function receive(client, request) {
  if (request.op === 'notify') {
    for (const [other, port] of clients) if (other !== client) port.postMessage({ notify: request.topic, payload: request.payload });
    return;
  }
  if (request.op === 'attach') {
    attach(request.port);
    clients.get(client)?.postMessage({ id: request.id, ok: true, value: null });
    return;
  }
  queue.push({ client, request });
  pump();
}

async function pump() {
  if (running) return;
  running = true;
  try {
    for (;;) {
      const at = queue.findIndex((entry) => owner === null || owner === entry.client);
      if (at < 0 || closed) break;
      const [{ client, request }] = queue.splice(at, 1);
      await run(client, request);
    }
  } finally {
    running = false;
  }
}

// TESSERA_DB_PROFILE=<file>: time spent per statement (its first 100 characters), written to the file at close.
const profile = workerData.profile ? new Map() : undefined;
function account(request, started) {
  const text = request.op === 'prepared' ? 'prepared ' + request.name : request.op + ' ' + String(request.sql ?? '');
  const key = text.replace(/\\s+/g, ' ').slice(0, 100);
  const entry = profile.get(key) ?? { count: 0, ms: 0 };
  entry.count += 1;
  entry.ms += performance.now() - started;
  profile.set(key, entry);
}
async function writeProfile() {
  const { writeFile } = await import('node:fs/promises');
  const lines = [...profile].sort((a, b) => b[1].ms - a[1].ms).map(([key, { count, ms }]) => ms.toFixed(1).padStart(10) + ' ms ' + String(count).padStart(8) + '  ' + key);
  await writeFile(workerData.profile, 'embedded database time by statement (ms, count, statement)\\n' + lines.join('\\n') + '\\n');
}

const replyOf = (result) => ({ rows: result.rows, fields: result.fields, affectedRows: result.affectedRows });

async function run(client, request) {
  const reply = (message) => clients.get(client)?.postMessage({ id: request.id, ...message });
  const started = profile ? performance.now() : 0;
  try {
    let value = null;
    if (request.op === 'query') {
      const result = await db.query(request.sql, request.params, withBinary(request.params, request.options));
      if (BEGIN.test(request.sql)) owner = client;
      else if (END.test(request.sql) && owner === client) owner = null;
      value = replyOf(result);
    } else if (request.op === 'prepared') {
      value = replyOf(await runPrepared(request));
    } else if (request.op === 'exec') {
      value = await db.exec(request.sql);
    } else if (request.op === 'dump') {
      value = await db.dumpDataDir('none');
    } else if (request.op === 'close') {
      closed = true;
      await db.close();
      if (profile) await writeProfile().catch(() => undefined);
      reply({ ok: true, value: null });
      // Whatever other clients still wait for will not run: tell them instead of leaving them waiting.
      for (const entry of queue.splice(0)) {
        clients.get(entry.client)?.postMessage({ id: entry.request.id, ok: false, error: { message: 'the embedded database is closed', name: 'Error' } });
      }
      for (const port of clients.values()) port.close();
      return;
    }
    if (profile) account(request, started);
    reply({ ok: true, value });
  } catch (err) {
    // A failed COMMIT or ROLLBACK still ends the transaction.
    if (request.op === 'query' && END.test(request.sql) && owner === client) owner = null;
    reply({ ok: false, error: plain(err) });
  }
}

attach(parentPort);
`;

/** A message endpoint: the thread itself (from its parent) or a port attached to it (from another thread). */
interface Endpoint {
  postMessage(message: unknown, transferList?: readonly Transferable[]): void;
  on(event: 'message', listener: (message: unknown) => void): unknown;
  on(event: 'close', listener: () => void): unknown;
  ref(): void;
  unref(): void;
  close?(): void;
}

type Transferable = MessagePort;

type Notice = { notify: string; payload: unknown };

/**
 * One client of the database thread: the connection object knex-pglite expects (`query`, `exec`,
 * `waitReady`, `close`), plus notices shared with the other clients (`notify`, `onNotice`).
 */
export class PgliteClient {
  readonly waitReady: Promise<void>;
  private readonly pending = new Map<number, { resolve: (value: unknown) => void; reject: (error: Error) => void }>();
  private readonly listeners = new Set<(topic: string, payload: unknown) => void>();
  private nextId = 1;
  protected exited: Error | undefined;

  constructor(
    protected readonly endpoint: Endpoint,
    /** Whether the thread answers a start message (id 0) on this endpoint before taking requests. */
    announcesStart: boolean,
  ) {
    let started: { resolve: () => void; reject: (error: Error) => void } | undefined;
    this.waitReady = announcesStart
      ? new Promise<void>((resolve, reject) => {
          started = { resolve, reject };
        })
      : Promise.resolve();
    if (started) this.pending.set(0, { resolve: () => started!.resolve(), reject: (error) => started!.reject(error) });
    this.endpoint.on('message', (message) => this.receive(message as Reply | Notice));
    // A port closes when the database thread closes it (the database closed) or ends.
    this.endpoint.on('close', () => this.fail(new Error('the embedded database is closed')));
    if (!announcesStart) this.endpoint.unref();
  }

  query(sql: string, params?: unknown[], options?: Record<string, unknown>): Promise<PgliteQueryResult> {
    return this.send({ op: 'query', sql, params: withArrayLiterals(params), options }) as Promise<PgliteQueryResult>;
  }

  exec(sql: string): Promise<PgliteQueryResult[]> {
    return this.send({ op: 'exec', sql }) as Promise<PgliteQueryResult[]>;
  }

  /**
   * Runs a statement prepared once in the database thread under `name` (PREPARE, then EXECUTE): for hot
   * reads, whose SQL is then parsed and planned once instead of at every call. `sql` uses `$1`.. for the
   * parameters, declared in `parameterTypes`; one name always means the same statement.
   */
  prepared(name: string, parameterTypes: readonly PreparedParameterType[], sql: string, params: readonly PreparedParameter[]): Promise<PgliteQueryResult> {
    return this.send({ op: 'prepared', name, parameterTypes, sql, params }) as Promise<PgliteQueryResult>;
  }

  /** The data directory as a tar (tests start other instances from it). */
  dumpDataDir(): Promise<Blob> {
    return this.send({ op: 'dump' }) as Promise<Blob>;
  }

  /** Passes `payload` to every other client of the thread, ahead of any reply to what this client sends next. */
  notify(topic: string, payload: unknown): void {
    if (!this.exited) this.endpoint.postMessage({ op: 'notify', topic, payload });
  }

  /** Notices from the other clients; returns the unsubscribe. */
  onNotice(listener: (topic: string, payload: unknown) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Detaches this client (the thread rolls back a transaction it left open); the database stays open. */
  close(): Promise<void> {
    this.fail(new Error('this database client is closed'));
    this.endpoint.close?.();
    return Promise.resolve();
  }

  protected send(request: Request | { op: 'attach'; port: MessagePort }, transferList?: readonly Transferable[]): Promise<unknown> {
    if (this.exited) return Promise.reject(this.exited);
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      // Idle, the endpoint must not keep the process alive; waiting on it, it must.
      if (this.pending.size === 0) this.endpoint.ref();
      this.pending.set(id, { resolve, reject });
      this.endpoint.postMessage({ ...request, id }, transferList);
    });
  }

  protected fail(error: Error): void {
    this.exited ??= error;
    for (const waiter of this.pending.values()) waiter.reject(error);
    this.pending.clear();
  }

  private receive(message: Reply | Notice): void {
    if ('notify' in message) {
      for (const listener of this.listeners) listener(message.notify, message.payload);
      return;
    }
    const waiter = this.pending.get(message.id);
    if (!waiter) return;
    this.pending.delete(message.id);
    if (this.pending.size === 0) this.endpoint.unref();
    if (message.ok) waiter.resolve(message.value);
    else waiter.reject(new PgliteError(message.error));
  }
}

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

/** The database thread, seen from the thread that started it (which closes it). */
export class PgliteThread extends PgliteClient {
  private readonly worker: Worker;
  private closing: Promise<void> | undefined;

  constructor(options: PgliteThreadOptions) {
    const worker = new Worker(THREAD_SOURCE, {
      eval: true,
      workerData: {
        pglite: esmEntry('@electric-sql/pglite'),
        pgvector: esmEntry('@electric-sql/pglite-pgvector'),
        dataDir: options.dataDir,
        loadDataDir: options.loadDataDir,
        profile: process.env.TESSERA_DB_PROFILE || undefined,
      },
      resourceLimits: DATA_THREAD_LIMITS,
    });
    super(worker, true);
    this.worker = worker;
    this.worker.on('error', (error) => this.fail(new Error(`the embedded database thread failed: ${error.message}`, { cause: error })));
    this.worker.on('exit', (code) => this.fail(new Error(`the embedded database thread stopped (exit code ${code})`)));
  }

  /** A port for another thread of this process to use the database through (`new PgliteClient(port, false)` there). */
  async connect(): Promise<MessagePort> {
    const { port1, port2 } = new MessageChannel();
    await this.send({ op: 'attach', port: port2 }, [port2]);
    return port1;
  }

  override close(): Promise<void> {
    this.closing ??= this.exited
      ? Promise.resolve()
      : (this.send({ op: 'close' }) as Promise<void>)
          .then(
            () => undefined,
            () => undefined,
          )
          .finally(() => this.worker.terminate().then(() => undefined));
    return this.closing;
  }
}
