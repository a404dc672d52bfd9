/**
 * The one error vocabulary. Services throw these; kernel/http maps them to HTTP exactly once.
 */
export type ErrorDetails = Record<string, unknown>;

export abstract class ApiError extends Error {
  abstract readonly status: number;
  abstract readonly type: string;
  readonly details: ErrorDetails | undefined;

  constructor(message: string, details?: ErrorDetails) {
    super(message);
    this.name = new.target.name;
    this.details = details;
  }
}

/** The request is well-formed but cannot be carried out as asked (400). */
export class InputError extends ApiError {
  readonly status = 400;
  readonly type = 'InputError';
}

/** Missing, malformed, unknown, revoked or expired credentials (401). */
export class AuthenticationError extends ApiError {
  readonly status = 401;
  readonly type = 'AuthenticationError';
}

/** Authenticated, but the key's permission, scopes or origin do not allow it (403). */
export class NotAllowedError extends ApiError {
  readonly status = 403;
  readonly type = 'NotAllowedError';
}

export class NotFoundError extends ApiError {
  readonly status = 404;
  readonly type = 'NotFoundError';
}

/** The request conflicts with current state: a taken name, a guard check (409). */
export class ConflictError extends ApiError {
  readonly status = 409;
  readonly type = 'ConflictError';
}

/** The thing the request targets existed once and is gone for good: a used, expired or deleted upload URL (410). */
export class GoneError extends ApiError {
  readonly status = 410;
  readonly type = 'GoneError';
}

export class PayloadTooLargeError extends ApiError {
  readonly status = 413;
  readonly type = 'PayloadTooLargeError';
}

/** A Range outside the blob (416); the reply's `Content-Range` gives the blob's size. */
export class RangeNotSatisfiableError extends ApiError {
  readonly status = 416;
  readonly type = 'RangeNotSatisfiableError';

  constructor(
    message: string,
    readonly size: number,
  ) {
    super(message, { size_bytes: size });
  }
}

/** A request body in a media type or charset Tessera does not read (415; typed as an input problem). */
export class UnsupportedMediaTypeError extends ApiError {
  readonly status = 415;
  readonly type = 'InputError';
}

/** 429: the reply carries `Retry-After`, and the `X-RateLimit-*` headers when the limit is given. */
export class RateLimitError extends ApiError {
  readonly status = 429;
  readonly type = 'RateLimitError';

  constructor(
    message: string,
    readonly retryAfterSeconds: number,
    details?: ErrorDetails,
    /** The ceiling that was reached, for `X-RateLimit-Limit` (omit to keep the number private). */
    readonly limit?: number,
  ) {
    super(message, details);
  }
}

export class ServiceUnavailableError extends ApiError {
  readonly status = 503;
  readonly type = 'ServiceUnavailableError';
}

/** One field-level problem, in the shape of `HTTPValidationError.detail[]`. */
export interface FieldProblem {
  loc: Array<string | number>;
  msg: string;
  type: string;
}

/** A schema-level violation found outside the OpenAPI validator (422 `HTTPValidationError`). */
export class RequestValidationError extends Error {
  readonly status = 422;

  constructor(readonly problems: FieldProblem[]) {
    super(problems.map((p) => `${p.loc.join('.')}: ${p.msg}`).join('; '));
    this.name = 'RequestValidationError';
  }
}
