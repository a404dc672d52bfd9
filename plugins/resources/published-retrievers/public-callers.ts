/**
 * Who may use a published retriever without an API key, decided in one place (`authorizePublicCaller`):
 * no key, or the publication's own `prk_` key (deprecated), in `X-Public-API-Key`; a password-protected
 * publication also needs `X-Retriever-Password` (or that `prk_` key, which only a correct verify hands out).
 * Retriever (`ret_sk_`) and marketplace (`sk_marketplace_`) keys are further branches of this function.
 * Wrong passwords are counted per visitor address and public name: past the limit every guess is a 429,
 * right or wrong, until the window ends.
 */
import type { Request } from 'express';
import { clientAddress } from '../../../kernel/auth/authenticator.js';
import type { RateLimiter } from '../../../kernel/auth/rate-limiter.js';
import { AuthenticationError, NotAllowedError, NotFoundError, RateLimitError } from '../../../kernel/errors.js';
import { passwordMatches } from './passwords.js';
import { PUBLIC_KEY_PREFIX, publicKeyHash } from './public-keys.js';
import type { PublicationRow, PublishedStore } from './store.js';

/** Wrong passwords allowed per visitor address and public name in one window. */
export const PASSWORD_FAILURES_ALLOWED = 10;
export const PASSWORD_FAILURE_WINDOW_MS = 15 * 60_000;

export type PublicCaller = { kind: 'anonymous' } | { kind: 'public_api_key' };

export interface PublicCallerInput {
  row: PublicationRow;
  apiKey: string | undefined;
  password: string | undefined;
  /** Execute and template need the password of a protected publication; interactions never do. */
  needsPassword: boolean;
  visitor: string;
}

export interface PublicAccess {
  store: PublishedStore;
  limiter: RateLimiter;
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
    throw new AuthenticationError('X-Public-API-Key must be empty or a prk_ public retriever key');
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
