/**
 * Turns `Authorization: Bearer <key>` (and the request's `Origin`) into the caller's identity, or a
 * typed 401/403. Runs on every authenticated request, so the common case touches no database.
 */
import { AuthenticationError, NotAllowedError } from '../errors.js';
import type { Clock } from '../clock.js';
import type { KeyType } from './keys.js';
import { keyStatus, type KeyRecord, type KeyStore } from './key-store.js';
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
  };
}

const BEARER = /^Bearer[ ]+(\S+)\s*$/i;

export class Authenticator {
  constructor(
    private readonly keys: KeyStore,
    private readonly clock: Clock,
    private readonly planLimitPerMinute: number,
  ) {}

  async authenticate(authorization: string | undefined, origin: string | undefined): Promise<AuthContext> {
    if (!authorization) {
      throw new AuthenticationError('Missing Authorization header: send "Authorization: Bearer <API_KEY>"');
    }
    const match = BEARER.exec(authorization);
    if (!match) throw new AuthenticationError('The Authorization header must use the Bearer scheme');
    const key = await this.keys.findByPlaintext(match[1]!);
    if (!key) throw new AuthenticationError('Invalid API key');
    const status = keyStatus(key, this.clock.now());
    if (status === 'expired') {
      throw new AuthenticationError('API key has expired', { expired_at: key.expires_at?.toISOString() });
    }
    if (origin !== undefined && !originAllowed(key.allowed_origins, origin)) {
      throw new NotAllowedError(`Origin ${origin} is not allowed for this API key`, { origin });
    }
    return authContextOf(key, this.planLimitPerMinute);
  }
}
