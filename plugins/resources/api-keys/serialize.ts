import type { components } from '../../../generated/openapi.js';
import { keyStatus, type KeyRecord } from '../../../kernel/auth/key-store.js';
import { iso, isoOrNull } from '../../../kernel/http/values.js';

export type ApiKey = components['schemas']['ApiKey'];

/** Key metadata as the contract shows it: never the secret, never its hash. */
export function toApiKey(key: KeyRecord, now: Date): ApiKey {
  return {
    key_id: key.key_id,
    key_prefix: key.key_prefix,
    name: key.name,
    description: key.description,
    permissions: key.permissions,
    scopes: key.scopes,
    rate_limit_override: key.rate_limit_override,
    expires_at: isoOrNull(key.expires_at),
    principal_id: key.principal_id,
    allowed_origins: key.allowed_origins,
    status: keyStatus(key, now),
    key_type: key.key_type,
    is_protected: key.is_protected,
    user_email: key.user_email,
    last_used_at: isoOrNull(key.last_used_at),
    created_at: iso(key.created_at),
    created_by: key.created_by,
    updated_at: isoOrNull(key.updated_at),
    revoked_at: isoOrNull(key.revoked_at),
    revoked_by: key.revoked_by,
  };
}
