/**
 * PGlite runs no autovacuum, so its planner never learns that a table has grown: with an empty table's
 * statistics it finds ten documents by id by reading the whole collection (2.5 ms instead of 0.05 ms at
 * 10,000 documents, and worse with every document added). This does autovacuum's ANALYZE part for the
 * embedded database: it compares each table's size on disk with the size its last ANALYZE saw and
 * analyzes the ones that grew by a fifth (or from nothing). The check reads the catalog only; ANALYZE
 * samples a bounded number of rows, so neither grows with the data.
 *
 * A PostgreSQL server with autovacuum off (as some test and bulk-load setups run) is in the same place:
 * after loading 100,000 documents its planner found ten by id in 26 ms (a bitmap scan of the whole
 * collection) instead of 0.1 ms. There the service runs the same check.
 */
import type { Knex } from 'knex';
import type { Logger } from 'pino';
import type { DatabaseHandle } from './database.js';

/** A table grown by this share since its last ANALYZE is analyzed again (autovacuum's default is 10% + 50 rows). */
const GROWTH = 0.2;
/** Tables smaller than this many pages are planned well enough without statistics. */
const MIN_PAGES = 8;

/**
 * Whether this process keeps the planner's statistics itself: the embedded database's owner (not a thread
 * attached to it: one analyzer is enough), or a PostgreSQL server whose autovacuum is off.
 */
export async function keepsOwnStatistics(database: Pick<DatabaseHandle, 'db' | 'kind'>, attached: boolean): Promise<boolean> {
  if (database.kind === 'pglite') return !attached;
  const res = (await database.db.raw("select current_setting('autovacuum') as autovacuum")) as { rows: Array<{ autovacuum: string }> };
  return res.rows[0]?.autovacuum === 'off';
}

export class TableStatistics {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<string[]> | undefined;

  constructor(
    private readonly db: Knex,
    private readonly log: Logger,
  ) {}

  /** Analyzes the tables that grew; returns their names. */
  refresh(): Promise<string[]> {
    this.running ??= this.analyzeGrown().finally(() => (this.running = undefined));
    return this.running;
  }

  start(intervalMs: number): void {
    if (intervalMs <= 0) return;
    this.timer = setInterval(() => {
      this.refresh().catch((err: unknown) => this.log.warn({ err }, 'refreshing table statistics failed'));
    }, intervalMs);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.running?.catch(() => undefined);
  }

  private async analyzeGrown(): Promise<string[]> {
    const res = (await this.db.raw(
      `select c.relname as name, c.relpages as analyzed_pages, pg_relation_size(c.oid) / current_setting('block_size')::int as pages
       from pg_class c join pg_namespace n on n.oid = c.relnamespace
       where c.relkind = 'r' and n.nspname = current_schema()`,
    )) as { rows: Array<{ name: string; analyzed_pages: number | string; pages: number | string }> };
    const grown = res.rows.filter((r) => Number(r.pages) >= MIN_PAGES && Number(r.pages) > Number(r.analyzed_pages) * (1 + GROWTH)).map((r) => r.name);
    for (const name of grown) {
      const started = performance.now();
      await this.db.raw('analyze ??', [name]);
      this.log.debug({ table: name, ms: Math.round(performance.now() - started) }, 'table statistics refreshed');
    }
    return grown;
  }
}
