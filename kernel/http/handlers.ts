/**
 * Handler types derived from the generated OpenAPI types: a handler's path parameters, query, body and
 * every response it may return are checked at compile time against the contract.
 */
import type { Request, Response } from 'express';
import type { components, operations as Operations } from '../../generated/openapi.js';
import type { Services } from '../tokens.js';
import type { OperationId } from './operations.js';
import type { AuthContext } from '../auth/authenticator.js';
import type { RequestContext } from './context.js';
import type { EncodedJson } from './encoded-json.js';

type Op<K extends OperationId> = Operations[K];

type Params<K extends OperationId> = Op<K> extends { parameters: infer P } ? P : never;

export type PathParams<K extends OperationId> = Params<K> extends { path: infer X } ? NonNullable<X> : Record<string, never>;
export type QueryParams<K extends OperationId> = Params<K> extends { query?: infer X } ? NonNullable<X> : Record<string, never>;

export type RequestBody<K extends OperationId> = Op<K> extends { requestBody: { content: { 'application/json': infer B } } }
  ? B
  : Op<K> extends { requestBody?: { content: { 'application/json': infer B } } }
    ? B | undefined
    : undefined;

type JsonOf<R> = R extends { content: { 'application/json': infer B } } ? B : undefined;

type ErrorBody = components['schemas']['ErrorResponse'] | components['schemas']['HTTPValidationError'];

/** A body whose top-level values may be given already encoded (see EncodedJson). */
type MaybeEncoded<T> = T extends readonly unknown[] ? T : T extends object ? { [P in keyof T]: T[P] | EncodedJson<T[P]> } : T;

/**
 * One of the responses a handler may return itself: any declared status whose body is not an error
 * body (errors are thrown as typed ApiErrors and mapped by the kernel).
 */
export type HandlerReply<K extends OperationId> = {
  [S in keyof Op<K>['responses'] & number]: JsonOf<Op<K>['responses'][S]> extends ErrorBody
    ? never
    :
        | {
            status: S;
            body: MaybeEncoded<JsonOf<Op<K>['responses'][S]>>;
            headers?: Record<string, string>;
            /** For binary responses: streamed to the client instead of a JSON body. */
            stream?: NodeJS.ReadableStream;
          }
        | {
            status: S;
            body: undefined;
            /** Must name the streamed content type (one the operation declares besides JSON, e.g. text/event-stream). */
            headers: Record<string, string>;
            /** The whole body, streamed to the client as it is produced. */
            stream: NodeJS.ReadableStream;
          };
}[keyof Op<K>['responses'] & number];

export interface HandlerInput<K extends OperationId> {
  params: PathParams<K>;
  query: QueryParams<K>;
  body: RequestBody<K>;
  ctx: RequestContext;
  /** The kernel's services, by token. */
  services: Services;
  req: Request;
  res: Response;
}

export type Handler<K extends OperationId> = (input: HandlerInput<K>) => Promise<HandlerReply<K>>;

export type HandlerMap = { [K in OperationId]?: Handler<K> };

/** A handler with its contract types erased: what the dispatcher calls. */
export interface AnyReply {
  status: number;
  body: unknown;
  headers?: Record<string, string>;
  stream?: NodeJS.ReadableStream;
}

export type AnyHandler = (input: {
  params: Record<string, string>;
  query: unknown;
  body: unknown;
  ctx: RequestContext;
  services: Services;
  req: Request;
  res: Response;
}) => Promise<AnyReply>;

/** The caller's identity on an authenticated operation (the kernel guarantees it is there). */
export function callerOf(ctx: RequestContext): AuthContext {
  if (!ctx.auth) throw new Error(`operation ${ctx.operation?.operationId} has no authenticated caller`);
  return ctx.auth;
}
