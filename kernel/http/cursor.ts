/**
 * Opaque pagination cursors: the position of the last row of a page (its sort value and id), as
 * base64url JSON. A cursor that does not decode to what the listing expects is a 400.
 */
import { InputError } from '../errors.js';

export function encodeCursor(position: object): string {
  return Buffer.from(JSON.stringify(position)).toString('base64url');
}

export function decodeCursor<T>(raw: string, accepts: (value: Record<string, unknown>) => boolean): T {
  try {
    const value = JSON.parse(Buffer.from(raw, 'base64url').toString('utf8')) as unknown;
    if (value && typeof value === 'object' && accepts(value as Record<string, unknown>)) return value as T;
  } catch {
    // not base64url JSON: refused below
  }
  throw new InputError('cursor is not a next_cursor this listing returned (with the same sort)', { cursor: raw });
}
