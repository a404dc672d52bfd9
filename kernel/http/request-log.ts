/**
 * The request log every usage and analytics figure is computed from. The HTTP layer records one row per
 * request; rows are buffered and written in batches so the request path never waits on the database.
 */
import type { Knex } from 'knex';
import type { Logger } from 'pino';
import type { Migration } from '../db/migrations.js';

export interface RequestLogEntry {
  organization_id: string | null;
  key_id: string | null;
  operation_id: string | null;
  method: string;
  path: string;
  status: number;
  latency_ms: number;
  credits: number;
  namespace_id: string | null;
  request_id: string;
  created_at: Date;
}

export const requestLogMigrations: Migration[] = [
  {
    name: '0001_request_log',
    async up(db) {
      await db.schema.createTable('request_log', (t) => {
        t.bigIncrements('id').primary();
        t.text('organization_id');
        t.text('key_id');
        t.text('operation_id');
        t.text('method').notNullable();
        t.text('path').notNullable();
        t.integer('status').notNullable();
        t.double('latency_ms').notNullable();
        t.double('credits').notNullable().defaultTo(0);
        t.text('namespace_id');
        t.text('request_id').notNullable();
        t.timestamp('created_at', { useTz: true }).notNullable();
        t.index(['organization_id', 'created_at']);
        t.index(['key_id', 'created_at']);
      });
    },
  },
];

const MAX_BUFFER = 2000;

const COLUMNS: ReadonlyArray<readonly [keyof RequestLogEntry, string]> = [
  ['organization_id', 'text'],
  ['key_id', 'text'],
  ['operation_id', 'text'],
  ['method', 'text'],
  ['path', 'text'],
  ['status', 'int4'],
  ['latency_ms', 'float8'],
  ['credits', 'float8'],
  ['namespace_id', 'text'],
  ['request_id', 'text'],
  ['created_at', 'timestamptz'],
];

export class RequestLog {
  private buffer: RequestLogEntry[] = [];
  private flushing: Promise<void> = Promise.resolve();

  constructor(
    private readonly db: Knex,
    private readonly log: Logger,
  ) {}

  record(entry: RequestLogEntry): void {
    this.buffer.push(entry);
    if (this.buffer.length >= MAX_BUFFER) void this.flush();
  }

  /** Writes everything recorded so far; readers of usage call this first, so figures are current. */
  flush(): Promise<void> {
    this.flushing = this.flushing.then(() => this.writeBuffer());
    return this.flushing;
  }

  private async writeBuffer(): Promise<void> {
    if (this.buffer.length === 0) return;
    const batch = this.buffer;
    this.buffer = [];
    try {
      // One statement with one array per column: far cheaper to parse than thousands of bound values.
      await this.db.raw(
        `insert into request_log (${COLUMNS.map(([name]) => name).join(', ')})
         select * from unnest(${COLUMNS.map(([, type]) => `?::${type}[]`).join(', ')})`,
        COLUMNS.map(([name]) => batch.map((row) => row[name])) as unknown as Knex.RawBinding[],
      );
    } catch (err) {
      this.log.error({ err, rows: batch.length }, 'request log write failed; rows kept for the next flush');
      this.buffer = batch.concat(this.buffer).slice(-10 * MAX_BUFFER);
    }
  }
}
