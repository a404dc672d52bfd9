/**
 * Checks of a request body that must run before anything walks it: its nesting depth (on the raw bytes,
 * before JSON.parse) and text the database cannot store. Both are iterative, so no input reaches the
 * stack limit here.
 */
import type { Request, Response } from 'express';
import { RequestValidationError, UnsupportedMediaTypeError, type FieldProblem } from '../errors.js';

const UNSTORABLE = /\u0000|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

/**
 * The first string (or object key) in `value` that the database could not store, as a 422 problem.
 * Iterative: a request body is at most MAX_JSON_DEPTH deep, but nothing here should rely on that.
 */
export function unstorableText(value: unknown, loc: Array<string | number>): FieldProblem | undefined {
  const problem = (at: Array<string | number>): FieldProblem => ({
    loc: at,
    msg: 'must not contain NUL characters or unpaired surrogates',
    type: 'string_unstorable',
  });
  const pending: Array<{ value: unknown; loc: Array<string | number> }> = [{ value, loc }];
  while (pending.length > 0) {
    const item = pending.pop()!;
    if (typeof item.value === 'string') {
      if (UNSTORABLE.test(item.value)) return problem(item.loc);
    } else if (Array.isArray(item.value)) {
      for (let i = item.value.length - 1; i >= 0; i--) pending.push({ value: item.value[i], loc: [...item.loc, i] });
    } else if (item.value !== null && typeof item.value === 'object') {
      const entries = Object.entries(item.value);
      for (const [key] of entries) if (UNSTORABLE.test(key)) return problem([...item.loc, key]);
      for (let i = entries.length - 1; i >= 0; i--) pending.push({ value: entries[i]![1], loc: [...item.loc, entries[i]![0]] });
    }
  }
  return undefined;
}

/** Deepest nesting of arrays and objects a JSON body may have: far beyond any request, far below any stack. */
export const MAX_JSON_DEPTH = 64;

/**
 * express.json's `verify`: runs on the raw bytes before JSON.parse, so no recursive walk (validation,
 * storage, JSON.stringify) ever meets a deeper body. A byte scan is exact for UTF-8, the only charset
 * JSON may be exchanged in (RFC 8259); other charsets are refused.
 */
export function refuseDeepJson(_req: Request, _res: Response, body: Buffer, encoding: string): void {
  if (encoding.toLowerCase().replace('-', '') !== 'utf8') {
    throw new UnsupportedMediaTypeError('JSON request bodies must be UTF-8');
  }
  let depth = 0;
  let inString = false;
  for (let i = 0; i < body.length; i++) {
    const byte = body[i]!;
    if (inString) {
      if (byte === 0x5c) i++; // the escaped byte cannot end the string
      else if (byte === 0x22) inString = false;
    } else if (byte === 0x22) {
      inString = true;
    } else if (byte === 0x5b || byte === 0x7b) {
      depth++;
      if (depth > MAX_JSON_DEPTH) {
        throw new RequestValidationError([
          { loc: ['body'], msg: `JSON nests deeper than ${MAX_JSON_DEPTH} levels of arrays and objects`, type: 'json_too_deep' },
        ]);
      }
    } else if (byte === 0x5d || byte === 0x7d) {
      depth--;
    }
  }
}
