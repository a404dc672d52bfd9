/**
 * Turns `Authorization: Bearer <key>` (and the request's `Origin`) into the caller's identity, or a
 * typed 401/403. Runs on every authenticated request, so the common case touches no database, and
 * neither does a refusal: a secret that cannot be a key is refused by its shape, a secret the database
 * did not know is remembered (KeyStore), and a client address that keeps failing is limited per minute
 * (429). The limit counts failures only, so it never slows down a client whose key is valid.
 */
import { AuthenticationError, NotAllowedError, RateLimitError } from '../errors.js';
import type { Clock } from '../clock.js';
import { isAcceptableOperatorKey, isBoundKeyType, type KeyType } from './keys.js';
import { boundKeyRefusal } from './bound-keys.js';
import { keyStatus, type KeyRecord, type KeyStore } from './key-store.js';
import type { RateLimiter } from './rate-limiter.js';
import { originAllowed } from './origins.js';
import type { Permission } from './permissions.js';
import type { ResourceScope } from './scopes.js';

export interface AuthContext {
  organizationId: string;
  organizationName: string;
  userId: string;
  userEmail: string;
  keyId: string;
  keyName: string;
  keyPrefix: string;
  keyType: KeyType;
  permissions: Permission[];
  scopes: ResourceScope[];
  /** Set for `usr_sk_` keys: document reads are filtered to what this principal owns or was granted. */
  principalId: string | null;
  allowedOrigins: string[];
  expiresAt: Date | null;
  /** The effective requests-per-minute ceiling, or null when unlimited. */
  rateLimitPerMinute: number | null;
  isProtected: boolean;
  /** Set for keys bound to one retriever (`ret_sk_`, `sk_marketplace_`): the retriever and its organization. */
  boundRetriever: { retrieverId: string; organizationId: string } | null;
}

export function authContextOf(key: KeyRecord, planLimitPerMinute: number): AuthContext {
  return {
    organizationId: key.organization_id,
    organizationName: key.organization_name,
    userId: key.user_id,
    userEmail: key.user_email,
    keyId: key.key_id,
    keyName: key.name,
    keyPrefix: key.key_prefix,
    keyType: key.key_type,
    permissions: key.permissions,
    scopes: key.scopes,
    principalId: key.principal_id,
    allowedOrigins: key.allowed_origins,
    expiresAt: key.expires_at,
    rateLimitPerMinute: key.rate_limit_override ?? (planLimitPerMinute > 0 ? planLimitPerMinute : null),
    isProtected: key.is_protected,
    boundRetriever:
      key.bound_retriever_id !== null && key.bound_organization_id !== null
        ? { retrieverId: key.bound_retriever_id, organizationId: key.bound_organization_id }
        : null,
  };
}

const BEARER = /^Bearer[ ]+(\S+)\s*$/i;

export interface UnauthenticatedLimit {
  limiter: RateLimiter;
  /** Failed or missing-key requests per client address per minute; 0 turns the limit off. */
  perMinute: number;
  /** Reverse proxies trusted to append to `X-Forwarded-For` (0: the socket address is the client). */
  trustedProxyHops: number;
}

/** Where a request comes from, as the HTTP layer sees it. */
export interface RequestOrigin {
  /** The route takes keys bound to one retriever too (`x-bound-keys`: `GET /v1/me`); every other refuses them. */
  acceptsBoundKeys?: boolean;
  /** `Origin` header (CORS). */
  origin: string | undefined;
  /** The TCP peer. */
  socketAddress: string | undefined;
  /** `X-Forwarded-For`, used only when proxies are trusted. */
  forwardedFor: string | undefined;
  /**
   * Told of the real key a refused request presented (expired, from an origin it does not allow, a bound key
   * off its endpoints), so the request log attributes the refusal to it: the attempts an admin most wants to
   * see in the key's usage. A secret matching no key is attributed to nobody.
   */
  keyRefused?: (key: PresentedKey) => void;
}

/**
 * The client address a limit applies to: the socket peer, or with `hops` trusted proxies the address the
 * outermost trusted proxy saw (entries further left are the client's own claims and can be forged).
 */
export function clientAddress(socketAddress: string | undefined, forwardedFor: string | undefined, hops: number): string {
  const socket = (socketAddress ?? 'unknown').replace(/^::ffff:/, '');
  if (hops <= 0 || !forwardedFor) return socket;
  const chain = forwardedFor.split(',').map((a) => a.trim()).filter(Boolean);
  return chain[Math.max(0, chain.length - hops)] ?? socket;
}

/** The real key a refused request presented (its secret matched): its usage counts the refusal. */
export interface PresentedKey {
  keyId: string;
  organizationId: string;
}

/** `error`, refusing a request that presented the real `key`, after telling the request's `keyRefused`. */
function keyRefusal<E extends Error>(key: KeyRecord, request: RequestOrigin, error: E): E {
  request.keyRefused?.({ keyId: key.key_id, organizationId: key.organization_id });
  return error;
}

export class Authenticator {
  constructor(
    private readonly keys: KeyStore,
    private readonly clock: Clock,
    private readonly planLimitPerMinute: number,
    private readonly unauthenticated?: UnauthenticatedLimit,
  ) {}

  async authenticate(authorization: string | undefined, request: RequestOrigin): Promise<AuthContext> {
    const client = this.unauthenticated?.perMinute
      ? clientAddress(request.socketAddress, request.forwardedFor, this.unauthenticated.trustedProxyHops)
      : undefined;
    const key = await this.identify(authorization, client);
    const status = keyStatus(key, this.clock.now());
    if (status === 'expired') {
      throw keyRefusal(key, request, await this.refusal(client, new AuthenticationError('API key has expired', { expired_at: key.expires_at?.toISOString() })));
    }
    if (request.origin !== undefined && !originAllowed(key.allowed_origins, request.origin)) {
      throw keyRefusal(key, request, new NotAllowedError(`Origin ${request.origin} is not allowed for this API key`, { origin: request.origin }));
    }
    if (isBoundKeyType(key.key_type) && !request.acceptsBoundKeys) throw keyRefusal(key, request, boundKeyRefusal(key.key_type));
    return authContextOf(key, this.planLimitPerMinute);
  }

  private async identify(authorization: string | undefined, client: string | undefined): Promise<KeyRecord> {
    if (!authorization) {
      throw await this.refusal(client, new AuthenticationError('Missing Authorization header: send "Authorization: Bearer <API_KEY>"'));
    }
    const match = BEARER.exec(authorization);
    if (!match) throw await this.refusal(client, new AuthenticationError('The Authorization header must use the Bearer scheme'));
    const secret = match[1]!;
    // Every key Tessera mints or accepts from an operator has this shape: anything else is no key at all.
    if (!isAcceptableOperatorKey(secret)) throw await this.refusal(client, new AuthenticationError('Invalid API key'));
    const cached = this.keys.findCachedByPlaintext(secret);
    if (cached) return cached;
    // An address already over its limit gets no more database lookups this window.
    if (client !== undefined && await this.unauthenticated!.limiter.exhausted(this.subject(client), this.unauthenticated!.perMinute)) {
      throw await this.refusal(client, new AuthenticationError('Invalid API key'));
    }
    const key = await this.keys.findByPlaintext(secret);
    if (!key) throw await this.refusal(client, new AuthenticationError('Invalid API key'));
    return key;
  }

  private subject(client: string): string {
    return `unauthenticated:${client}`;
  }

  /** Counts a failed request against its client address: the refusal itself, or a 429 once over the limit. */
  private async refusal(client: string | undefined, error: AuthenticationError): Promise<Error> {
    if (client === undefined) return error;
    const limit = this.unauthenticated!.perMinute;
    const decision = await this.unauthenticated!.limiter.consume(this.subject(client), limit);
    if (decision.allowed) return error;
    return new RateLimitError(
      `Too many requests without a valid API key from this address (limit ${limit} per minute); retry in ${decision.resetSeconds} s with a valid key`,
      decision.resetSeconds,
      { limit, retry_after_seconds: decision.resetSeconds },
      limit,
    );
  }
}
