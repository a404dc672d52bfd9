/**
 * Which URLs a webhook may point at: http(s), no credentials in the URL (they would show in every listing),
 * and no private or loopback address unless the deployment allows it. A literal address or `localhost` is
 * refused here; a name that resolves to a private address is refused when a delivery connects (sender.ts),
 * since what a name resolves to can change after the check.
 */
import ipaddr from 'ipaddr.js';
import { RequestValidationError } from '../../../kernel/errors.js';
import { isPublicAddress } from '../../../kernel/net/safe-fetch.js';

function refuse(msg: string, type: string): never {
  throw new RequestValidationError([{ loc: ['body', 'url'], msg, type }]);
}

export function checkWebhookUrl(raw: string, allowPrivate: boolean): string {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return refuse('must be an absolute http or https URL', 'value_error.url');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') refuse(`must be an http or https URL, not ${url.protocol}`, 'value_error.url.scheme');
  if (url.username || url.password) refuse('must not carry credentials (user:password@); put a token in the path or query instead', 'value_error.url.credentials');
  if (!allowPrivate) {
    const host = url.hostname.replace(/^\[|\]$/g, '').toLowerCase();
    const literal = ipaddr.isValid(host);
    if ((literal && !isPublicAddress(host)) || host === 'localhost' || host.endsWith('.localhost')) {
      refuse(`${url.host} is a private or loopback address; webhooks can only call public addresses`, 'value_error.url.private_address');
    }
  }
  return raw;
}
