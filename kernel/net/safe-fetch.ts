/**
 * Fetching a URL on a user's behalf without becoming a proxy into the private network: http(s) only,
 * every address the name resolves to is checked at connect time (no DNS-rebinding window), redirects are
 * followed by hand and re-checked, and the body is streamed under a size and a time limit.
 */
import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import http, { type IncomingMessage } from 'node:http';
import https from 'node:https';
import type { LookupFunction } from 'node:net';
import { Transform, type Readable } from 'node:stream';
import ipaddr from 'ipaddr.js';
import { InputError, PayloadTooLargeError } from '../errors.js';

export interface SafeFetchOptions {
  allowPrivate: boolean;
  timeoutMs: number;
  maxBytes: number;
  maxRedirects?: number;
}

export interface FetchedBody {
  body: Readable;
  finalUrl: string;
  declaredType: string | undefined;
  declaredSize: number | undefined;
  filename: string | undefined;
}

/** Only globally routable unicast addresses are public. */
export function isPublicAddress(address: string): boolean {
  if (!ipaddr.isValid(address)) return false;
  let parsed = ipaddr.parse(address);
  if (parsed.kind() === 'ipv6' && (parsed as ipaddr.IPv6).isIPv4MappedAddress()) parsed = (parsed as ipaddr.IPv6).toIPv4Address();
  return parsed.range() === 'unicast';
}

/** A name resolved to an address the caller may not reach (see guardedLookup). */
export class BlockedAddressError extends Error {}

/** A DNS lookup for http(s).request that refuses private and loopback addresses at connect time (no rebinding window). */
export function guardedLookup(allowPrivate: boolean): LookupFunction {
  return (hostname, options, callback) => {
    dnsLookup(hostname, { ...options, all: true }, (err, addresses) => {
      if (err) return callback(err, '', 0);
      const list = addresses as unknown as LookupAddress[];
      const blocked = list.find((a) => !allowPrivate && !isPublicAddress(a.address));
      if (blocked) {
        return callback(new BlockedAddressError(`${hostname} resolves to ${blocked.address}, a private or loopback address`), '', 0);
      }
      if ((options as { all?: boolean }).all) return (callback as unknown as (e: null, a: LookupAddress[]) => void)(null, list);
      const first = list[0]!;
      callback(null, first.address, first.family);
    });
  };
}

function limitBytes(maxBytes: number): Transform {
  let seen = 0;
  return new Transform({
    transform(chunk: Buffer, _encoding, done) {
      seen += chunk.length;
      if (seen > maxBytes) return done(new PayloadTooLargeError(`The URL's content is larger than ${maxBytes} bytes`));
      done(null, chunk);
    },
  });
}

function filenameOf(url: URL, disposition: string | undefined): string | undefined {
  const fromHeader = disposition && /filename\*?=(?:UTF-8'')?"?([^";]+)"?/i.exec(disposition)?.[1];
  if (fromHeader) return decodeURIComponent(fromHeader).slice(0, 255);
  const last = url.pathname.split('/').filter(Boolean).pop();
  return last ? decodeURIComponent(last).slice(0, 255) : undefined;
}

export async function safeFetch(rawUrl: string, options: SafeFetchOptions): Promise<FetchedBody> {
  let url: URL;
  try {
    url = new URL(rawUrl);
  } catch {
    throw new InputError(`Not a URL: ${rawUrl}`);
  }
  const deadline = Date.now() + options.timeoutMs;
  for (let redirects = 0; ; redirects++) {
    if (url.protocol !== 'http:' && url.protocol !== 'https:') {
      throw new InputError(`Only http and https URLs can be fetched, not ${url.protocol}`, { url: url.toString() });
    }
    const literal = url.hostname.replace(/^\[|\]$/g, '');
    if (ipaddr.isValid(literal) && !options.allowPrivate && !isPublicAddress(literal)) {
      throw new InputError(`${url.host} is a private or loopback address; fetching it is not allowed`, { url: url.toString() });
    }
    const response = await request(url, options, deadline);
    const status = response.statusCode ?? 0;
    if (status >= 300 && status < 400 && response.headers.location) {
      response.resume();
      if (redirects >= (options.maxRedirects ?? 3)) throw new InputError(`Too many redirects fetching ${rawUrl}`);
      url = new URL(response.headers.location, url);
      continue;
    }
    if (status < 200 || status >= 300) {
      response.resume();
      throw new InputError(`Fetching ${url} answered HTTP ${status}`, { url: url.toString(), status });
    }
    const declaredSize = response.headers['content-length'] ? Number(response.headers['content-length']) : undefined;
    if (declaredSize !== undefined && declaredSize > options.maxBytes) {
      response.destroy();
      throw new PayloadTooLargeError(`The URL's content (${declaredSize} bytes) is larger than ${options.maxBytes} bytes`);
    }
    const remaining = Math.max(1, deadline - Date.now());
    const timer = setTimeout(() => response.destroy(new InputError(`Fetching ${url} took longer than ${options.timeoutMs} ms`)), remaining);
    response.on('close', () => clearTimeout(timer));
    const body = response.pipe(limitBytes(options.maxBytes));
    response.on('error', (err) => body.destroy(err));
    return {
      body,
      finalUrl: url.toString(),
      declaredType: response.headers['content-type'],
      declaredSize,
      filename: filenameOf(url, response.headers['content-disposition']),
    };
  }
}

function request(url: URL, options: SafeFetchOptions, deadline: number): Promise<IncomingMessage> {
  return new Promise((resolve, reject) => {
    const client = url.protocol === 'https:' ? https : http;
    const req = client.get(url, { lookup: guardedLookup(options.allowPrivate), headers: { 'user-agent': 'tessera-fetch/1' } }, resolve);
    const timer = setTimeout(() => req.destroy(new Error('timeout')), Math.max(1, deadline - Date.now()));
    req.on('response', () => clearTimeout(timer));
    req.on('error', (err) => {
      clearTimeout(timer);
      if (err instanceof BlockedAddressError) reject(new InputError(`${err.message}; fetching it is not allowed`, { url: url.toString() }));
      else if (err.message === 'timeout') reject(new InputError(`Fetching ${url} took longer than ${options.timeoutMs} ms`));
      else reject(new InputError(`Fetching ${url} failed: ${err.message}`, { url: url.toString() }));
    });
  });
}
