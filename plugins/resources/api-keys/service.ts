/**
 * Key management rules on top of the kernel's KeyStore: name uniqueness among a user's active keys,
 * the protected admin-key, the revoke guard, and an audit entry plus an event for every change.
 */
import type { Knex } from 'knex';
import type { AuditActor, AuditAction, AuditLog } from '../../../kernel/auth/audit-log.js';
import { diffFields } from '../../../kernel/auth/audit-log.js';
import { keyStatus, type KeyChanges, type KeyRecord, type KeyStore } from '../../../kernel/auth/key-store.js';
import { generateKeySecret, type KeyType } from '../../../kernel/auth/keys.js';
import type { Permission } from '../../../kernel/auth/permissions.js';
import { scopeProblem, type ResourceScope } from '../../../kernel/auth/scopes.js';
import type { TenantStore, UserRow } from '../../../kernel/auth/tenants.js';
import type { Clock } from '../../../kernel/clock.js';
import { parseTimestamp } from '../../../kernel/dates.js';
import { ConflictError, InputError, NotAllowedError, NotFoundError, RequestValidationError } from '../../../kernel/errors.js';
import type { Announcer } from '../../../kernel/events/announcer.js';
import { isUniqueViolation } from '../../../kernel/http/values.js';

export interface KeySettings {
  name: string;
  description?: string | null;
  permissions?: Permission[];
  scopes?: ResourceScope[];
  rate_limit_override?: number | null;
  expires_at?: string | null;
  principal_id?: string | null;
  allowed_origins?: string[];
}

export interface Caller extends AuditActor {
  organizationId: string;
  keyId: string;
}

/** Revoking a key used this recently needs `force=true`. */
const RECENT_USE_MS = 24 * 3600 * 1000;
const DEFAULT_PERMISSIONS: Permission[] = ['read', 'write', 'delete'];
const ACCESS_FIELDS = new Set(['permissions', 'scopes', 'allowed_origins', 'principal_id']);
const MUTABLE_FIELDS = ['name', 'description', 'permissions', 'scopes', 'rate_limit_override', 'expires_at', 'principal_id', 'allowed_origins'] as const;

function keyTypeFor(principalId: string | null | undefined): KeyType {
  return principalId ? 'user' : 'standard';
}

/** 422 for scopes whose resource_id could not mean what it says (a bare bucket name across namespaces). */
function checkScopes(scopes: readonly ResourceScope[]): void {
  const problems = scopes.flatMap((scope, i) => {
    const problem = scopeProblem(scope, scopes);
    return problem ? [{ loc: ['body', 'scopes', i, 'resource_id'], msg: problem, type: 'scope_resource_id' }] : [];
  });
  if (problems.length > 0) throw new RequestValidationError(problems);
}

export class ApiKeyService {
  constructor(
    private readonly db: Knex,
    private readonly keys: KeyStore,
    private readonly tenants: TenantStore,
    private readonly audit: AuditLog,
    private readonly announcer: Announcer,
    private readonly clock: Clock,
  ) {}

  async user(organizationId: string, email: string): Promise<UserRow> {
    const user = await this.tenants.findUser(organizationId, email);
    if (!user) throw new NotFoundError(`User '${email}' not found in this organization`, { user_email: email });
    return user;
  }

  async list(organizationId: string, email: string, includeRevoked: boolean): Promise<KeyRecord[]> {
    const user = await this.user(organizationId, email);
    await this.keys.flushLastUsed();
    return this.keys.listForUser(organizationId, user.user_id, includeRevoked);
  }

  async get(organizationId: string, email: string, name: string): Promise<KeyRecord> {
    const user = await this.user(organizationId, email);
    await this.keys.flushLastUsed();
    const key = await this.keys.findByName(organizationId, user.user_id, name);
    if (!key) throw new NotFoundError(`API key '${name}' not found for user '${email}'`, { key_name: name });
    return key;
  }

  async create(caller: Caller, email: string, settings: KeySettings): Promise<{ key: KeyRecord; plaintext: string }> {
    const user = await this.user(caller.organizationId, email);
    checkScopes(settings.scopes ?? []);
    const expiresAt = this.futureDate(settings.expires_at);
    const keyType = keyTypeFor(settings.principal_id);
    const plaintext = generateKeySecret(keyType);
    const key = await this.uniqueName(settings.name, () =>
      this.db.transaction(async (trx) => {
        await this.keys.retireExpiredName(trx, caller.organizationId, user.user_id, settings.name);
        const created = await this.keys.insert(trx, {
          organizationId: caller.organizationId,
          userId: user.user_id,
          name: settings.name,
          description: settings.description ?? null,
          plaintext,
          keyType,
          permissions: settings.permissions ?? DEFAULT_PERMISSIONS,
          scopes: settings.scopes ?? [],
          rateLimitOverride: settings.rate_limit_override ?? null,
          expiresAt,
          principalId: settings.principal_id ?? null,
          allowedOrigins: settings.allowed_origins ?? [],
          isProtected: false,
          createdBy: caller.userEmail ?? caller.keyId,
        });
        await this.record(trx, caller, 'api_key_created', created, {
          name: created.name,
          user_email: user.email,
          key_type: created.key_type,
          permissions: created.permissions,
          scopes: created.scopes,
          allowed_origins: created.allowed_origins,
          rate_limit_override: created.rate_limit_override,
          expires_at: created.expires_at?.toISOString() ?? null,
          principal_id: created.principal_id,
        });
        return created;
      }),
    );
    await this.announce('api_key.created', key);
    return { key, plaintext };
  }

  async update(caller: Caller, email: string, name: string, patch: Partial<KeySettings>): Promise<KeyRecord> {
    if (Object.keys(patch).length === 0) throw new InputError('Nothing to update: send at least one field');
    const before = await this.get(caller.organizationId, email, name);
    this.refuseProtected(before, 'updated');
    // Expiry is final: a new expires_at (or null) must not bring an expired key back to life.
    if (keyStatus(before, this.clock.now()) === 'expired') {
      throw new ConflictError(`API key '${name}' has expired and cannot be updated or reactivated; create a new key`);
    }
    const changes: KeyChanges = {};
    if (patch.name !== undefined) changes.name = patch.name;
    if (patch.description !== undefined) changes.description = patch.description;
    if (patch.permissions !== undefined) changes.permissions = patch.permissions;
    if (patch.scopes !== undefined) {
      checkScopes(patch.scopes);
      changes.scopes = patch.scopes;
    }
    if (patch.rate_limit_override !== undefined) changes.rate_limit_override = patch.rate_limit_override;
    if (patch.expires_at !== undefined) changes.expires_at = this.futureDate(patch.expires_at);
    if (patch.allowed_origins !== undefined) changes.allowed_origins = patch.allowed_origins;
    if (patch.principal_id !== undefined) {
      changes.principal_id = patch.principal_id;
      changes.key_type = keyTypeFor(patch.principal_id);
    }
    const after = await this.uniqueName(changes.name ?? before.name, () =>
      this.db.transaction(async (trx) => {
        const updated = await this.keys.update(trx, caller.organizationId, before.key_id, changes);
        const diff = diffFields(before as unknown as Record<string, unknown>, updated as unknown as Record<string, unknown>, MUTABLE_FIELDS);
        const action: AuditAction = Object.keys(diff).some((f) => ACCESS_FIELDS.has(f)) ? 'api_key_scope_updated' : 'api_key_updated';
        await this.record(trx, caller, action, updated, diff);
        return updated;
      }),
    );
    await this.announce('api_key.updated', after);
    return after;
  }

  async rotate(caller: Caller, email: string, name: string): Promise<{ key: KeyRecord; plaintext: string }> {
    const before = await this.get(caller.organizationId, email, name);
    this.refuseProtected(before, 'rotated');
    if (keyStatus(before, this.clock.now()) === 'expired') {
      throw new ConflictError(`API key '${name}' has expired and cannot be rotated; create a new key`);
    }
    const plaintext = generateKeySecret(before.key_type);
    const key = await this.db.transaction(async (trx) => {
      const rotated = await this.keys.replaceSecret(trx, caller.organizationId, before.key_id, plaintext);
      await this.record(trx, caller, 'api_key_rotated', rotated, {
        key_prefix: { from: before.key_prefix, to: rotated.key_prefix },
      });
      return rotated;
    });
    await this.announce('api_key.rotated', key);
    return { key, plaintext };
  }

  async revoke(caller: Caller, email: string, name: string, force: boolean): Promise<KeyRecord> {
    const before = await this.get(caller.organizationId, email, name);
    this.refuseProtected(before, 'revoked');
    if (!force) this.guardRevoke(caller, before);
    const key = await this.db.transaction(async (trx) => {
      const revoked = await this.keys.revoke(trx, caller.organizationId, before.key_id, caller.userEmail ?? caller.keyId);
      await this.record(trx, caller, 'api_key_revoked', revoked, { status: { from: 'active', to: 'revoked' }, forced: force });
      return revoked;
    });
    await this.announce('api_key.revoked', key);
    return key;
  }

  private guardRevoke(caller: Caller, key: KeyRecord): void {
    if (key.key_id === caller.keyId) {
      throw new ConflictError('This is the key making the request; revoking it would lock you out. Pass force=true to revoke it anyway.', {
        guard: 'self_revoke',
      });
    }
    const lastUsed = key.last_used_at?.getTime();
    if (lastUsed !== undefined && this.clock.now().getTime() - lastUsed < RECENT_USE_MS) {
      throw new ConflictError(
        `API key '${key.name}' was used at ${key.last_used_at!.toISOString()}, within the last 24 hours. Pass force=true to revoke it anyway.`,
        { guard: 'recently_used', last_used_at: key.last_used_at!.toISOString() },
      );
    }
  }

  private refuseProtected(key: KeyRecord, action: string): void {
    if (key.is_protected) {
      throw new NotAllowedError(`The organization's protected '${key.name}' cannot be ${action}`, { key_name: key.name });
    }
  }

  private futureDate(value: string | null | undefined): Date | null {
    if (value === undefined || value === null) return null;
    const date = parseTimestamp(value, ['body', 'expires_at']);
    if (date.getTime() <= this.clock.now().getTime()) {
      throw new InputError('expires_at must be in the future', { expires_at: value });
    }
    return date;
  }

  private async uniqueName<T>(name: string, write: () => Promise<T>): Promise<T> {
    try {
      return await write();
    } catch (err) {
      if (isUniqueViolation(err)) {
        throw new ConflictError(`An active API key named '${name}' already exists for this user`, { name });
      }
      throw err;
    }
  }

  private record(trx: Knex, caller: Caller, action: AuditAction, key: KeyRecord, changes: Record<string, unknown>): Promise<void> {
    return this.audit.record(trx, {
      organizationId: caller.organizationId,
      action,
      actor: caller,
      resourceType: 'api_key',
      resourceId: key.key_id,
      resourceName: key.name,
      changes,
    });
  }

  /** After the change committed: drop the key from this process's cache, then tell the others. */
  private announce(type: string, key: KeyRecord): Promise<void> {
    this.keys.evict(key.key_id);
    return this.announcer.announce({
      type,
      organization_id: key.organization_id,
      data: { key_id: key.key_id, name: key.name, user_email: key.user_email },
    });
  }
}
