/**
 * Rows looked up by a list of ids, found through the primary key whatever the planner believes.
 *
 * "id = any($ids) and organization_id = $1 and collection_id = $2" lets the planner choose: the primary key,
 * or the indexes on the other columns combined. When its statistics are older than the table's growth (a
 * bulk load seconds before the next ANALYZE; the embedded database has no autovacuum), each equality looks
 * as rare as in an empty table, and it combines the other indexes: ten documents by id read the whole
 * collection (20,000 rows filtered, 3 ms instead of 0.1 ms, growing with the collection). Looking the ids up
 * first, in a materialized CTE the outer conditions cannot reach into, leaves the primary key as the only
 * way in; the other conditions then filter the rows found.
 */
import type { Knex } from 'knex';

const IDENTIFIER = /^[a-z_][a-z0-9_]*$/;

function checkIdentifiers(...names: readonly string[]): void {
  const bad = names.find((name) => !IDENTIFIER.test(name));
  if (bad !== undefined) throw new Error(`not a plain identifier: ${bad}`);
}

/**
 * SQL selecting `table`'s rows whose `idColumn` is in the array `idsParameter` (a placeholder such as
 * `$3::text[]` or `?::text[]`), as `by_id`: append `where ...` for the other conditions. `columns` (plain
 * names, every one the outer conditions use among them) narrows what is read: a wide row (an object's
 * inline text) is not copied to check that it exists.
 */
export function rowsByIdSql(table: string, idColumn: string, idsParameter: string, columns?: readonly string[]): string {
  checkIdentifiers(table, idColumn, ...(columns ?? []));
  const selected = columns ? columns.join(', ') : '*';
  return `with by_id as materialized (select ${selected} from ${table} where ${idColumn} = any(${idsParameter})) select * from by_id`;
}

/** The same as a knex query: `table`'s rows with these ids, to narrow with `.where(...)` and select from. */
export function rowsById<Row extends object>(db: Knex, table: string, idColumn: string, ids: readonly string[]): Knex.QueryBuilder<Row, Row[]> {
  checkIdentifiers(table, idColumn);
  return db
    .withMaterialized('by_id', (q) => q.from(table).whereRaw(`${idColumn} = any(?::text[])`, [[...ids] as unknown as Knex.RawBinding]))
    .from<Row, Row[]>('by_id');
}
