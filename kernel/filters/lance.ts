/**
 * Compiles a parsed filter to Lance SQL (DataFusion) over a JSON payload column (Lance's `lance.json`
 * type, written from an `arrow.json` string column). Semantics follow sql.ts: JSON types are respected
 * (5 never equals "5"), strings compare case-insensitively unless `case_sensitive`, ordering on
 * strings is always case-sensitive, and a missing field matches `ne` / `nin`.
 *
 * Lance's parser has no CASE and its json_get_* functions fail on values of another type, so every
 * test reads the value's JSON text (`json_extract`) and decides on that text: strings are compared in
 * their JSON encoding (`"abc"`), numbers through `try_cast(... AS DOUBLE)` (null for anything else).
 * Every condition is wrapped so it is never NULL, which makes NOT behave as in two-valued logic.
 *
 * Known differences from sql.ts, all around JSON escapes: a string holding `"`, `\` or control
 * characters is compared in its escaped form, so `contains` / `starts_with` of such characters, and
 * `lt`/`gt` of strings that differ only after one, can disagree; `contains` on arrays also matches a
 * string nested deeper inside the array. Path segments are object keys only (no array indexes).
 */
import { RequestValidationError } from '../errors.js';
import type { Condition, FilterNode, Group, ParsedFilter } from './filter.js';

const FIELD = /^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z0-9_]+)*$/;

/** A SQL string literal: quotes doubled (Lance/DataFusion literals have no backslash escapes). */
export function lanceString(value: string): string {
  return `'${value.replace(/'/g, "''")}'`;
}

function lanceNumber(value: number): string {
  if (!Number.isFinite(value)) throw invalid('numbers in filters must be finite');
  return `CAST(${lanceString(String(value))} AS DOUBLE)`;
}

function invalid(msg: string): RequestValidationError {
  return new RequestValidationError([{ loc: ['body', 'filters'], msg, type: 'filter_value' }]);
}

/** `column` is the JSON column holding the payload; filter fields are paths inside it. */
export function filterToLance(filter: ParsedFilter, column = 'payload'): string | undefined {
  if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(column)) throw new Error(`invalid column name '${column}'`);
  const ci = !filter.caseSensitive;
  const fold = (sql: string) => (ci ? `lower(${sql})` : sql);

  const condition = (c: Condition): string => {
    if (!FIELD.test(c.field)) {
      throw new RequestValidationError([{ loc: ['body', 'filters'], msg: `unknown filter field '${c.field}'`, type: 'filter_field' }]);
    }
    const path = `$.${c.field}`;
    const j = `json_extract(${column}, ${lanceString(path)})`;
    const isString = `starts_with(${j}, '"')`;
    const num = `try_cast(${j} AS DOUBLE)`;
    /** The JSON encoding of a string without its quotes: what sits between the quotes in `j`. */
    const inner = (v: unknown) => JSON.stringify(String(v)).slice(1, -1);
    const equals = (v: unknown): string => {
      if (v === null) return `(${j} IS NULL OR ${j} = 'null')`;
      if (typeof v === 'string') return `(${fold(j)} = ${fold(lanceString(JSON.stringify(v)))})`;
      if (typeof v === 'number') return `(${num} = ${lanceNumber(v)})`;
      return `(${j} = ${v ? "'true'" : "'false'"})`;
    };
    const ordered = (op: string, v: unknown): string => {
      if (typeof v === 'number') return `(${num} ${op} ${lanceNumber(v)})`;
      if (typeof v === 'string') return `(${isString} AND ${j} ${op} ${lanceString(JSON.stringify(v))})`;
      return 'false';
    };
    const sure = (sql: string) => `coalesce(${sql}, false)`;
    switch (c.operator) {
      case 'eq': return sure(equals(c.value));
      case 'ne': return `(NOT ${sure(equals(c.value))})`;
      case 'gt': return sure(ordered('>', c.value));
      case 'gte': return sure(ordered('>=', c.value));
      case 'lt': return sure(ordered('<', c.value));
      case 'lte': return sure(ordered('<=', c.value));
      case 'in': return sure(`(${(c.value as unknown[]).map(equals).join(' OR ')})`);
      case 'nin': return `(NOT ${sure(`(${(c.value as unknown[]).map(equals).join(' OR ')})`)})`;
      case 'contains':
        return sure(
          `((${isString} AND strpos(${fold(j)}, ${fold(lanceString(inner(c.value)))}) > 0)` +
            ` OR (starts_with(${j}, '[') AND strpos(${fold(j)}, ${fold(lanceString(JSON.stringify(String(c.value))))}) > 0))`,
        );
      case 'starts_with': return sure(`(${isString} AND starts_with(${fold(j)}, ${fold(lanceString(`"${inner(c.value)}`))}))`);
      case 'ends_with': return sure(`(${isString} AND ends_with(${fold(j)}, ${fold(lanceString(`${inner(c.value)}"`))}))`);
      case 'exists':
        return c.value === false ? sure(`(${j} IS NULL OR ${j} = 'null')`) : sure(`(${j} IS NOT NULL AND ${j} <> 'null')`);
      case 'regex':
        // Lance has no regex operator we can rely on across versions; refuse rather than approximate.
        throw invalid("the 'regex' operator is not supported by the LanceDB vector engine");
    }
  };

  const node = (n: FilterNode): string | undefined => (n.kind === 'condition' ? condition(n) : group(n));
  const group = (g: Group): string | undefined => {
    const parts = g.and.map(node).filter((s): s is string => Boolean(s));
    const or = g.or.map(node).filter((s): s is string => Boolean(s));
    if (or.length > 0) parts.push(`(${or.join(' OR ')})`);
    for (const n of g.not.map(node).filter((s): s is string => Boolean(s))) parts.push(`(NOT ${n})`);
    return parts.length === 0 ? undefined : `(${parts.join(' AND ')})`;
  };
  return group(filter.root);
}
