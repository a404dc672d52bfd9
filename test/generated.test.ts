/** generated/ is the output of `npm run generate` from openapi/, byte for byte, and the document is valid. */
import type { AddressInfo } from 'node:net';
import express from 'express';
import { describe, expect, it } from 'vitest';
import { loadApiDocument } from '../kernel/app.js';
import { openApiMiddleware } from '../kernel/http/validation.js';
import { renderTypes, staleGeneratedFiles, type Doc } from '../scripts/generate.js';
import type { components } from '../generated/openapi.js';

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

describe('generated types', () => {
  it('leave defaulted request fields optional and keep defaulted response fields required', async () => {
    const doc = {
      openapi: '3.1.0',
      info: { title: 't', version: '1' },
      paths: {
        '/things': {
          post: {
            operationId: 'createThing',
            requestBody: { required: true, content: { 'application/json': { schema: { $ref: '#/components/schemas/ThingRequest' } } } },
            responses: { '200': { description: 'ok', content: { 'application/json': { schema: { $ref: '#/components/schemas/Thing' } } } } },
          },
        },
      },
      components: {
        schemas: {
          ThingRequest: {
            type: 'object',
            required: ['name'],
            properties: { name: { type: 'string' }, options: { $ref: '#/components/schemas/ThingOptions' } },
          },
          ThingOptions: { type: 'object', properties: { limit: { type: 'integer', default: 10 } } },
          Thing: { type: 'object', properties: { count: { type: 'integer', default: 0 } } },
        },
      },
    } as unknown as Doc;
    const types = await renderTypes(doc);
    // Reached from a request body through a $ref: the server fills the default in, the client may omit it.
    expect(types).toMatch(/limit\?: number;/);
    // Only in responses: the service always sends it.
    expect(types).toMatch(/count: number;/);
  });

  it('let a client leave out what the server defaults', () => {
    // Compile-time checks (tsc runs over the tests): these bodies omit every defaulted field.
    const list: components['schemas']['ObjectListRequest'] = {};
    const key: components['schemas']['ApiKeyCreateRequest'] = { name: 'k' };
    const upload: components['schemas']['UploadCreateRequest'] = { filename: 'a.txt' };
    expect([list, key, upload]).toHaveLength(3);
  });
});
