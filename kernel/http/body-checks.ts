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

/** What a scalar (or, with `keys`, an object key) must not be: a 422 problem's message and type when it is. */
interface ValueRule {
  bad(value: unknown): boolean;
  keys: boolean;
  msg: string;
  type: string;
}

/** Text the database cannot store: NUL characters and unpaired surrogates, in strings and object keys. */
const UNSTORABLE_TEXT: ValueRule = {
  bad: (value) => typeof value === 'string' && UNSTORABLE.test(value),
  keys: true,
  msg: 'must not contain NUL characters or unpaired surrogates',
  type: 'string_unstorable',
};

/** JSON numbers past a double's range, which JSON.parse turns into ±Infinity (stored as null, silently). */
const NON_FINITE: ValueRule = {
  bad: (value) => typeof value === 'number' && !Number.isFinite(value),
  keys: false,
  msg: 'must be a number between -1.7976931348623157e308 and 1.7976931348623157e308',
  type: 'number_out_of_range',
};

/**
 * The first value (or object key) in `value`, in document order, that breaks `rule`, as a 422 problem.
 * Iterative: a request body is at most MAX_JSON_DEPTH deep, but nothing here should rely on that. Other
 * scalars (most of a query vector's body) cost one check each, and a location is spelled out only for a
 * problem.
 */
function firstBreaking(rule: ValueRule, value: unknown, loc: Array<string | number>): FieldProblem | undefined {
  const problem = (at: Array<string | number>): FieldProblem => ({ loc: at, msg: rule.msg, type: rule.type });
  if (value === null || typeof value !== 'object') return rule.bad(value) ? problem(loc) : undefined;
  const open = (container: object, parent: Frame | undefined, key: string | number | undefined): Frame | FieldProblem => {
    if (Array.isArray(container)) return { keys: undefined, values: container, next: 0, parent, key };
    const frame: Frame = { keys: [], values: [], next: 0, parent, key };
    for (const [name, child] of Object.entries(container)) {
      if (rule.keys && rule.bad(name)) return problem(parent === undefined ? [...loc, name] : locationOf(parent, loc, key!).concat(name));
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
    if (child !== null && typeof child === 'object') {
      const opened = open(child, frame, frame.keys?.[at] ?? at);
      if (!('next' in opened)) return opened;
      stack.push(opened);
    } else if (rule.bad(child)) {
      return problem(locationOf(frame, loc, frame.keys?.[at] ?? at));
    }
  }
  return undefined;
}

/** The first string (or object key) in `value` that the database could not store, as a 422 problem. */
export function unstorableText(value: unknown, loc: Array<string | number>): FieldProblem | undefined {
  return firstBreaking(UNSTORABLE_TEXT, value, loc);
}

/**
 * The first number in `value` that JSON.parse made infinite (`1e400`), as a 422 problem. Walks the parsed
 * value (a check per value: 0.06 ms for a 384-d query vector, 0.2 ms for a 16 MB inline blob), not the text,
 * whose byte-by-byte scan for such spellings cost more than parsing it (137 ms for the same blob).
 */
export function nonFiniteNumber(value: unknown, loc: Array<string | number>): FieldProblem | undefined {
  return firstBreaking(NON_FINITE, value, loc);
}

/** Parts of a JSON body bounded in size (`x-max-json-bytes` in the OpenAPI document): path (`*`: every array item) and bound. */
export interface JsonLimit {
  readonly path: readonly string[];
  readonly maxBytes: number;
}

/** The first part of `body` larger than its bound when written as JSON, as a 422 problem. */
export function oversizedJson(body: unknown, limits: readonly JsonLimit[]): FieldProblem | undefined {
  for (const limit of limits) {
    let level: Array<{ value: unknown; loc: Array<string | number> }> = [{ value: body, loc: ['body'] }];
    for (const step of limit.path) {
      const next: typeof level = [];
      for (const { value, loc } of level) {
        if (step === '*') {
          if (Array.isArray(value)) value.forEach((item, i) => next.push({ value: item, loc: [...loc, i] }));
        } else if (value !== null && typeof value === 'object' && !Array.isArray(value) && Object.hasOwn(value, step)) {
          next.push({ value: (value as Record<string, unknown>)[step], loc: [...loc, step] });
        }
      }
      level = next;
    }
    for (const { value, loc } of level) {
      if (value === undefined || value === null) continue;
      const bytes = Buffer.byteLength(JSON.stringify(value));
      if (bytes > limit.maxBytes) {
        return { loc, msg: `must be at most ${limit.maxBytes} bytes written as JSON (this is ${bytes}): keep large content in objects or documents`, type: 'json_too_large' };
      }
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
