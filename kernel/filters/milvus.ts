/**
 * Compiles a parsed filter to a Milvus boolean expression over the two JSON fields the Milvus engine
 * (kernel/vectors/milvus.ts) writes for filtering:
 *
 * - `fields`: the payload with every `null` object value dropped. The filter language treats a null
 *   and a missing field alike (`eq null`, `exists false` match both), and Milvus's `exists` only sees
 *   keys, so dropping nulls makes one test (`exists`) answer both.
 * - `fields_ci`: the same with every string lower-cased. Milvus expressions have no `lower()`, so
 *   case-insensitive `eq` / `in` / `contains` / `starts_with` / `ends_with` read the folded copy and
 *   compare with a folded literal. Ordering (`gt`, `lt`, ...) on strings is always case-sensitive, as
 *   in sql.ts, so it reads `fields`.
 *
 * JSON types are respected as in sql.ts: Milvus compares a JSON value only with a literal of its own
 * type (a string "5" never equals 5). Every comparison is guarded by `exists`, so a missing field
 * makes it plainly false (never unknown, whatever logic the server applies to missing JSON keys), and
 * `ne` / `nin` / `NOT` are `not (...)` of the positive test, so a missing field matches them, as in sql.ts.
 *
 * Every literal goes through `milvusString` / `milvusNumber`, so a value can never end its literal and
 * add expression text of its own. Regex is refused (Milvus has no regular-expression operator).
 */
import { RequestValidationError } from '../errors.js';
import type { Condition, FilterNode, Group, ParsedFilter } from './filter.js';

const FIELD = /^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z0-9_]+)*$/;
/** The JSON field the engine stores exact values in, and its lower-cased twin. */
export const MILVUS_FILTER_FIELD = 'fields';
export const MILVUS_FOLDED_FIELD = 'fields_ci';
/** Always false: record ids are never empty (vector-index.ts refuses them). */
const NEVER = '(id == "")';

function invalid(msg: string, type = 'filter_value'): RequestValidationError {
  return new RequestValidationError([{ loc: ['body', 'filters'], msg, type }]);
}

/**
 * A double-quoted Milvus string literal. Milvus unquotes it like Go's strconv.Unquote, so backslash and
 * quote are escaped and every control or non-ASCII-printable character is written as `\uXXXX`. A lone
 * UTF-16 surrogate has no such escape (Go refuses it), so it is refused here as a 422.
 */
export function milvusString(value: string): string {
  let out = '"';
  for (let i = 0; i < value.length; i++) {
    const code = value.charCodeAt(i);
    const ch = value[i]!;
    if (code >= 0xd800 && code <= 0xdbff) {
      const low = value.charCodeAt(i + 1);
      if (!(low >= 0xdc00 && low <= 0xdfff)) throw invalid('strings in filters must be valid Unicode (lone surrogate)');
      out += ch + value[i + 1]!;
      i += 1;
    } else if (code >= 0xdc00 && code <= 0xdfff) {
      throw invalid('strings in filters must be valid Unicode (lone surrogate)');
    } else if (ch === '"' || ch === '\\') {
      out += `\\${ch}`;
    } else if (code < 0x20 || code === 0x7f) {
      out += `\\u${code.toString(16).padStart(4, '0')}`;
    } else {
      out += ch;
    }
  }
  return `${out}"`;
}

/** A number literal: always with a fraction or exponent, so Milvus compares integers and floats alike. */
export function milvusNumber(value: number): string {
  if (!Number.isFinite(value)) throw invalid('numbers in filters must be finite');
  const text = String(value);
  return /[.eE]/.test(text) ? text : `${text}.0`;
}

/** A LIKE pattern's literal part: `%`, `_` and `\` stand for themselves. */
function likeLiteral(value: string): string {
  return value.replace(/[\\%_]/g, (c) => `\\${c}`);
}

/** `fields["metadata"]["color"]` for `metadata.color`. */
export function milvusPath(column: string, field: string): string {
  if (!FIELD.test(field)) throw invalid(`unknown filter field '${field}'`, 'filter_field');
  return `${column}${field.split('.').map((key) => `[${milvusString(key)}]`).join('')}`;
}

/** The expression, or undefined for an empty filter (everything matches). */
export function filterToMilvus(filter: ParsedFilter): string | undefined {
  const ci = !filter.caseSensitive;
  const fold = (s: string) => (ci ? s.toLowerCase() : s);

  const condition = (c: Condition): string => {
    const exact = milvusPath(MILVUS_FILTER_FIELD, c.field);
    /** Where string equality and substring tests read: the folded copy unless case-sensitive. */
    const text = ci ? milvusPath(MILVUS_FOLDED_FIELD, c.field) : exact;
    const present = (test: string) => `(exists ${exact} and ${test})`;
    const equals = (v: unknown): string => {
      if (v === null) return `(not exists ${exact})`;
      if (typeof v === 'string') return present(`${text} == ${milvusString(fold(v))}`);
      if (typeof v === 'number') return present(`${exact} == ${milvusNumber(v)}`);
      if (typeof v === 'boolean') return present(`${exact} == ${v ? 'true' : 'false'}`);
      throw invalid('filter values must be strings, numbers, booleans or null');
    };
    const ordered = (op: string, v: unknown): string => {
      if (typeof v === 'number') return present(`${exact} ${op} ${milvusNumber(v)}`);
      if (typeof v === 'string') return present(`${exact} ${op} ${milvusString(v)}`);
      // Ordering against a boolean or null matches nothing (as matchesFilter). Written as a test on the
      // primary key, never empty, since a bare `false` is not a predicate Milvus accepts everywhere.
      return NEVER;
    };
    const like = (pattern: string) => `${text} like ${milvusString(pattern)}`;
    const anyOf = (values: unknown[]) => `(${values.map(equals).join(' or ')})`;
    switch (c.operator) {
      case 'eq': return equals(c.value);
      case 'ne': return `(not ${equals(c.value)})`;
      case 'gt': return ordered('>', c.value);
      case 'gte': return ordered('>=', c.value);
      case 'lt': return ordered('<', c.value);
      case 'lte': return ordered('<=', c.value);
      case 'in': return anyOf(c.value as unknown[]);
      case 'nin': return `(not ${anyOf(c.value as unknown[])})`;
      case 'contains': {
        const v = fold(String(c.value));
        // A substring of a string, or an element of an array: each test is false on the other type.
        return present(`(${like(`%${likeLiteral(v)}%`)} or json_contains(${text}, ${milvusString(v)}))`);
      }
      case 'starts_with': return present(like(`${likeLiteral(fold(String(c.value)))}%`));
      case 'ends_with': return present(like(`%${likeLiteral(fold(String(c.value)))}`));
      case 'exists': return c.value === false ? `(not exists ${exact})` : `(exists ${exact})`;
      case 'regex': throw invalid("the 'regex' operator is not supported by the Milvus vector engine");
    }
  };

  const node = (n: FilterNode): string | undefined => (n.kind === 'condition' ? condition(n) : group(n));
  const group = (g: Group): string | undefined => {
    const parts = g.and.map(node).filter((s): s is string => Boolean(s));
    const or = g.or.map(node).filter((s): s is string => Boolean(s));
    if (or.length > 0) parts.push(`(${or.join(' or ')})`);
    for (const n of g.not.map(node).filter((s): s is string => Boolean(s))) parts.push(`(not ${n})`);
    return parts.length === 0 ? undefined : `(${parts.join(' and ')})`;
  };
  return group(filter.root);
}

/**
 * The filterable copies of a payload: nulls dropped from objects (see above), and strings lower-cased
 * for the folded one. Arrays keep their elements (a null inside an array is kept).
 */
export function filterDocuments(payload: Record<string, unknown>): { exact: Record<string, unknown>; folded: Record<string, unknown> } {
  const strip = (value: unknown, lower: boolean): unknown => {
    if (typeof value === 'string') return lower ? value.toLowerCase() : value;
    if (Array.isArray(value)) return value.map((v) => strip(v, lower));
    if (value && typeof value === 'object') {
      const out: Record<string, unknown> = {};
      for (const [k, v] of Object.entries(value)) if (v !== null && v !== undefined) out[k] = strip(v, lower);
      return out;
    }
    return value;
  };
  return { exact: strip(payload, false) as Record<string, unknown>, folded: strip(payload, true) as Record<string, unknown> };
}
