/** A local HTTP endpoint for webhook tests: records every request and answers with scripted statuses per path. */
import { createHmac, timingSafeEqual } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Received {
  path: string;
  headers: http.IncomingHttpHeaders;
  body: string;
}

export interface Receiver {
  url(path: string): string;
  /** Statuses the path answers with, one per request, then 200. */
  script(path: string, statuses: number[]): void;
  received(path: string): Received[];
  /** Waits until the path got `count` requests (or fails after `within` ms: the suite's own time-out, not a timing assertion). */
  waitFor(path: string, count: number, within?: number): Promise<Received[]>;
  close(): Promise<void>;
}

export async function startReceiver(): Promise<Receiver> {
  const requests: Received[] = [];
  const scripts = new Map<string, number[]>();
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const path = req.url ?? '/';
      requests.push({ path, headers: req.headers, body: Buffer.concat(chunks).toString('utf8') });
      const status = scripts.get(path)?.shift() ?? 200;
      res.writeHead(status, { 'content-type': 'text/plain' });
      res.end(status >= 400 ? `refused with ${status} ${'x'.repeat(5000)}` : 'ok');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const received = (path: string) => requests.filter((r) => r.path === path);
  return {
    url: (path) => `${base}${path}`,
    script: (path, statuses) => scripts.set(path, [...statuses]),
    received,
    async waitFor(path, count, within = 30_000) {
      const until = Date.now() + within;
      while (received(path).length < count) {
        if (Date.now() > until) throw new Error(`${path} got ${received(path).length} of ${count} requests`);
        await new Promise((r) => setTimeout(r, 20));
      }
      return received(path);
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/**
 * Standard Webhooks verification written apart from the service's signer: true when one of the header's
 * `v1,` signatures is the HMAC-SHA256 of "id.timestamp.body" under the secret's decoded bytes.
 */
export function verifySignature(secret: string, request: Received): boolean {
  const key = Buffer.from(secret.replace(/^whsec_/, ''), 'base64');
  const signed = `${request.headers['webhook-id']}.${request.headers['webhook-timestamp']}.${request.body}`;
  const expected = createHmac('sha256', key).update(signed).digest();
  return String(request.headers['webhook-signature'] ?? '')
    .split(' ')
    .filter((s) => s.startsWith('v1,'))
    .some((s) => {
      const given = Buffer.from(s.slice(3), 'base64');
      return given.length === expected.length && timingSafeEqual(given, expected);
    });
}
