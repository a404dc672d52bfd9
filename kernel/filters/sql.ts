/**
 * Compiles a parsed filter to a PostgreSQL predicate. Every field is first mapped to an expression of
 * type jsonb (a jsonb column path, or `to_jsonb(column)`), so one set of rules serves columns and JSON
 * payloads alike, with JSON types respected: 5 never equals "5", and a missing field matches `ne`.
 */
import type { Knex } from 'knex';
import { timestampProblem, parseTimestamp } from '../dates.js';
import { RequestValidationError } from '../errors.js';
import { regexOf, type Condition, type FilterNode, type Group, type ParsedFilter } from './filter.js';

/**
 * Maps a filter field to SQL: a jsonb expression, or a timestamptz column (compared as instants, with
 * ISO 8601 strings as operands). Undefined when the field is unknown.
 */
export type FieldResolver = (field: string) => { expr: string; kind: 'jsonb' | 'timestamp' } | undefined;

/**
 * `metadata.a.b` → `"metadata" #> '{a,b}'` for a jsonb column named in `jsonRoots`; plain columns by name,
 * as jsonb (`to_jsonb(col)`) or, for `timestamps`, as instants.
 */
export function columnFieldResolver(options: {
  columns: readonly string[];
  timestamps?: readonly string[];
  jsonRoots: readonly string[];
}): FieldResolver {
  return (field) => {
    if (options.timestamps?.includes(field)) return { expr: `"${field}"`, kind: 'timestamp' };
    if (options.columns.includes(field)) return { expr: `to_jsonb("${field}")`, kind: 'jsonb' };
    const [root, ...rest] = field.split('.');
    if (root && options.jsonRoots.includes(root)) {
      return { expr: rest.length === 0 ? `"${root}"` : `("${root}" #> '{${rest.join(',')}}')`, kind: 'jsonb' };
    }
    return undefined;
  };
}

interface Sql {
  text: string;
  bindings: unknown[];
}

export function filterToSql(filter: ParsedFilter, resolve: FieldResolver): Sql | undefined {
  const bindings: unknown[] = [];
  const bind = (value: unknown) => {
    bindings.push(value);
    return '?';
  };
  const ci = !filter.caseSensitive;

  const timestamp = (col: string, c: Condition): string => {
    const ops: Partial<Record<Condition['operator'], string>> = { eq: '=', ne: '<>', gt: '>', gte: '>=', lt: '<', lte: '<=' };
    if (c.operator === 'exists') return c.value === false ? `(${col} is null)` : `(${col} is not null)`;
    const op = ops[c.operator];
    const problem = timestampProblem(c.value);
    if (!op || problem !== undefined) {
      const why = op ? `: the value ${problem}` : '';
      throw new RequestValidationError([
        { loc: ['body', 'filters'], msg: `'${c.field}' is a timestamp: use eq, ne, gt, gte, lt, lte or exists with an RFC 3339 date-time${why}`, type: 'filter_value' },
      ]);
    }
    // The instant as JavaScript read it, so PostgreSQL never parses the client's own text.
    return `(${col} ${op} ${bind(parseTimestamp(c.value as string, ['body', 'filters']).toISOString())}::timestamptz)`;
  };

  const condition = (c: Condition): string => {
    const field = resolve(c.field);
    if (!field) {
      throw new RequestValidationError([{ loc: ['body', 'filters'], msg: `unknown filter field '${c.field}'`, type: 'filter_field' }]);
    }
    if (field.kind === 'timestamp') return timestamp(field.expr, c);
    const e = field.expr;
    const txt = `(${e} #>> '{}')`;
    const str = (s: string) => (ci ? `lower(${s})` : s);
    const isString = `jsonb_typeof(${e}) = 'string'`;
    const equals = (v: unknown): string => {
      if (v === null) return `(${e} is null or ${e} = 'null'::jsonb)`;
      if (typeof v === 'string') return `(${isString} and ${str(txt)} = ${str(bind(v))})`;
      if (typeof v === 'number') return `(jsonb_typeof(${e}) = 'number' and (${txt})::numeric = ${bind(v)})`;
      return `(${e} = to_jsonb(${bind(v)}::boolean))`;
    };
    const ordered = (op: string, v: unknown): string => {
      if (typeof v === 'number') return `(jsonb_typeof(${e}) = 'number' and (${txt})::numeric ${op} ${bind(v)})`;
      if (typeof v === 'string') return `(${isString} and ${txt} ${op} ${bind(v)})`;
      return 'false';
    };
    switch (c.operator) {
      case 'eq': return equals(c.value);
      case 'ne': return `coalesce(not ${equals(c.value)}, true)`;
      case 'gt': return ordered('>', c.value);
      case 'gte': return ordered('>=', c.value);
      case 'lt': return ordered('<', c.value);
      case 'lte': return ordered('<=', c.value);
      case 'in': return `(${(c.value as unknown[]).map(equals).join(' or ')})`;
      case 'nin': return `coalesce(not (${(c.value as unknown[]).map(equals).join(' or ')}), true)`;
      case 'contains': {
        // An array contains the value as an element (strings compared ignoring case unless case_sensitive);
        // a string contains it as a substring.
        const element =
          typeof c.value === 'string' && ci
            ? `exists (select 1 from jsonb_array_elements(${e}) as el where jsonb_typeof(el) = 'string' and lower(el #>> '{}') = lower(${bind(c.value)}))`
            : `${e} @> ${bind(JSON.stringify([c.value]))}::jsonb`;
        return `((jsonb_typeof(${e}) = 'array' and ${element}) or (${isString} and strpos(${str(txt)}, ${str(bind(c.value))}) > 0))`;
      }
      case 'starts_with': return `(${isString} and left(${str(txt)}, length(${bind(c.value)})) = ${str(bind(c.value))})`;
      case 'ends_with': return `(${isString} and right(${str(txt)}, length(${bind(c.value)})) = ${str(bind(c.value))})`;
      case 'exists': return c.value === false ? `(${e} is null or ${e} = 'null'::jsonb)` : `(${e} is not null and ${e} <> 'null'::jsonb)`;
      // Always `~`: case folding is already written into the pattern (regex.ts), the same as in process.
      case 'regex': return `(${isString} and ${txt} ~ ${bind(regexOf(c, filter.caseSensitive).postgres)})`;
    }
  };

  const node = (n: FilterNode): string | undefined => (n.kind === 'condition' ? condition(n) : group(n));
  const group = (g: Group): string | undefined => {
    const parts: string[] = [];
    const and = g.and.map(node).filter((s): s is string => Boolean(s));
    parts.push(...and);
    const or = g.or.map(node).filter((s): s is string => Boolean(s));
    if (or.length > 0) parts.push(`(${or.join(' or ')})`);
    for (const n of g.not.map(node).filter((s): s is string => Boolean(s))) parts.push(`coalesce(not ${n}, true)`);
    return parts.length === 0 ? undefined : `(${parts.join(' and ')})`;
  };

  const text = group(filter.root);
  return text ? { text, bindings } : undefined;
}

/** Adds the filter to a knex query (no-op for an empty filter). */
export function whereFilter<Q extends Knex.QueryBuilder>(query: Q, filter: ParsedFilter | undefined, resolve: FieldResolver): Q {
  if (!filter) return query;
  const sql = filterToSql(filter, resolve);
  if (sql) query.whereRaw(sql.text, sql.bindings as Knex.RawBinding[]);
  return query;
}
