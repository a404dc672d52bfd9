/**
 * Interactive API docs at `/docs`: Swagger UI, its assets served from the installed swagger-ui-dist
 * package (no CDN: the page works offline and loads nothing from another origin), reading the served
 * document at /v1/openapi.json. A page for people, not an API operation: it is mounted before the
 * operation matcher and is not part of the OpenAPI document.
 */
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import path from 'node:path';
import express, { type Request, type Response } from 'express';

export const DOCS_PATH = '/docs';
const API_DOCUMENT_URL = '/v1/openapi.json';

/** The swagger-ui-dist files the page loads, with their media types. */
const ASSETS: Record<string, string> = {
  'swagger-ui.css': 'text/css; charset=utf-8',
  'swagger-ui-bundle.js': 'text/javascript; charset=utf-8',
  'favicon-32x32.png': 'image/png',
  'favicon-16x16.png': 'image/png',
};

/**
 * Everything the page needs comes from this origin. Swagger UI sets inline styles, and shows icons as
 * data: URIs; "Try it out" calls the API on this origin. No inline script: the initializer is a file.
 */
const PAGE_POLICY = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "font-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

const PAGE = `<!DOCTYPE html>
<html lang="en">
  <head>
    <meta charset="UTF-8">
    <title>Tessera API</title>
    <link rel="stylesheet" type="text/css" href="${DOCS_PATH}/swagger-ui.css">
    <link rel="stylesheet" type="text/css" href="${DOCS_PATH}/docs.css">
    <link rel="icon" type="image/png" href="${DOCS_PATH}/favicon-32x32.png" sizes="32x32">
    <link rel="icon" type="image/png" href="${DOCS_PATH}/favicon-16x16.png" sizes="16x16">
  </head>
  <body>
    <div id="swagger-ui"></div>
    <script src="${DOCS_PATH}/swagger-ui-bundle.js" charset="UTF-8"></script>
    <script src="${DOCS_PATH}/initializer.js" charset="UTF-8"></script>
  </body>
</html>
`;

// validatorUrl null: the default sends the document to validator.swagger.io for a badge.
const INITIALIZER = `window.addEventListener('load', function () {
  window.ui = SwaggerUIBundle({
    url: ${JSON.stringify(API_DOCUMENT_URL)},
    dom_id: '#swagger-ui',
    deepLinking: true,
    validatorUrl: null,
    presets: [SwaggerUIBundle.presets.apis],
    layout: 'BaseLayout',
  });
});
`;

const PAGE_STYLE = `html { box-sizing: border-box; overflow-y: scroll; }
*, *:before, *:after { box-sizing: inherit; }
body { margin: 0; background: #fafafa; }
`;

function assetDirectory(): string {
  const require = createRequire(import.meta.url);
  return path.dirname(require.resolve('swagger-ui-dist/package.json'));
}

function send(res: Response, type: string, body: string | Buffer, cache: string): void {
  res.setHeader('Content-Type', type);
  res.setHeader('Cache-Control', cache);
  res.status(200).send(body);
}

/** GET /docs (the page) and GET /docs/<asset>. Asset files are read once, on first request. */
export function apiDocsRouter(): express.Router {
  const router = express.Router({ strict: true });
  const directory = assetDirectory();
  const cache = new Map<string, Promise<Buffer>>();

  const page = (_req: Request, res: Response): void => {
    res.setHeader('Content-Security-Policy', PAGE_POLICY);
    res.setHeader('X-Frame-Options', 'DENY');
    res.setHeader('Referrer-Policy', 'no-referrer');
    send(res, 'text/html; charset=utf-8', PAGE, 'no-cache');
  };
  router.get(DOCS_PATH, page);
  router.get(`${DOCS_PATH}/`, page);
  router.get(`${DOCS_PATH}/initializer.js`, (_req, res) => send(res, 'text/javascript; charset=utf-8', INITIALIZER, 'no-cache'));
  router.get(`${DOCS_PATH}/docs.css`, (_req, res) => send(res, 'text/css; charset=utf-8', PAGE_STYLE, 'no-cache'));
  for (const [file, type] of Object.entries(ASSETS)) {
    router.get(`${DOCS_PATH}/${file}`, async (_req, res, next) => {
      try {
        let bytes = cache.get(file);
        if (!bytes) {
          bytes = readFile(path.join(directory, file));
          cache.set(file, bytes);
          bytes.catch(() => cache.delete(file));
        }
        send(res, type, await bytes, 'public, max-age=3600');
      } catch (err) {
        next(err);
      }
    });
  }
  return router;
}
