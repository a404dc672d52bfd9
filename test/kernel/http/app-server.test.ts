/**
 * The API's HTTP server (kernel/http/app-server.ts): requests and responses are born with the express app's
 * prototypes, so express's per-request Object.setPrototypeOf changes nothing (in V8 that change kept each
 * request's objects alive into the old generation), and express works on them as usual.
 */
import { Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import express from 'express';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { appMessageClasses, createAppServer } from '../../../kernel/http/app-server.js';

describe('the API server', () => {
  const app = express();
  const seen: Array<{ request: boolean; response: boolean }> = [];
  app.use(express.json());
  app.post('/echo', (req, res) => {
    seen.push({ request: Object.getPrototypeOf(req) === app.request, response: Object.getPrototypeOf(res) === app.response });
    res.status(201).json({ got: req.body, type: req.get('content-type'), ip: typeof req.ip });
  });
  app.get('/fail', () => {
    throw new Error('boom');
  });
  app.use((err: Error, _req: express.Request, res: express.Response, _next: express.NextFunction) => void res.status(500).json({ error: err.message }));
  const server = createAppServer(app);
  let url: string;

  beforeAll(async () => {
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    await new Promise((resolve) => server.close(resolve));
  });

  it('makes requests and responses whose prototypes are the app’s own from the start', () => {
    const { IncomingMessage, ServerResponse } = appMessageClasses(app);
    const socket = new Socket();
    const req = new IncomingMessage(socket);
    const res = new ServerResponse(req);
    expect(Object.getPrototypeOf(req)).toBe(app.request);
    expect(Object.getPrototypeOf(res)).toBe(app.response);
    expect(req.readable).toBe(true);
    expect(res.statusCode).toBe(200);
    socket.destroy();
  });

  it('serves express routes, body parsing, helpers and error handlers as usual', async () => {
    const echo = await fetch(`${url}/echo`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ a: [1, 2] }) });
    expect(echo.status).toBe(201);
    expect(await echo.json()).toEqual({ got: { a: [1, 2] }, type: 'application/json', ip: 'string' });
    expect(seen).toEqual([{ request: true, response: true }]);
    const failed = await fetch(`${url}/fail`);
    expect(failed.status).toBe(500);
    expect(await failed.json()).toEqual({ error: 'boom' });
  });
});
