/**
 * Checks of a request body that must run before anything walks it: its nesting depth (on the raw bytes,
 * before JSON.parse) and text the database cannot store. Both are iterative, so no input reaches the
 * stack limit here.
 */
import { RequestValidationError, UnsupportedMediaTypeError, type FieldProblem } from '../errors.js';

const UNSTORABLE = /\u0000|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

/** An array or object being walked: its children, the next one to check, and where it sits. */
interface Frame {
  /** Object keys; none for an array (its keys are the indexes). */
  keys: string[] | undefined;
  values: unknown[];
  next: number;
  parent: Frame | undefined;
  /** Its key in the parent. */
  key: string | number | undefined;
}

/** The location of `frame`'s child `last` below `root`. */
function locationOf(frame: Frame, root: Array<string | number>, last: string | number): Array<string | number> {
  const keys: Array<string | number> = [last];
  for (let at: Frame | undefined = frame; at?.parent !== undefined; at = at.parent) keys.push(at.key!);
  return [...root, ...keys.reverse()];
}

/**
 * The first string (or object key) in `value`, in document order, that the database could not store, as a
 * 422 problem. Iterative: a request body is at most MAX_JSON_DEPTH deep, but nothing here should rely on
 * that. Numbers and other scalars (most of a query vector's body) cost one type check each, and a location
 * is spelled out only for a problem.
 */
export function unstorableText(value: unknown, loc: Array<string | number>): FieldProblem | undefined {
  const problem = (at: Array<string | number>): FieldProblem => ({
    loc: at,
    msg: 'must not contain NUL characters or unpaired surrogates',
    type: 'string_unstorable',
  });
  if (typeof value === 'string') return UNSTORABLE.test(value) ? problem(loc) : undefined;
  if (value === null || typeof value !== 'object') return undefined;
  const open = (container: object, parent: Frame | undefined, key: string | number | undefined): Frame | FieldProblem => {
    if (Array.isArray(container)) return { keys: undefined, values: container, next: 0, parent, key };
    const frame: Frame = { keys: [], values: [], next: 0, parent, key };
    for (const [name, child] of Object.entries(container)) {
      if (UNSTORABLE.test(name)) return problem(parent === undefined ? [...loc, name] : locationOf(parent, loc, key!).concat(name));
      frame.keys!.push(name);
      frame.values.push(child);
    }
    return frame;
  };
  const root = open(value, undefined, undefined);
  if (!('next' in root)) return root;
  const stack: Frame[] = [root];
  while (stack.length > 0) {
    const frame = stack[stack.length - 1]!;
    if (frame.next >= frame.values.length) {
      stack.pop();
      continue;
    }
    const at = frame.next++;
    const child = frame.values[at];
    if (typeof child === 'string') {
      if (UNSTORABLE.test(child)) return problem(locationOf(frame, loc, frame.keys?.[at] ?? at));
    } else if (child !== null && typeof child === 'object') {
      const opened = open(child, frame, frame.keys?.[at] ?? at);
      if (!('next' in opened)) return opened;
      stack.push(opened);
    }
  }
  return undefined;
}

/**
 * True when a JSON text has no `\u` escape. U+0000 and lone surrogates can only reach a parsed body
 * through one: JSON forbids raw control characters in strings, and UTF-8 cannot encode a lone surrogate
 * (the decoder turns invalid bytes into U+FFFD). An escaped backslash before a `u` also counts (harmless:
 * that body is walked as any other).
 */
export function withoutUnicodeEscapes(body: Buffer): boolean {
  return body.indexOf('\\u') < 0;
}

/**
 * At most MAX_JSON_DEPTH `[` and `{` bytes (strings included) cannot nest deeper: most bodies (a query
 * vector's thousands of digits, say) are settled by a native byte search instead of a loop over every byte.
 */
function fewOpenings(body: Buffer): boolean {
  let count = 0;
  for (const opening of [0x5b, 0x7b]) {
    for (let at = body.indexOf(opening); at >= 0; at = body.indexOf(opening, at + 1)) {
      if (++count > MAX_JSON_DEPTH) return false;
    }
  }
  return true;
}

/** Deepest nesting of arrays and objects a JSON body may have: far beyond any request, far below any stack. */
export const MAX_JSON_DEPTH = 64;

/**
 * Runs from express.json's `verify`, on the raw bytes before JSON.parse, so no recursive walk (validation,
 * storage, JSON.stringify) ever meets a deeper body. A byte scan is exact for UTF-8, the only charset
 * JSON may be exchanged in (RFC 8259); other charsets are refused.
 */
export function refuseDeepJson(body: Buffer, encoding: string): void {
  if (encoding.toLowerCase().replace('-', '') !== 'utf8') {
    throw new UnsupportedMediaTypeError('JSON request bodies must be UTF-8');
  }
  if (fewOpenings(body)) return;
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
