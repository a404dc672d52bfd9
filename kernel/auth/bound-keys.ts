/**
 * Keys bound to one retriever (`ret_sk_`, `sk_marketplace_`) as the public execute endpoints accept them.
 * They never authenticate a `Authorization: Bearer` route (Authenticator refuses them with the message
 * below); the public endpoints read them from `X-Public-API-Key` and check them here: known and active,
 * not expired, sent from an allowed origin. Which retriever they unlock, and whether it is published, is
 * the public endpoint's check (it knows the published record).
 */
import type { Clock } from '../clock.js';
import { AuthenticationError, NotAllowedError } from '../errors.js';
import { isAcceptableOperatorKey, isBoundKeyType, KEY_PREFIXES, keyTypeOfSecret, type BoundKeyType } from './keys.js';
import { keyStatus, type KeyStore } from './key-store.js';
import { originAllowed } from './origins.js';

/** What a verified bound key grants: the execution of one retriever. */
export interface BoundKeyGrant {
  keyId: string;
  keyType: BoundKeyType;
  /** The organization the key belongs to (the publisher for `ret_sk_`, the subscriber for `sk_marketplace_`). */
  keyOrganizationId: string;
  /** The retriever it executes, and that retriever's organization. */
  retrieverId: string;
  retrieverOrganizationId: string;
}

const WHAT_IT_CAN_DO: Record<BoundKeyType, string> = {
  retriever: 'A retriever key (ret_sk_) can only execute the one published retriever it was made for',
  marketplace: 'A marketplace key (sk_marketplace_) can only execute the one marketplace retriever it was subscribed to',
};

const HOW: string =
  'send it in the X-Public-API-Key header to POST /v1/public/retrievers/execute (the key names the retriever) ' +
  'or to POST /v1/public/retrievers/{public_name}/execute';

/** The 403 every authenticated route answers a bound key with, saying what the key is for. */
export function boundKeyRefusal(type: BoundKeyType): NotAllowedError {
  return new NotAllowedError(`${WHAT_IT_CAN_DO[type]}: ${HOW}. Use an organization API key for this endpoint.`, {
    key_type: type,
    allowed: ['POST /v1/public/retrievers/execute', 'POST /v1/public/retrievers/{public_name}/execute'],
  });
}

/** True when a secret claims to be a bound key by its prefix (the public endpoints route on this). */
export function looksLikeBoundKey(secret: string): boolean {
  const type = keyTypeOfSecret(secret);
  return type !== undefined && isBoundKeyType(type);
}

export const BOUND_KEY_PREFIXES = [KEY_PREFIXES.retriever, KEY_PREFIXES.marketplace] as const;

/**
 * Checks a bound key sent to a public endpoint. `origin` is the request's `Origin` header: a browser request
 * must come from one of the key's `allowed_origins` (when it has any); a request without `Origin` (a server,
 * curl) is not a browser request and is not affected, as for every other key (allowed_origins is defense in
 * depth: the key itself is the credential).
 */
export async function verifyBoundKey(keys: KeyStore, clock: Clock, secret: string, origin: string | undefined): Promise<BoundKeyGrant> {
  if (!looksLikeBoundKey(secret) || !isAcceptableOperatorKey(secret)) throw new AuthenticationError('Invalid API key');
  const key = await keys.findByPlaintext(secret);
  if (!key || !isBoundKeyType(key.key_type) || key.bound_retriever_id === null || key.bound_organization_id === null) throw new AuthenticationError('Invalid API key');
  const now = clock.now();
  if (keyStatus(key, now) === 'expired') {
    throw new AuthenticationError('API key has expired: ask the retriever owner for a new key', { expired_at: key.expires_at?.toISOString() });
  }
  if (origin !== undefined && !originAllowed(key.allowed_origins, origin)) {
    throw new NotAllowedError(`Origin ${origin} is not allowed for this API key`, { origin });
  }
  keys.noteUsed(key.key_id, now);
  return { keyId: key.key_id, keyType: key.key_type, keyOrganizationId: key.organization_id, retrieverId: key.bound_retriever_id,
    retrieverOrganizationId: key.bound_organization_id };
}
