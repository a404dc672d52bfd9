/**
 * OpenAPI request (and, in tests, response) validation with express-openapi-validator, one validator per
 * path of the document, made on the path's first request. The library finds a request's route by
 * compiling every path of its document to a regular expression on every request; with a document of one
 * path that is one compilation instead of dozens, which is most of its per-request cost.
 */
import type { NextFunction, Request, RequestHandler, Response } from 'express';
import * as OpenApiValidator from 'express-openapi-validator';
import { isCalendarDate, isTimestamp } from '../dates.js';

export interface ValidationOptions {
  apiDocument: Record<string, unknown>;
  validateResponses: boolean;
}

/**
 * Dates and date-times through the one strict reader (kernel/dates.ts): ajv's own formats accept year 0000
 * and leap seconds, which neither JavaScript nor PostgreSQL can hold.
 */
export const REQUEST_FORMATS = {
  'date-time': { type: 'string' as const, validate: isTimestamp },
  date: { type: 'string' as const, validate: isCalendarDate },
};

/**
 * The library's middleware for a document. The document's own validity is checked once, by a test over
 * the whole generated document (test/generated.test.ts), not on every path's first request.
 */
export function openApiMiddleware(apiDocument: Record<string, unknown>, options: ValidationOptions, validateApiSpec = false): RequestHandler[] {
  return OpenApiValidator.middleware({
    apiSpec: apiDocument as never,
    validateApiSpec,
    // allErrors: a 422 lists every problem of the request, not just the first.
    validateRequests: { allowUnknownQueryParameters: false, coerceTypes: false, removeAdditional: false, allErrors: true },
    validateResponses: options.validateResponses ? { removeAdditional: false } : false,
    validateSecurity: false,
    validateFormats: true,
    // 'full' checks dates for real (no 30 February silently becoming 2 March).
    ajvFormats: { mode: 'full' },
    formats: REQUEST_FORMATS,
    ignoreUndocumented: true,
    // Forms are read before validation, bounded, by form-bodies.ts (the library's multer answers 500 to a malformed one).
    fileUploader: false,
  }) as RequestHandler[];
}

/** Runs a list of middleware in order, as express would. */
function chain(handlers: readonly RequestHandler[], req: Request, res: Response, done: NextFunction): void {
  let i = 0;
  const step = (err?: unknown): void => {
    if (err !== undefined && err !== null) return done(err);
    const handler = handlers[i++];
    if (!handler) return done();
    try {
      const result = handler(req, res, step) as unknown;
      if (result instanceof Promise) result.catch(step);
    } catch (error) {
      step(error);
    }
  };
  step();
}

export class PerPathValidator {
  private readonly byPath = new Map<string, RequestHandler[]>();

  constructor(private readonly options: ValidationOptions) {}

  /** The validator of one document path (its operations, with every component). */
  private forPath(path: string): RequestHandler[] {
    let handlers = this.byPath.get(path);
    if (!handlers) {
      const doc = this.options.apiDocument as { paths: Record<string, unknown> };
      const single = structuredClone({ ...doc, paths: { [path]: doc.paths[path] } });
      handlers = openApiMiddleware(single, this.options);
      this.byPath.set(path, handlers);
    }
    return handlers;
  }

  validate(path: string, req: Request, res: Response, next: NextFunction): void {
    chain(this.forPath(path), req, res, next);
  }
}
