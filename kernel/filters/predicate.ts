/**
 * A filter compiled once into a plain predicate, for evaluating one filter over many records (the
 * in-process vector index checks every payload of an index). Same answers as `matchesFilter` (the
 * reference semantics, which it is tested against), about a hundred times faster over 100,000 records:
 * paths are split, operands folded to lower case and regexes compiled once, not once per record.
 */
import { regexOf, type Condition, type FilterNode, type Group, type ParsedFilter } from './filter.js';

export type RecordPredicate = (record: Record<string, unknown>) => boolean;

export function compileFilter(filter: ParsedFilter): RecordPredicate {
  const caseSensitive = filter.caseSensitive;
  const fold = (v: unknown): unknown => (!caseSensitive && typeof v === 'string' ? v.toLowerCase() : v);

  const reader = (path: string): ((record: Record<string, unknown>) => unknown) => {
    const keys = path.split('.');
    if (keys.length === 1) {
      const key = keys[0]!;
      return (record) => record[key];
    }
    return (record) => {
      let v: unknown = record;
      for (const key of keys) {
        if (!v || typeof v !== 'object') return undefined;
        v = (v as Record<string, unknown>)[key];
      }
      return v;
    };
  };

  const condition = (c: Condition): RecordPredicate => {
    const read = reader(c.field);
    const v = Array.isArray(c.value) ? c.value.map(fold) : fold(c.value);
    // A missing field is null, as in SQL and Lance (and matchesFilter).
    const value = (record: Record<string, unknown>) => { const a = read(record); return fold(a === undefined ? null : a); };
    switch (c.operator) {
      case 'eq':
        return (r) => value(r) === v;
      case 'ne':
        return (r) => value(r) !== v;
      case 'gt':
        return (r) => compare(value(r), v) > 0;
      case 'gte':
        return (r) => compare(value(r), v) >= 0;
      case 'lt':
        return (r) => compare(value(r), v) < 0;
      case 'lte':
        return (r) => compare(value(r), v) <= 0;
      case 'in': {
        const set = new Set(v as unknown[]);
        return (r) => set.has(value(r));
      }
      case 'nin': {
        const set = new Set(v as unknown[]);
        return (r) => !set.has(value(r));
      }
      case 'contains': {
        const needle = String(v);
        return (r) => {
          const actual = read(r);
          if (Array.isArray(actual)) return actual.some((item) => fold(item) === v);
          const a = fold(actual);
          return typeof a === 'string' && a.includes(needle);
        };
      }
      case 'starts_with': {
        const prefix = String(v);
        return (r) => { const a = value(r); return typeof a === 'string' && a.startsWith(prefix); };
      }
      case 'ends_with': {
        const suffix = String(v);
        return (r) => { const a = value(r); return typeof a === 'string' && a.endsWith(suffix); };
      }
      case 'exists': {
        const wanted = c.value !== false;
        return (r) => { const a = read(r); return (a !== undefined && a !== null) === wanted; };
      }
      case 'regex': {
        const regex = regexOf(c, caseSensitive);
        return (r) => { const a = read(r); return typeof a === 'string' && regex.test(a); };
      }
    }
  };

  const node = (n: FilterNode): RecordPredicate => (n.kind === 'condition' ? condition(n) : group(n));
  const group = (g: Group): RecordPredicate => {
    const and = g.and.map(node);
    const or = g.or.map(node);
    const not = g.not.map(node);
    return (r) => {
      for (const p of and) if (!p(r)) return false;
      if (or.length > 0) {
        let any = false;
        for (const p of or) if (p(r)) { any = true; break; }
        if (!any) return false;
      }
      for (const p of not) if (p(r)) return false;
      return true;
    };
  };
  return group(filter.root);
}

function compare(a: unknown, b: unknown): number {
  if (typeof a === 'number' && typeof b === 'number') return a - b;
  if (typeof a === 'string' && typeof b === 'string') return a < b ? -1 : a > b ? 1 : 0;
  return Number.NaN;
}
