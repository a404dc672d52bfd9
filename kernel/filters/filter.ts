/**
 * The filter language shared by object listings, collection sources and (later) retriever stages:
 * `{AND: [...], OR: [...], NOT: [...], case_sensitive}` where each item is a condition
 * `{field, operator, value}` or a nested group. One parser checks it; each engine compiles the checked
 * tree to its own predicate language (SQL here; Lance SQL and Milvus expressions later).
 */
import { RequestValidationError, type FieldProblem } from '../errors.js';
import { compileUserRegex, UnsupportedPatternError, type UserRegex } from './regex.js';

export const FILTER_OPERATORS = [
  'eq', 'ne', 'gt', 'gte', 'lt', 'lte', 'in', 'nin', 'contains', 'starts_with', 'ends_with', 'exists', 'regex',
] as const;
export type FilterOperator = (typeof FILTER_OPERATORS)[number];

export type FilterValue = string | number | boolean | null | Array<string | number | boolean | null>;

export interface Condition {
  kind: 'condition';
  field: string;
  operator: FilterOperator;
  value: FilterValue;
  /** For `regex`: the checked pattern, compiled for every engine (see regex.ts). */
  regex?: UserRegex;
}

export interface Group {
  kind: 'group';
  and: FilterNode[];
  or: FilterNode[];
  not: FilterNode[];
}

export type FilterNode = Condition | Group;

export interface ParsedFilter {
  root: Group;
  caseSensitive: boolean;
}

/** The request shape: what clients send. */
export interface FilterInput {
  AND?: unknown[];
  OR?: unknown[];
  NOT?: unknown[];
  case_sensitive?: boolean;
}

const FIELD = /^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z0-9_]+)*$/;
const MAX_DEPTH = 8;
const MAX_CONDITIONS = 200;
/**
 * `in`/`nin` values across the whole filter: each is a bound parameter of the statement, and 200 lists of
 * 1,000 passed PostgreSQL's 65,535 parameters (a 500) after seconds of building the SQL.
 */
const MAX_LIST_VALUES = 10_000;
/** `regex` conditions in one filter: each distinct pattern is compiled by the database (up to ~20 ms each). */
const MAX_REGEX_CONDITIONS = 16;

/** Validates and normalizes a filter; problems are reported as 422 with their location. */
export function parseFilter(input: unknown, loc: Array<string | number> = ['body', 'filters']): ParsedFilter {
  const problems: FieldProblem[] = [];
  let count = 0;
  let listValues = 0;
  let regexes = 0;
  const caseSensitive = typeof input === 'object' && input !== null && (input as FilterInput).case_sensitive === true;

  const group = (value: unknown, at: Array<string | number>, depth: number): Group => {
    const out: Group = { kind: 'group', and: [], or: [], not: [] };
    if (typeof value !== 'object' || value === null || Array.isArray(value)) {
      problems.push({ loc: at, msg: 'must be an object with AND, OR or NOT lists', type: 'filter_group' });
      return out;
    }
    if (depth > MAX_DEPTH) {
      problems.push({ loc: at, msg: `filters nest at most ${MAX_DEPTH} levels`, type: 'filter_depth' });
      return out;
    }
    for (const [key, list] of Object.entries(value)) {
      if (key === 'case_sensitive') continue;
      const target = key === 'AND' ? out.and : key === 'OR' ? out.or : key === 'NOT' ? out.not : undefined;
      if (!target) {
        problems.push({ loc: [...at, key], msg: 'unknown key (expected AND, OR, NOT, case_sensitive)', type: 'filter_key' });
        continue;
      }
      if (!Array.isArray(list)) {
        problems.push({ loc: [...at, key], msg: 'must be a list', type: 'filter_list' });
        continue;
      }
      list.forEach((item, i) => target.push(node(item, [...at, key, i], depth + 1)));
    }
    return out;
  };

  const node = (value: unknown, at: Array<string | number>, depth: number): FilterNode => {
    if (typeof value === 'object' && value !== null && !Array.isArray(value) && 'field' in value) {
      return condition(value as Record<string, unknown>, at);
    }
    return group(value, at, depth);
  };

  const condition = (value: Record<string, unknown>, at: Array<string | number>): Condition => {
    count += 1;
    const { field, operator = 'eq', value: operand } = value;
    const extra = Object.keys(value).filter((k) => !['field', 'operator', 'value'].includes(k));
    if (extra.length > 0) problems.push({ loc: [...at, extra[0]!], msg: 'unknown key in condition', type: 'filter_key' });
    if (typeof field !== 'string' || !FIELD.test(field) || field.length > 200) {
      problems.push({ loc: [...at, 'field'], msg: 'must be a field path like "metadata.category"', type: 'filter_field' });
    }
    if (typeof operator !== 'string' || !(FILTER_OPERATORS as readonly string[]).includes(operator)) {
      problems.push({ loc: [...at, 'operator'], msg: `must be one of ${FILTER_OPERATORS.join(', ')}`, type: 'filter_operator' });
    }
    const op = operator as FilterOperator;
    let regex: UserRegex | undefined;
    const scalar = (v: unknown) => v === null || ['string', 'number', 'boolean'].includes(typeof v);
    if (op === 'in' || op === 'nin') {
      if (!Array.isArray(operand) || operand.length === 0 || operand.length > 1000 || !operand.every(scalar)) {
        problems.push({ loc: [...at, 'value'], msg: 'must be a non-empty list of at most 1000 scalars', type: 'filter_value' });
      } else {
        listValues += operand.length;
      }
    } else if (op === 'exists') {
      if (operand !== undefined && typeof operand !== 'boolean') {
        problems.push({ loc: [...at, 'value'], msg: 'must be true or false', type: 'filter_value' });
      }
    } else if (['contains', 'starts_with', 'ends_with', 'regex'].includes(op)) {
      if (typeof operand !== 'string') problems.push({ loc: [...at, 'value'], msg: 'must be a string', type: 'filter_value' });
      if (op === 'regex' && typeof operand === 'string') {
        regexes += 1;
        try {
          regex = compileUserRegex(operand, caseSensitive);
        } catch (err) {
          if (!(err instanceof UnsupportedPatternError)) throw err;
          problems.push({ loc: [...at, 'value'], msg: `pattern ${err.message}`, type: 'filter_regex' });
        }
      }
    } else if (!scalar(operand)) {
      problems.push({ loc: [...at, 'value'], msg: 'must be a string, number, boolean or null', type: 'filter_value' });
    }
    const checked = (operand ?? (op === 'exists' ? true : null)) as FilterValue;
    return { kind: 'condition', field: String(field), operator: op, value: checked, ...(regex ? { regex } : {}) };
  };

  const root = group(input ?? {}, loc, 0);
  if (count > MAX_CONDITIONS) problems.push({ loc, msg: `at most ${MAX_CONDITIONS} conditions`, type: 'filter_size' });
  if (listValues > MAX_LIST_VALUES) {
    problems.push({ loc, msg: `at most ${MAX_LIST_VALUES} in/nin values in all (this filter has ${listValues}): merge lists on the same field, or filter in steps`, type: 'filter_size' });
  }
  if (regexes > MAX_REGEX_CONDITIONS) {
    problems.push({ loc, msg: `at most ${MAX_REGEX_CONDITIONS} regex conditions (this filter has ${regexes}): join alternatives into one pattern with |`, type: 'filter_size' });
  }
  if (problems.length > 0) throw new RequestValidationError(problems);
  return { root, caseSensitive };
}

/** The value at a dotted path (`a.b.c`) of a plain object, or undefined when any step is missing. */
export function readDotted(record: Record<string, unknown>, path: string): unknown {
  return path.split('.').reduce<unknown>((v, k) => (v && typeof v === 'object' ? (v as Record<string, unknown>)[k] : undefined), record);
}

/** Evaluates a filter against a plain object (documents in memory, event payloads). */
export function matchesFilter(filter: ParsedFilter, record: Record<string, unknown>): boolean {
  const read = (path: string): unknown => readDotted(record, path);
  const fold = (v: unknown) => (!filter.caseSensitive && typeof v === 'string' ? v.toLowerCase() : v);
  const test = (c: Condition): boolean => {
    const actual = read(c.field);
    // A missing field is null, as in SQL and Lance: `eq`/`in` with null match it, `ne`/`nin` with null do not.
    const a = fold(actual === undefined ? null : actual);
    const v = Array.isArray(c.value) ? c.value.map(fold) : fold(c.value);
    switch (c.operator) {
      case 'eq': return a === v;
      case 'ne': return a !== v;
      case 'gt': return compare(a, v) > 0;
      case 'gte': return compare(a, v) >= 0;
      case 'lt': return compare(a, v) < 0;
      case 'lte': return compare(a, v) <= 0;
      case 'in': return (v as unknown[]).includes(a);
      case 'nin': return !(v as unknown[]).includes(a);
      case 'contains': return Array.isArray(actual) ? actual.map(fold).includes(v) : typeof a === 'string' && a.includes(String(v));
      case 'starts_with': return typeof a === 'string' && a.startsWith(String(v));
      case 'ends_with': return typeof a === 'string' && a.endsWith(String(v));
      case 'exists': return (actual !== undefined && actual !== null) === (c.value !== false);
      case 'regex': return typeof actual === 'string' && regexOf(c, filter.caseSensitive).test(actual);
    }
  };
  const evalNode = (n: FilterNode): boolean => (n.kind === 'condition' ? test(n) : evalGroup(n));
  const evalGroup = (g: Group): boolean =>
    g.and.every(evalNode) && (g.or.length === 0 || g.or.some(evalNode)) && !g.not.some(evalNode);
  return evalGroup(filter.root);
}

function compare(a: unknown, b: unknown): number {
  if (typeof a === 'number' && typeof b === 'number') return a - b;
  if (typeof a === 'string' && typeof b === 'string') return a < b ? -1 : a > b ? 1 : 0;
  return Number.NaN;
}

/** The condition's compiled pattern (parseFilter compiles it; a hand-built tree gets it here). */
export function regexOf(c: Condition, caseSensitive: boolean): UserRegex {
  if (c.regex && c.regex.caseSensitive === caseSensitive) return c.regex;
  try {
    return compileUserRegex(String(c.value), caseSensitive);
  } catch (err) {
    if (!(err instanceof UnsupportedPatternError)) throw err;
    throw new RequestValidationError([{ loc: ['body', 'filters'], msg: `pattern ${err.message}`, type: 'filter_regex' }]);
  }
}
