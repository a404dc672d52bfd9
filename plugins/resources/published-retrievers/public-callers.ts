/**
 * Who may use a published retriever without an API key, decided in one place (`authorizePublicCaller`):
 * no key, or the publication's own `prk_` key (deprecated), in `X-Public-API-Key`; a password-protected
 * publication also needs `X-Retriever-Password` (or that `prk_` key, which only a correct verify hands out).
 * A retriever key (`ret_sk_`, made by the owner) or a marketplace key (`sk_marketplace_`, got by subscribing)
 * bound to this publication's retriever is accepted too, from its allowed origins (a request without `Origin`
 * is no browser request and is not affected), until it expires or is revoked; a marketplace key only while
 * the publication is listed in the marketplace. Those keys are credentials the owner issued, so they need no
 * password.
 * Wrong passwords are counted per visitor address and public name: past the limit every guess is a 429,
 * right or wrong, until the window ends.
 */
import type { Request } from 'express';
import { clientAddress } from '../../../kernel/auth/authenticator.js';
import { looksLikeBoundKey, verifyBoundKey, type BoundKeyGrant } from '../../../kernel/auth/bound-keys.js';
import type { KeyStore } from '../../../kernel/auth/key-store.js';
import type { RateLimiter } from '../../../kernel/auth/rate-limiter.js';
import type { Clock } from '../../../kernel/clock.js';
import { AuthenticationError, NotAllowedError, NotFoundError, RateLimitError } from '../../../kernel/errors.js';
import { passwordMatches } from './passwords.js';
import { PUBLIC_KEY_PREFIX, publicKeyHash } from './public-keys.js';
import type { PublicationRow, PublishedStore } from './store.js';

/** Wrong passwords allowed per visitor address and public name in one window. */
export const PASSWORD_FAILURES_ALLOWED = 10;
export const PASSWORD_FAILURE_WINDOW_MS = 15 * 60_000;

export type PublicCaller =
  | { kind: 'anonymous' }
  | { kind: 'public_api_key' }
  | { kind: 'retriever_key'; keyId: string }
  | { kind: 'marketplace_key'; keyId: string; subscriberOrganizationId: string };

export interface PublicCallerInput {
  row: PublicationRow;
  apiKey: string | undefined;
  password: string | undefined;
  /** Execute and template need the password of a protected publication; interactions never do. */
  needsPassword: boolean;
  visitor: string;
  /** The request's `Origin` header: checked against a bound key's `allowed_origins`. */
  origin: string | undefined;
}

export interface PublicAccess {
  store: PublishedStore;
  limiter: RateLimiter;
  keys: KeyStore;
  clock: Clock;
  /** Failed key checks per visitor address per minute (shared with `Authorization: Bearer` failures); 0: off. */
  failedKeysPerMinute: number;
}

/** The visitor's address, as the API's trusted proxies report it. */
export function visitorOf(req: Request, trustedProxyHops: number): string {
  return clientAddress(req.socket.remoteAddress, req.get('x-forwarded-for'), trustedProxyHops);
}

/** The active publication at this name; a 404 otherwise (an unpublished or inactive name answers nothing). */
export async function activePublication(store: PublishedStore, publicName: string): Promise<PublicationRow> {
  const row = await store.row(publicName);
  if (!row || !row.active) throw new NotFoundError(`No published retriever is named '${publicName}'`, { public_name: publicName });
  return row;
}

export async function authorizePublicCaller(access: PublicAccess, input: PublicCallerInput): Promise<PublicCaller> {
  const { row, apiKey } = input;
  if (apiKey !== undefined) {
    if (apiKey.startsWith(PUBLIC_KEY_PREFIX)) {
      if (publicKeyHash(apiKey) !== row.api_key_hash) {
        throw new AuthenticationError(`X-Public-API-Key is not the public_api_key of '${row.public_name}': send this retriever's key, or none`);
      }
      return { kind: 'public_api_key' };
    }
    if (looksLikeBoundKey(apiKey)) return authorizeBoundKey(access, row, apiKey, input.origin, input.visitor);
    throw new AuthenticationError(
      'X-Public-API-Key must be empty, the prk_ public key of this retriever, a ret_sk_ retriever key or a sk_marketplace_ marketplace key',
    );
  }
  if (input.needsPassword && row.password_hash !== null) {
    if (input.password === undefined) {
      throw new AuthenticationError(
        `'${row.public_name}' is password-protected: send X-Retriever-Password, or the public_api_key that POST /v1/public/retrievers/${row.public_name}/verify returns`,
      );
    }
    if (!(await checkPassword(access, row, input.password, input.visitor))) {
      throw new NotAllowedError(`Wrong X-Retriever-Password for '${row.public_name}'`);
    }
  }
  return { kind: 'anonymous' };
}

/** A `ret_sk_` or `sk_marketplace_` key: valid, from an allowed origin, and bound to this publication's retriever. */
async function authorizeBoundKey(access: PublicAccess, row: PublicationRow, apiKey: string, origin: string | undefined, visitor: string): Promise<PublicCaller> {
  const grant = await verifyPublicKey(access, apiKey, origin, visitor);
  if (grant.retrieverId !== row.retriever_id || grant.retrieverOrganizationId !== row.organization_id) {
    throw new NotAllowedError(
      grant.keyType === 'retriever'
        ? `This ret_sk_ key executes another retriever, not '${row.public_name}': a retriever key works only for the retriever it was made for`
        : `This sk_marketplace_ key is for another marketplace retriever, not '${row.public_name}': subscribe to '${row.public_name}' for a key of its own`,
    );
  }
  if (grant.keyType === 'marketplace') {
    if (!row.marketplace_listed) {
      throw new NotAllowedError(`'${row.public_name}' is no longer listed in the marketplace: its marketplace keys do not work while it is not listed`);
    }
    return { kind: 'marketplace_key', keyId: grant.keyId, subscriberOrganizationId: grant.keyOrganizationId };
  }
  return { kind: 'retriever_key', keyId: grant.keyId };
}

/**
 * A `ret_sk_`/`sk_marketplace_` key checked under the same per-address ceiling on failures as `Authorization:
 * Bearer` keys (one budget, `unauthenticated:<address>`): an address past it gets a 429 and no more database
 * lookups this minute, unless its key is already known to this process.
 */
export async function verifyPublicKey(access: PublicAccess, apiKey: string, origin: string | undefined, visitor: string): Promise<BoundKeyGrant> {
  const limit = access.failedKeysPerMinute;
  const subject = `unauthenticated:${visitor}`;
  if (limit > 0 && !access.keys.findCachedByPlaintext(apiKey) && (await access.limiter.exhausted(subject, limit))) {
    throw tooManyFailedKeys(limit, 60);
  }
  try {
    return await verifyBoundKey(access.keys, access.clock, apiKey, origin);
  } catch (err) {
    if (limit > 0 && err instanceof AuthenticationError) {
      const decision = await access.limiter.consume(subject, limit);
      if (!decision.allowed) throw tooManyFailedKeys(limit, decision.resetSeconds);
    }
    throw err;
  }
}

function tooManyFailedKeys(limit: number, retryAfterSeconds: number): RateLimitError {
  return new RateLimitError(
    `Too many requests without a valid API key from this address (limit ${limit} per minute); retry in ${retryAfterSeconds} s with a valid key`,
    retryAfterSeconds,
    { limit, retry_after_seconds: retryAfterSeconds },
  );
}

/** Who an execution or interaction is recorded as, in the owner's history and signals. */
export function actorOf(caller: PublicCaller, row: PublicationRow): string {
  switch (caller.kind) {
    case 'retriever_key':
      return `public:${row.public_name}:retriever_key:${caller.keyId}`;
    case 'marketplace_key':
      // The subscriber's key id is another organization's: the owner sees only that it came through the marketplace.
      return `public:${row.public_name}:marketplace`;
    default:
      return `public:${row.public_name}`;
  }
}

/** Whether the password is right, counting wrong ones against the visitor (a 429 once over the limit). */
export async function checkPassword(access: PublicAccess, row: PublicationRow, password: string, visitor: string): Promise<boolean> {
  const subject = `published:${row.publication_id}:password-failures:${visitor}`;
  if (await access.limiter.exhausted(subject, PASSWORD_FAILURES_ALLOWED, PASSWORD_FAILURE_WINDOW_MS)) throw tooManyGuesses(row, PASSWORD_FAILURE_WINDOW_MS / 1000);
  if (row.password_hash !== null && (await passwordMatches(password, row.password_hash))) return true;
  const decision = await access.limiter.consume(subject, PASSWORD_FAILURES_ALLOWED, PASSWORD_FAILURE_WINDOW_MS);
  if (!decision.allowed) throw tooManyGuesses(row, decision.resetSeconds);
  return false;
}

function tooManyGuesses(row: PublicationRow, retryAfterSeconds: number): RateLimitError {
  return new RateLimitError(
    `Too many wrong passwords for '${row.public_name}' from this address (${PASSWORD_FAILURES_ALLOWED} per ${PASSWORD_FAILURE_WINDOW_MS / 60_000} minutes); retry later`,
    retryAfterSeconds,
    { limit: PASSWORD_FAILURES_ALLOWED, retry_after_seconds: retryAfterSeconds },
  );
}
