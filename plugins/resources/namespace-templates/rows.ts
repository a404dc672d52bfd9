/** Writing copied rows into other plugins' tables, whatever columns they have. */
import type { Knex } from 'knex';

/** Rows per insert statement (well under PostgreSQL's 65,535 parameters at these tables' widths). */
const ROWS_PER_INSERT = 500;

/** JSON values (objects, arrays) as jsonb text: knex would send an array as a PostgreSQL array. */
function toColumns(row: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [column, value] of Object.entries(row)) {
    out[column] = value !== null && typeof value === 'object' && !(value instanceof Date) && !Buffer.isBuffer(value) ? JSON.stringify(value) : value;
  }
  return out;
}

export async function insertRows(trx: Knex.Transaction, table: string, rows: ReadonlyArray<Record<string, unknown>>): Promise<void> {
  for (let at = 0; at < rows.length; at += ROWS_PER_INSERT) {
    await trx(table).insert(rows.slice(at, at + ROWS_PER_INSERT).map(toColumns));
  }
}

/** Every JSON column of a row passed through `rewrite`, except those named in `keep` (user data). */
export function rewriteJson(row: Record<string, unknown>, rewrite: <T>(value: T) => T, keep: readonly string[]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [column, value] of Object.entries(row)) {
    out[column] = value !== null && typeof value === 'object' && !(value instanceof Date) && !keep.includes(column) ? rewrite(value) : value;
  }
  return out;
}
