/**
 * One delivery attempt: a JSON POST with the Standard Webhooks headers, under a time limit, to an address
 * checked when the connection is made (a name that resolves to a private address is refused then, so DNS
 * cannot be switched after the URL was accepted). Redirects are not followed: the URL registered is the
 * one called. Only the start of the answer is kept.
 */
import http, { type IncomingMessage } from 'node:http';
import https from 'node:https';
import { BlockedAddressError, guardedLookup } from '../../../kernel/net/safe-fetch.js';

/** Characters of the answer's body kept for the deliveries list. */
export const RESPONSE_BODY_LIMIT = 2048;
/** Bytes read from the answer at most (the rest is dropped unread). */
const READ_LIMIT = 16 * 1024;

export interface SendRequest {
  url: string;
  headers: Record<string, string>;
  body: string;
  timeoutMs: number;
  allowPrivate: boolean;
}

export interface SendResult {
  /** The answer's status; null when there was none (network error, timeout, refused address). */
  status: number | null;
  body: string | null;
  error: string | null;
  /** `Retry-After` of the answer in ms, when it gave one in seconds. */
  retryAfterMs: number | null;
  /** False when retrying cannot help (the address is refused). */
  retryable: boolean;
  durationMs: number;
}

export function sendWebhook(request: SendRequest): Promise<SendResult> {
  const started = Date.now();
  const done = (partial: Omit<SendResult, 'durationMs'>): SendResult => ({ ...partial, durationMs: Date.now() - started });
  return new Promise((resolve) => {
    let url: URL;
    try {
      url = new URL(request.url);
    } catch {
      return resolve(done({ status: null, body: null, error: 'the webhook URL does not parse', retryAfterMs: null, retryable: false }));
    }
    const client = url.protocol === 'https:' ? https : http;
    const req = client.request(url, {
      method: 'POST',
      lookup: guardedLookup(request.allowPrivate),
      headers: { 'content-type': 'application/json', 'user-agent': 'tessera-webhooks/1', 'content-length': Buffer.byteLength(request.body), ...request.headers },
    });
    const timer = setTimeout(() => req.destroy(new TimeoutError(`no complete answer within ${request.timeoutMs} ms`)), request.timeoutMs);
    req.on('response', (res: IncomingMessage) => {
      const chunks: Buffer[] = [];
      let read = 0;
      res.on('data', (chunk: Buffer) => {
        if (read < READ_LIMIT) chunks.push(chunk);
        read += chunk.length;
        if (read >= READ_LIMIT) res.destroy();
      });
      const finish = () => {
        clearTimeout(timer);
        const status = res.statusCode ?? 0;
        const text = Buffer.concat(chunks).toString('utf8').slice(0, RESPONSE_BODY_LIMIT);
        const redirect = status >= 300 && status < 400;
        resolve(done({
          status,
          body: text,
          error: redirect ? `answered ${status}: redirects are not followed, register the final URL` : null,
          retryAfterMs: retryAfterMs(res.headers['retry-after']),
          retryable: true,
        }));
      };
      res.on('end', finish);
      res.on('close', finish);
      res.on('error', finish);
    });
    req.on('error', (err) => {
      clearTimeout(timer);
      const blocked = err instanceof BlockedAddressError;
      resolve(done({
        status: null,
        body: null,
        error: blocked ? `${err.message}; webhooks can only call public addresses` : err instanceof TimeoutError ? err.message : `could not connect: ${err.message}`,
        retryAfterMs: null,
        retryable: !blocked,
      }));
    });
    req.end(request.body);
  });
}

class TimeoutError extends Error {}

function retryAfterMs(header: string | string[] | undefined): number | null {
  const value = Array.isArray(header) ? header[0] : header;
  if (!value || !/^\d{1,7}$/.test(value.trim())) return null;
  return Number(value.trim()) * 1000;
}
