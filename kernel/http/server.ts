/**
 * The express app. Request path: request id + log → route match → CORS preflight → authenticate
 * (key + allowed origin) → JSON body → OpenAPI validation (422) → authorize (permission, X-Namespace,
 * scopes) → rate limit → the handler registered for the operationId → JSON. Errors map once, at the end.
 */
import { randomUUID } from 'node:crypto';
import { pipeline } from 'node:stream/promises';
import express, { type NextFunction, type Request, type Response } from 'express';
import type { Container } from 'inversify';
import { lazyLogger, type Logger } from '../logger.js';
import { servicesOf } from '../tokens.js';
import type { Clock } from '../clock.js';
import { AuthenticationError, NotFoundError, RateLimitError, RequestValidationError } from '../errors.js';
import { isWebOrigin } from '../auth/origins.js';
import type { Authenticator } from '../auth/authenticator.js';
import type { Authorizer } from '../auth/authorizer.js';
import type { KeyStore } from '../auth/key-store.js';
import type { RateLimiter } from '../auth/rate-limiter.js';
import type { RequestContext } from './context.js';
import { contextOf } from './context.js';
import { apiDocsRouter } from './docs.js';
import { nonFiniteNumber, oversizedJson, refuseDeepJson, unstorableText, withoutUnicodeEscapes } from './body-checks.js';
import { encodedChunks, hasEncodedValues, plainReply } from './encoded-json.js';
import { errorBody, mapError, patternHints } from './error-mapper.js';
import type { AnyHandler } from './handlers.js';
import { OperationMatcher, operations, type OperationId, type OperationSpec } from './operations.js';
import type { RequestLog } from './request-log.js';
import { ArrayLimits } from './array-limits.js';
import { PerPathValidator, REQUEST_FORMATS } from './validation.js';
import { nonJsonBodyOperations, readNonJsonBody } from './form-bodies.js';
import { RequestPrecheck } from './request-precheck.js';

export interface HttpDependencies {
  container: Container;
  log: Logger;
  clock: Clock;
  apiDocument: Record<string, unknown>;
  validateResponses: boolean;
  jsonBodyLimit: string;
  authenticator: Authenticator;
  authorizer: Authorizer;
  rateLimiter: RateLimiter;
  keyStore: KeyStore;
  requestLog: RequestLog;
  handlers: ReadonlyMap<OperationId, AnyHandler>;
}

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,100}$/;
const CORS_ALLOW_HEADERS =
  'Authorization, Content-Type, X-Namespace, X-Request-ID, X-Public-API-Key, X-Retriever-Password, X-Session-ID';

export function buildHttpApp(deps: HttpDependencies): express.Express {
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  const matcher = new OperationMatcher(operations.values());
  const services = servicesOf(deps.container);

  // Every response, errors, preflights and blob downloads included: never let a browser guess a type.
  app.use((_req: Request, res: Response, next: NextFunction) => {
    res.setHeader('X-Content-Type-Options', 'nosniff');
    next();
  });
  // Interactive docs (/docs) are a page for people, not an API operation: served before the operation matcher.
  app.use(apiDocsRouter());

  const bodyRequired = operationsRequiringBody(deps.apiDocument);
  const hints = patternHints(deps.apiDocument);
  const nonJsonBodies = nonJsonBodyOperations(deps.apiDocument);
  const json = express.json({
    limit: deps.jsonBodyLimit,
    verify: (_req, res, body, encoding) => {
      refuseDeepJson(body, encoding);
      contextOf(res as Response).bodyWithoutEscapes = withoutUnicodeEscapes(body);
    },
  });
  const validator = new PerPathValidator({ apiDocument: deps.apiDocument, validateResponses: deps.validateResponses });
  const precheck = new RequestPrecheck(deps.apiDocument, { formats: REQUEST_FORMATS });
  const arrayLimits = new ArrayLimits(deps.apiDocument);
  const run = (middleware: (req: Request, res: Response, next: NextFunction) => void, req: Request, res: Response) =>
    new Promise<void>((resolve, reject) => middleware(req, res, (err?: unknown) => (err ? reject(err) : resolve())));

  // One middleware runs the whole request path (fewer router layers on the hot path); each step is a
  // function below, in order.
  app.use(async (req: Request, res: Response, next: NextFunction) => {
    try {
      const ctx = begin(req, res);
      if (!ctx) return;
      await authenticate(req, res, ctx);
      await readBody(req, res, ctx.operation!);
      await authorize(req, res, ctx);
      await dispatch(req, res, ctx);
    } catch (err) {
      next(err);
    }
  });

  /** 1. Request id, lazy logger, operation match, and the request-log row written when the response ends. */
  function begin(req: Request, res: Response): RequestContext | undefined {
    const incoming = req.get('x-request-id');
    const requestId = incoming && REQUEST_ID.test(incoming) ? incoming : `req_${randomUUID().replaceAll('-', '')}`;
    res.setHeader('X-Request-ID', requestId);
    const ctx: RequestContext = {
      requestId,
      // Most requests never log beyond the access line: the child logger is made on first use only.
      log: lazyLogger(() => deps.log.child({ req_id: requestId })),
      startedAt: process.hrtime.bigint(),
      operation: undefined,
      pathParams: {},
      auth: null,
      namespace: null,
      credits: 0,
    };
    res.locals.ctx = ctx;
    res.on('finish', () => finishRequest(deps, req, res, ctx));
    const match = matcher.match(req.method, req.path);
    if (req.method === 'OPTIONS' && req.get('origin')) {
      preflight(req, res, match.kind === 'method_not_allowed' ? match.allowed : match.kind === 'found' ? [match.operation.method.toUpperCase()] : []);
      return undefined;
    }
    if (match.kind === 'not_found') throw new NotFoundError(`No route for ${req.method} ${loggablePath(req.path)}`);
    if (match.kind === 'method_not_allowed') {
      res.setHeader('Allow', match.allowed.join(', '));
      res.status(405).json(errorBody(405, 'MethodNotAllowedError', `${req.method} is not allowed on ${loggablePath(req.path)}`));
      return undefined;
    }
    ctx.operation = match.operation;
    ctx.pathParams = match.params;
    return ctx;
  }

  /** 2. The key (and its allowed origins), before anything reads the body. */
  async function authenticate(req: Request, res: Response, ctx: RequestContext): Promise<void> {
    const origin = req.get('origin');
    if (ctx.operation!.public) {
      // Public routes (published retrievers, health) answer any web page: search widgets run on other sites.
      if (origin && isWebOrigin(origin)) {
        res.setHeader('Access-Control-Allow-Origin', origin);
        res.setHeader('Vary', 'Origin');
      }
      return;
    }
    ctx.auth = await deps.authenticator.authenticate(req.get('authorization'), {
      acceptsBoundKeys: ctx.operation!.boundKeys,
      origin,
      socketAddress: req.socket.remoteAddress,
      forwardedFor: req.get('x-forwarded-for'),
      keyRefused: (key) => (ctx.presentedKey = key),
    });
    // `Origin: null` (sandboxed frames, file: pages) is shared by every such page: never grant it.
    if (origin && isWebOrigin(origin)) {
      res.setHeader('Access-Control-Allow-Origin', origin);
      res.setHeader('Vary', 'Origin');
    }
  }

  /**
   * 3. Body and OpenAPI validation. Binary operations (blob PUT/GET) stream their bodies themselves. A JSON
   * request with no body where one is required (no bytes, with or without a Content-Type) is a 422 like any
   * other missing field (the validator would call it an unsupported media type, or pass it on). PostgreSQL
   * text and jsonb cannot hold U+0000 or unpaired surrogates: those are refused (422) before anything hands
   * them to the database.
   */
  async function readBody(req: Request, res: Response, operation: OperationSpec): Promise<void> {
    if (operation.body === 'binary') return;
    const hasBody = req.get('transfer-encoding') !== undefined || Number(req.get('content-length') ?? 0) > 0;
    // Also with a Content-Type but no bytes: the handler would otherwise get no body at all.
    if (!hasBody && bodyRequired.has(operation.operationId)) {
      throw new RequestValidationError([{ loc: ['body'], msg: 'A JSON request body is required', type: 'missing' }]);
    }
    const readAlready = hasBody && (await readNonJsonBody(req, res, operation, nonJsonBodies));
    if (!readAlready && (hasBody || req.get('content-type') !== undefined)) await run(json, req, res);
    arrayLimits.check(arrayLimits.bodySchema(operation.path, operation.method), req.body, ['body']);
    const accepted = precheck.accepts(operation.path, operation.method, {
      hasQuery: req.url.includes('?'), hasBody, contentType: req.get('content-type'), headers: req.headers, body: req.body, pathParams: contextOf(res).pathParams,
    });
    const libraryCheck = () => run((q, r, n) => validator.validate(operation.path, q, r, n), req, res);
    if (!accepted) await libraryCheck();
    // Tests (which validate responses) run the library after an accepting pre-check too: they must agree.
    else if (deps.validateResponses) {
      await libraryCheck().catch((err: unknown) => {
        throw new Error(`the request pre-check accepted what the OpenAPI validator refused: ${(err as Error).message}`);
      });
    }
    const problem =
      (contextOf(res).bodyWithoutEscapes ? undefined : unstorableText(req.body, ['body'])) ??
      unstorableText(contextOf(res).pathParams, ['path']) ??
      unstorableText(req.query, ['query']) ??
      nonFiniteNumber(req.body, ['body']) ??
      oversizedJson(req.body, operation.jsonLimits);
    if (problem) throw new RequestValidationError([problem]);
  }

  /** 4. Permission, X-Namespace and scopes, then the key's rate limit. */
  async function authorize(req: Request, res: Response, ctx: RequestContext): Promise<void> {
    if (!ctx.auth) return;
    ctx.namespace = await deps.authorizer.authorize({
      auth: ctx.auth,
      operation: ctx.operation!,
      namespaceHeader: req.get('x-namespace'),
      pathParams: ctx.pathParams,
      body: req.body,
    });
    const limit = ctx.auth.rateLimitPerMinute;
    if (limit === null) return;
    const decision = await deps.rateLimiter.consume(`key:${ctx.auth.keyId}`, limit);
    res.setHeader('X-RateLimit-Limit', String(decision.limit));
    res.setHeader('X-RateLimit-Remaining', String(decision.remaining));
    res.setHeader('X-RateLimit-Reset', String(decision.resetSeconds));
    if (!decision.allowed) {
      throw new RateLimitError(
        `Rate limit of ${limit} requests per minute exceeded; retry in ${decision.resetSeconds} s`,
        decision.resetSeconds,
        { limit, retry_after_seconds: decision.resetSeconds },
        limit,
      );
    }
  }

  /** 5. The handler a resource plugin registered for the operationId, and its reply. */
  async function dispatch(req: Request, res: Response, ctx: RequestContext): Promise<void> {
    const operation = ctx.operation!;
    const handler = deps.handlers.get(operation.operationId);
    if (!handler) throw new Error(`no handler for ${operation.operationId}`);
    ctx.credits += operation.credits;
    const reply = await handler({ params: ctx.pathParams, query: req.query, body: req.body, ctx, services, req, res });
    for (const [name, value] of Object.entries(reply.headers ?? {})) res.setHeader(name, value);
    res.status(reply.status);
    if (reply.stream) await pipeline(reply.stream, res).catch((err: unknown) => clientGone(err, res, ctx));
    else if (reply.body === undefined) res.end();
    // Tests validate responses, which wraps res.json: they keep it.
    else if (deps.validateResponses) res.json(plainReply(reply.body));
    else sendJson(res, reply.body);
  }

  // 6. Errors.
  app.use((err: unknown, req: Request, res: Response, next: NextFunction) => {
    void next;
    const ctx = res.locals.ctx as RequestContext | undefined;
    const reply = mapError(err, hints);
    const log = ctx?.log ?? deps.log;
    const path = loggablePath(req.path);
    if (reply.unexpected) log.error({ ...(reply.logged ?? { err }), method: req.method, path }, 'request failed');
    else if (!(err instanceof AuthenticationError)) {
      log.info({ status: reply.status, ...(reply.logged ?? { reason: (err as Error).message }) }, 'request refused');
    }
    if (res.headersSent) return;
    for (const [name, value] of Object.entries(reply.headers)) res.setHeader(name, value);
    res.status(reply.status).json(reply.body);
  });

  return app;
}

/** Past this many characters a reply is encoded once, into a Buffer (see sendJson). */
const LARGE_REPLY = 16 * 1024;

/**
 * What res.json does, as one socket write: express turns the text into a Buffer, which Node then writes
 * after the headers (two chunks, a copy and a writev); a string is sent in the headers' own write. A large
 * reply is the other way round: sent as a string, its UTF-8 length is counted and then it is encoded into
 * the socket's write (two passes over, say, the 570 KB of a 10,000-object batch: 4–11 ms), against one
 * encoding into a Buffer (about 3 ms).
 */
export function sendJson(res: Response, body: unknown): void {
  if (!res.hasHeader('Content-Type')) res.setHeader('Content-Type', 'application/json; charset=utf-8');
  if (hasEncodedValues(body)) {
    // Written as chunks in one go (corked until end(), which uncorks: one writev), the encoded values' bytes not copied.
    const chunks = encodedChunks(body);
    res.setHeader('Content-Length', chunks.reduce((n, c) => n + c.length, 0));
    res.cork();
    for (const chunk of chunks.slice(0, -1)) res.write(chunk);
    res.end(chunks.at(-1));
    return;
  }
  const text = JSON.stringify(body);
  if (text.length > LARGE_REPLY) {
    const bytes = Buffer.from(text);
    res.setHeader('Content-Length', bytes.length);
    res.end(bytes);
    return;
  }
  res.setHeader('Content-Length', Buffer.byteLength(text));
  res.end(text);
}

/**
 * A streamed body the client stopped reading (it closed the connection) is not a server error: noted at
 * info, nothing more to send. Anything else is rethrown.
 */
function clientGone(err: unknown, res: Response, ctx: RequestContext): void {
  const code = (err as { code?: unknown } | null)?.code;
  if (code === 'ERR_STREAM_PREMATURE_CLOSE' && (res.destroyed || res.socket?.destroyed !== false)) {
    ctx.log.info({ op: ctx.operation?.operationId }, 'client closed the connection before the streamed body ended');
    return;
  }
  throw err;
}

function operationsRequiringBody(apiDocument: Record<string, unknown>): Set<OperationId> {
  const paths = (apiDocument.paths ?? {}) as Record<string, Record<string, { requestBody?: { required?: boolean } } | undefined>>;
  const required = new Set<OperationId>();
  for (const operation of operations.values()) {
    if (paths[operation.path]?.[operation.method]?.requestBody?.required === true) required.add(operation.operationId);
  }
  return required;
}

/**
 * A request path as logs and messages may show it: a presigned storage token (`/v1/storage/blobs/{token}`)
 * is a credential for its URL's lifetime, so it is replaced wherever it appears in a path.
 */
export function loggablePath(path: string): string {
  return path.replace(/(\/storage\/blobs\/)[^/]+/g, '$1[redacted]');
}

function preflight(req: Request, res: Response, methods: string[]): void {
  const origin = req.get('origin')!;
  res.setHeader('Vary', 'Origin');
  if (!isWebOrigin(origin)) {
    // No grant: the browser refuses the actual request.
    res.status(204).end();
    return;
  }
  res.setHeader('Access-Control-Allow-Origin', origin);
  res.setHeader('Access-Control-Allow-Methods', methods.join(', ') || 'GET, POST, PATCH, PUT, DELETE');
  res.setHeader('Access-Control-Allow-Headers', CORS_ALLOW_HEADERS);
  res.setHeader('Access-Control-Max-Age', '600');
  res.status(204).end();
}

function finishRequest(deps: HttpDependencies, req: Request, res: Response, ctx: RequestContext): void {
  const latencyMs = Number(process.hrtime.bigint() - ctx.startedAt) / 1e6;
  const now = deps.clock.now();
  deps.log.info(
    {
      req_id: ctx.requestId,
      method: req.method,
      path: loggablePath(req.path),
      status: res.statusCode,
      ms: Math.round(latencyMs * 100) / 100,
      op: ctx.operation?.operationId,
    },
    'request',
  );
  deps.requestLog.record({
    organization_id: ctx.auth?.organizationId ?? ctx.presentedKey?.organizationId ?? null,
    key_id: ctx.auth?.keyId ?? ctx.presentedKey?.keyId ?? null,
    operation_id: ctx.operation?.operationId ?? null,
    method: req.method,
    path: ctx.operation?.path ?? loggablePath(req.path).slice(0, 300),
    status: res.statusCode,
    latency_ms: latencyMs,
    credits: ctx.credits,
    namespace_id: ctx.namespace?.id ?? null,
    request_id: ctx.requestId,
    created_at: now,
  });
  if (ctx.auth && res.statusCode < 400) deps.keyStore.noteUsed(ctx.auth.keyId, now);
}
