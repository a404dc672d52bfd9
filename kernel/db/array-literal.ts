/**
 * PostgreSQL array literals for query parameters, made by the thread that sends the query. PGlite makes them
 * itself from JavaScript arrays, but in the embedded database's thread, the busiest of a batch: its array
 * serializer was a quarter of what that thread allocated while writing 10,000 documents (a text, a key, an
 * id... per row of every multi-row write). A parameter that is already a string passes through PGlite as is.
 *
 * The form is node-postgres's (each element quoted and escaped, `NULL` for null), so both databases read the
 * same literal. Only arrays of strings, finite numbers, booleans and nulls (nested or not) are converted;
 * anything else is left to PGlite's own serializers.
 */
export function arrayLiteral(values: readonly unknown[]): string | undefined {
  let out = '{';
  for (let i = 0; i < values.length; i++) {
    if (i > 0) out += ',';
    const value = values[i];
    if (value === null || value === undefined) out += 'NULL';
    else if (typeof value === 'string') out += quoted(value);
    else if ((typeof value === 'number' && Number.isFinite(value)) || typeof value === 'boolean') out += `"${String(value)}"`;
    else if (Array.isArray(value)) {
      const inner = arrayLiteral(value);
      if (inner === undefined) return undefined;
      out += inner;
    } else return undefined;
  }
  return `${out}}`;
}

/** The parameters with their convertible arrays as literals (the same array when none is). */
export function withArrayLiterals(params: readonly unknown[] | undefined): unknown[] | undefined {
  if (!params) return undefined;
  let out: unknown[] | undefined;
  for (let i = 0; i < params.length; i++) {
    const param = params[i];
    if (!Array.isArray(param)) continue;
    const literal = arrayLiteral(param);
    if (literal === undefined) continue;
    out ??= [...params];
    out[i] = literal;
  }
  return out ?? (params as unknown[]);
}

const NEEDS_ESCAPE = /["\\]/;

function quoted(value: string): string {
  return NEEDS_ESCAPE.test(value) ? `"${value.replace(/[\\"]/g, '\\$&')}"` : `"${value}"`;
}
