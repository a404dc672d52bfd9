/** generated/ is the output of `npm run generate` from openapi/, byte for byte, and the document is valid. */
import type { AddressInfo } from 'node:net';
import express from 'express';
import { describe, expect, it } from 'vitest';
import { loadApiDocument } from '../kernel/app.js';
import { openApiMiddleware } from '../kernel/http/validation.js';
import { staleGeneratedFiles } from '../scripts/generate.js';

describe('generated/', () => {
  it('matches what openapi/ generates (run `npm run generate` after changing the contract)', async () => {
    expect(await staleGeneratedFiles()).toEqual([]);
  });

  it('is a valid OpenAPI document (checked whole by the validator the service uses per path)', async () => {
    const doc = await loadApiDocument();
    const app = express();
    app.use(openApiMiddleware(doc, { apiDocument: doc, validateResponses: false }, true));
    app.get('/v1/health', (_req, res) => void res.json({ ok: true }));
    let failure: unknown;
    app.use((err: unknown, _req: express.Request, res: express.Response, _next: express.NextFunction) => {
      failure = err;
      res.status(500).end();
    });
    const server = await new Promise<import('node:http').Server>((resolve) => {
      const s = app.listen(0, '127.0.0.1', () => resolve(s));
    });
    try {
      const res = await fetch(`http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/health`);
      expect(failure).toBeUndefined();
      expect(res.status).toBe(200);
    } finally {
      server.close();
    }
  });
});
