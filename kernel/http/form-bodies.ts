/**
 * Request bodies that are not JSON: `multipart/form-data` forms (one uploaded file and a few text fields)
 * and raw YAML text, for the operations whose OpenAPI request body declares those media types (the manifest
 * endpoints). Parsed here, bounded in size, so that express-openapi-validator then validates the result like
 * any JSON body (its own multer step is off: its errors for a malformed form are 500s).
 *
 * A form becomes a plain object: every text field and every file (decoded as UTF-8 text) under its field
 * name. A YAML body becomes one string. Too large: 413; malformed form or not UTF-8: 400/422; never a 500.
 */
import type { Request, Response } from 'express';
import express from 'express';
import multer from 'multer';
import { InputError, PayloadTooLargeError, RequestValidationError, UnsupportedMediaTypeError } from '../errors.js';
import type { OperationSpec } from './operations.js';

/** Largest form or YAML body accepted (a manifest of hundreds of resources is far below it). */
export const FORM_BODY_LIMIT_BYTES = 1024 * 1024;

const FORM = 'multipart/form-data';
const YAML_TYPES = ['application/yaml', 'application/x-yaml', 'text/yaml', 'text/x-yaml'];

type MediaTypes = ReadonlyMap<string, ReadonlySet<string>>;

/** `METHOD path` → the request body media types the document declares, for operations with a non-JSON one. */
export function nonJsonBodyOperations(apiDocument: Record<string, unknown>): MediaTypes {
  const found = new Map<string, Set<string>>();
  const paths = (apiDocument.paths ?? {}) as Record<string, Record<string, { requestBody?: { content?: Record<string, unknown> } } | undefined>>;
  for (const [path, item] of Object.entries(paths)) {
    for (const [method, operation] of Object.entries(item ?? {})) {
      const media = Object.keys(operation?.requestBody?.content ?? {});
      if (media.some((m) => m === FORM || YAML_TYPES.includes(m))) found.set(`${method} ${path}`, new Set(media));
    }
  }
  return found;
}

function mediaTypeOf(req: Request): string | undefined {
  return req.get('content-type')?.split(';')[0]!.trim().toLowerCase();
}

const fatalUtf8 = new TextDecoder('utf-8', { fatal: true });

const upload = multer({
  storage: multer.memoryStorage(),
  // One file, a handful of fields: anything more is not a request this service documents.
  limits: { fileSize: FORM_BODY_LIMIT_BYTES, fieldSize: FORM_BODY_LIMIT_BYTES, files: 1, fields: 8, parts: 9, headerPairs: 20 },
}).any();

const yamlText = express.text({ type: YAML_TYPES, limit: FORM_BODY_LIMIT_BYTES, defaultCharset: 'utf-8' });

function run(middleware: express.RequestHandler, req: Request, res: Response): Promise<void> {
  return new Promise((resolve, reject) => middleware(req, res, (err?: unknown) => (err ? reject(err) : resolve())));
}

function tooLarge(): PayloadTooLargeError {
  return new PayloadTooLargeError(`The request body is larger than ${FORM_BODY_LIMIT_BYTES} bytes`, { max_bytes: FORM_BODY_LIMIT_BYTES });
}

/** multer's and busboy's errors as the service's own: too large is a 413, anything else malformed a 400. */
function formError(err: unknown): Error {
  if (err instanceof multer.MulterError) {
    if (/LIMIT_(FILE|FIELD|PART)_(SIZE|COUNT)|LIMIT_FIELD_VALUE/.test(err.code)) return tooLarge();
    return new InputError(`The multipart form is not one this operation takes: ${err.message}`, { code: err.code });
  }
  const message = err instanceof Error ? err.message : String(err);
  return new InputError(`The multipart form could not be read: ${message}`);
}

/**
 * Reads the body of a request to an operation listed by nonJsonBodyOperations, when it is a form or YAML.
 * True when it did (the body is then in `req.body`); false for any other media type (JSON goes the usual way).
 */
export async function readNonJsonBody(req: Request, res: Response, operation: OperationSpec, media: MediaTypes): Promise<boolean> {
  const declared = media.get(`${operation.method} ${operation.path}`);
  const type = mediaTypeOf(req);
  if (!declared || type === undefined) return false;
  if (type === FORM) {
    if (!declared.has(FORM)) throw new UnsupportedMediaTypeError(`This operation does not take ${FORM}`);
    if (Number(req.get('content-length') ?? 0) > FORM_BODY_LIMIT_BYTES + 64 * 1024) throw tooLarge();
    await run(upload, req, res).catch((err: unknown) => {
      throw formError(err);
    });
    req.body = formFields(req);
    return true;
  }
  if (YAML_TYPES.includes(type)) {
    if (![...declared].some((m) => YAML_TYPES.includes(m))) throw new UnsupportedMediaTypeError(`This operation does not take ${type}`);
    await run(yamlText, req, res).catch((err: unknown) => {
      const status = (err as { status?: unknown }).status;
      if (status === 413) throw tooLarge();
      if (status === 415) throw new UnsupportedMediaTypeError('YAML request bodies must be UTF-8');
      throw new InputError(`The request body could not be read: ${(err as Error).message}`);
    });
    // express.text leaves the body alone when it was empty: the validator then reports the missing body.
    if (typeof req.body !== 'string') req.body = undefined;
    return true;
  }
  return false;
}

/** Field names kept (the documented ones are of this kind; `__proto__` and the like never reach an object). */
const FIELD_NAME = /^[a-z][a-z0-9_]{0,63}$/;

/** A parsed form as a plain object; a file becomes its text. */
function formFields(req: Request): Record<string, string> {
  const fields: Record<string, string> = {};
  for (const [name, value] of Object.entries((req.body ?? {}) as Record<string, unknown>)) {
    if (typeof value === 'string' && FIELD_NAME.test(name)) fields[name] = value;
  }
  for (const file of (req.files ?? []) as Express.Multer.File[]) {
    if (!FIELD_NAME.test(file.fieldname)) continue;
    try {
      fields[file.fieldname] = fatalUtf8.decode(file.buffer);
    } catch {
      throw new RequestValidationError([{ loc: ['body', file.fieldname], msg: 'must be UTF-8 text', type: 'string_encoding' }]);
    }
  }
  return fields;
}
