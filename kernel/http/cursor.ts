/**
 * Opaque pagination cursors: the position of the last row of a page (its sort value and id), as
 * base64url JSON. A cursor is client input like any other: decoding checks every field against the
 * listing's spec (type, range, id shape) before any of it reaches SQL, and anything else is a 400.
 */
import { isTimestamp } from '../dates.js';
import { InputError } from '../errors.js';

/** What one cursor field holds. */
export type CursorField =
  /** A text value (a sort key), at most 4,096 characters. */
  | { kind: 'text' }
  /** An RFC 3339 instant, as the listing wrote it with toISOString(). */
  | { kind: 'timestamp' }
  /** A safe integer; `orDigits` also takes its decimal text (bigint columns some drivers return as text). */
  | { kind: 'integer'; min?: number; orDigits?: boolean }
  /** An id made by newId(prefix). */
  | { kind: 'id'; prefix: string }
  /** One of a fixed set of strings (the sort field and direction a cursor was made for). */
  | { kind: 'literal'; value: string };

type FieldValue<F extends CursorField> = F extends { kind: 'integer'; orDigits: true }
  ? number | string
  : F extends { kind: 'integer' }
    ? number
    : string;

export type CursorSpec = Record<string, CursorField>;
export type CursorOf<S extends CursorSpec> = { [K in keyof S]: FieldValue<S[K]> };

/** Field builders, typed precisely so a decoded cursor's fields have their real types. */
export const cursorFields = {
  text: () => ({ kind: 'text' }) as const,
  timestamp: () => ({ kind: 'timestamp' }) as const,
  integer: (min = 0) => ({ kind: 'integer', min }) as const,
  bigint: () => ({ kind: 'integer', min: 0, orDigits: true }) as const,
  id: (prefix: string) => ({ kind: 'id', prefix }) as const,
  literal: (value: string) => ({ kind: 'literal', value }) as const,
};

const MAX_TEXT = 4096;
const MAX_RAW = 8192;

export function encodeCursor(position: object): string {
  return Buffer.from(JSON.stringify(position)).toString('base64url');
}

function fits(field: CursorField, value: unknown): boolean {
  switch (field.kind) {
    case 'text':
      return typeof value === 'string' && value.length <= MAX_TEXT && !/\u0000/.test(value);
    case 'timestamp':
      return typeof value === 'string' && isTimestamp(value);
    case 'integer': {
      const n = field.orDigits && typeof value === 'string' && /^\d{1,15}$/.test(value) ? Number(value) : value;
      return typeof n === 'number' && Number.isSafeInteger(n) && n >= (field.min ?? Number.MIN_SAFE_INTEGER);
    }
    case 'id':
      return typeof value === 'string' && value.length <= 100 && value.startsWith(`${field.prefix}_`) && /^[A-Za-z0-9_]+$/.test(value);
    case 'literal':
      return value === field.value;
  }
}

/**
 * The position a cursor holds, every field checked against `spec`; exactly the spec's fields. A cursor
 * this listing did not write (another listing's, another sort's, forged) is a 400.
 */
export function decodeCursor<S extends CursorSpec>(raw: string, spec: S): CursorOf<S> {
  const refuse = () => new InputError('cursor is not a next_cursor this listing returned (with the same sort)', { cursor: raw.slice(0, 200) });
  if (typeof raw !== 'string' || raw.length > MAX_RAW || !/^[A-Za-z0-9_-]*$/.test(raw)) throw refuse();
  let value: unknown;
  try {
    value = JSON.parse(Buffer.from(raw, 'base64url').toString('utf8'));
  } catch {
    throw refuse();
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw refuse();
  const record = value as Record<string, unknown>;
  const names = Object.keys(spec);
  if (Object.keys(record).length !== names.length) throw refuse();
  for (const name of names) {
    if (!Object.hasOwn(record, name) || !fits(spec[name]!, record[name])) throw refuse();
  }
  return record as CursorOf<S>;
}
