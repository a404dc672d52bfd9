/**
 * The one place errors become HTTP: typed ApiErrors → `ErrorResponse`, schema violations → 422
 * `HTTPValidationError`, anything else → a 500 with a generic message (details go to the log only).
 */
import { ApiError, RangeNotSatisfiableError, RateLimitError, RequestValidationError, type FieldProblem } from '../errors.js';

export interface ErrorReply {
  status: number;
  body: unknown;
  headers: Record<string, string>;
  /** Unexpected errors are logged at error level with the request id; 4xx at info. */
  unexpected: boolean;
  /** What to log instead of the error itself, when the error carries SQL or bound values. */
  logged?: Record<string, unknown>;
}

export function errorBody(status: number, type: string, message: string, details?: Record<string, unknown>) {
  return { success: false as const, status, error: { message, type, ...(details ? { details } : {}) } };
}

/** Errors from express-openapi-validator carry a status and a list of `{path, message, errorCode}`. */
interface OpenApiValidatorError {
  status: number;
  errors: Array<{ path?: string; message?: string; errorCode?: string }>;
  message: string;
}

function isValidatorError(err: unknown): err is OpenApiValidatorError {
  return typeof err === 'object' && err !== null && 'status' in err && Array.isArray((err as { errors?: unknown }).errors);
}

/** The validator's names for where a value came from, in the contract's words. */
const LOCATIONS: Record<string, string> = { headers: 'header', params: 'path' };

/** `/body/scopes/0/resource_type` or `.body.name` → `["body", "scopes", 0, "resource_type"]`. */
export function locationOf(path: string | undefined): Array<string | number> {
  if (!path) return [];
  return path
    .split(/[/.]/)
    .filter(Boolean)
    .map((part) => (/^\d+$/.test(part) ? Number(part) : part))
    .map((part, i) => (i === 0 && typeof part === 'string' ? LOCATIONS[part] ?? part : part));
}

function problemType(errorCode: string | undefined): string {
  return (errorCode ?? 'validation').replace(/\.openapi\.(validation|requestValidation)$/, '');
}

function validationReply(problems: FieldProblem[]): ErrorReply {
  return { status: 422, body: { detail: problems }, headers: {}, unexpected: false };
}

interface BodyParserError {
  type: string;
  status: number;
  message: string;
}

function isBodyParserError(err: unknown): err is BodyParserError {
  return typeof err === 'object' && err !== null && typeof (err as { type?: unknown }).type === 'string' &&
    typeof (err as { status?: unknown }).status === 'number';
}

/** An error raised by PostgreSQL (pg) or PGlite: a SQLSTATE code among the engine's fields. */
interface DatabaseError {
  code: string;
  message: string;
}

function isDatabaseError(err: unknown): err is DatabaseError {
  if (typeof err !== 'object' || err === null) return false;
  const { code } = err as { code?: unknown };
  return typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code) && ('severity' in err || 'routine' in err);
}

/**
 * SQLSTATEs a request's values cause (a date the database cannot hold, a number out of range, a text too
 * long for an index): 400s that name the problem, never the SQL. Class 22 is "data exception", class 54
 * "program limit exceeded".
 */
const INPUT_SQLSTATES: Record<string, string> = {
  '22001': 'a text is too long',
  '22003': 'a number is out of range',
  '22007': 'a date-time is not in a valid format',
  '22008': 'a date-time is out of range',
  '22012': 'a computation divides by zero',
  '2201B': 'a regular expression is invalid',
  '22021': 'a text contains a character the database cannot store',
  '22P02': 'a value does not have the expected type',
  '22P05': 'a text contains a character the database cannot store',
  '54000': 'a value is too large for the database',
  '54001': 'the request is too complex for the database',
};

function databaseReply(err: DatabaseError): ErrorReply {
  // Logged without the error object: drivers attach the statement and its bound values to it.
  const logged = { sqlstate: err.code };
  const reason = INPUT_SQLSTATES[err.code] ?? (err.code.startsWith('22') ? 'a value is not valid for the database' : undefined);
  if (reason !== undefined) {
    const message = `The request cannot be carried out: ${reason}`;
    return { status: 400, body: errorBody(400, 'InputError', message, { sqlstate: err.code }), headers: {}, unexpected: false, logged };
  }
  if (err.code === '23505') {
    const message = 'The request conflicts with an existing record';
    return { status: 409, body: errorBody(409, 'ConflictError', message), headers: {}, unexpected: false, logged };
  }
  return { ...internalReply(), logged: { ...logged, database_message: err.message.split(' - ').at(-1) } };
}

function internalReply(): ErrorReply {
  return { status: 500, body: errorBody(500, 'InternalError', 'Internal server error'), headers: {}, unexpected: true };
}

/**
 * What each `pattern` of the OpenAPI document means, from the description of the schema that holds it: a
 * refused value is told the rule in words (`must match pattern "^(?!ns_)…"` alone says little).
 */
export function patternHints(apiDocument: unknown): ReadonlyMap<string, string> {
  const hints = new Map<string, string>();
  const stack: unknown[] = [apiDocument];
  while (stack.length > 0) {
    const node = stack.pop();
    if (node === null || typeof node !== 'object') continue;
    if (Array.isArray(node)) {
      stack.push(...node);
      continue;
    }
    const { pattern, description } = node as { pattern?: unknown; description?: unknown };
    if (typeof pattern === 'string' && typeof description === 'string' && !hints.has(pattern)) hints.set(pattern, description.trim());
    stack.push(...Object.values(node));
  }
  return hints;
}

/** The validator's message, with the rule in words when it names a pattern the document describes. */
function withHint(message: string, hints: ReadonlyMap<string, string>): string {
  const pattern = /^must match pattern "(.*)"$/s.exec(message)?.[1];
  const hint = pattern === undefined ? undefined : hints.get(pattern);
  return hint ? `${message}: ${hint}` : message;
}

/** The problem types that say a value has the shape of another alternative of a `oneOf`/`anyOf`, not a wrong value. */
const SHAPE_PROBLEMS = new Set(['required', 'additionalProperties']);

/**
 * A value that matches none of a `oneOf`'s alternatives gets every alternative's problems, most of them about
 * the alternatives the caller did not mean (`must have required property 'interactions'` for a single
 * interaction with one bad field). When some problem lies deeper inside the value (a field of a field), the
 * caller evidently chose a shape: its shape-level problems (missing or extra properties right at the value,
 * which the other alternatives raise) and the summary line are left out, so the answer names what to fix.
 * With no deeper problem, everything stays: the caller is told each shape it could send.
 */
export function withoutOtherAlternatives(problems: readonly FieldProblem[]): FieldProblem[] {
  const dropped = new Set<FieldProblem>();
  for (const summary of problems) {
    if (summary.type !== 'oneOf' && summary.type !== 'anyOf') continue;
    const at = summary.loc;
    const inside = problems.filter((p) => p !== summary && p.loc.length > at.length && at.every((part, i) => p.loc[i] === part));
    if (!inside.some((p) => p.loc.length > at.length + 1)) continue;
    dropped.add(summary);
    for (const p of inside) if (p.loc.length === at.length + 1 && SHAPE_PROBLEMS.has(p.type)) dropped.add(p);
  }
  return problems.filter((p) => !dropped.has(p));
}

export function mapError(err: unknown, hints: ReadonlyMap<string, string> = new Map()): ErrorReply {
  if (err instanceof ApiError) {
    const headers: Record<string, string> = {};
    if (err instanceof RateLimitError) {
      headers['Retry-After'] = String(err.retryAfterSeconds);
      if (err.limit !== undefined) {
        headers['X-RateLimit-Limit'] = String(err.limit);
        headers['X-RateLimit-Remaining'] = '0';
        headers['X-RateLimit-Reset'] = String(err.retryAfterSeconds);
      }
    }
    if (err instanceof RangeNotSatisfiableError) headers['Content-Range'] = `bytes */${err.size}`;
    return { status: err.status, body: errorBody(err.status, err.type, err.message, err.details), headers, unexpected: false };
  }
  if (err instanceof RequestValidationError) return validationReply(err.problems);
  if (isValidatorError(err)) {
    if (err.status === 400) {
      return validationReply(
        withoutOtherAlternatives(
          err.errors.map((e) => ({
            loc: locationOf(e.path),
            msg: withHint(e.message ?? 'invalid value', hints),
            type: problemType(e.errorCode),
          })),
        ),
      );
    }
    if (err.status === 415) {
      return { status: 415, body: errorBody(415, 'InputError', err.message), headers: {}, unexpected: false };
    }
    if (err.status === 404 || err.status === 405) {
      return { status: err.status, body: errorBody(err.status, 'NotFoundError', err.message), headers: {}, unexpected: false };
    }
    // Response validation failures (status 500) are contract bugs: surface them as internal errors.
  }
  if (isBodyParserError(err)) {
    if (err.type === 'entity.parse.failed') {
      return validationReply([{ loc: ['body'], msg: `Body is not valid JSON: ${err.message}`, type: 'json_invalid' }]);
    }
    if (err.type === 'entity.too.large') {
      return { status: 413, body: errorBody(413, 'PayloadTooLargeError', 'Request body is too large'), headers: {}, unexpected: false };
    }
    if (err.status >= 400 && err.status < 500) {
      return { status: err.status, body: errorBody(err.status, 'InputError', err.message), headers: {}, unexpected: false };
    }
  }
  if (isDatabaseError(err)) return databaseReply(err);
  return internalReply();
}
