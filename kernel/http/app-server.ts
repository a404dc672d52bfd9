/**
 * The HTTP server for the express app, with its requests and responses born with the app's prototypes.
 *
 * express gives every request and response its own prototype as it arrives (`Object.setPrototypeOf(req,
 * app.request)`, the same for `res`). In V8 that change of prototype on a young object keeps objects of the
 * request alive through the next young-generation collection, and on into the old generation, long after
 * the request ended, until a full collection: measured with a bare express app answering one client's JSON
 * POSTs (5,000 requests, `node --trace-gc-nvp`), 46 MB promoted and 55 scavenges against 0.1 MB and 182
 * scavenges when the objects are born with the app's prototypes, so that express's own call changes
 * nothing (setting the prototype an object already has is a no-op). A plain node:http server promotes the
 * same 0.1 MB. Those survivors are the copying work of the API thread's young collections, the tail of
 * its latency.
 */
import { createServer, IncomingMessage, ServerResponse, type Server } from 'node:http';
import type { Socket } from 'node:net';
import type { Express } from 'express';

/** Request and response constructors whose instances have exactly the app's objects as prototypes. */
export function appMessageClasses(app: Express): { IncomingMessage: typeof IncomingMessage; ServerResponse: typeof ServerResponse } {
  // Constructor functions rather than classes: a class would put its own prototype in between.
  function AppRequest(this: IncomingMessage, socket: Socket): void {
    Reflect.apply(IncomingMessage, this, [socket]);
  }
  AppRequest.prototype = app.request;
  function AppResponse(this: ServerResponse, req: IncomingMessage, options?: unknown): void {
    Reflect.apply(ServerResponse, this, [req, options]);
  }
  AppResponse.prototype = app.response;
  return { IncomingMessage: AppRequest as unknown as typeof IncomingMessage, ServerResponse: AppResponse as unknown as typeof ServerResponse };
}

export function createAppServer(app: Express): Server {
  return createServer(appMessageClasses(app), app);
}
