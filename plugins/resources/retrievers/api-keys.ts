/**
 * Retriever keys (`ret_sk_`): keys a retriever's owner makes for web pages. Each is bound to the retriever
 * (`bound_retriever_id`), with a fixed permission and scope, and is honoured only by the public execute
 * endpoints while the retriever is published (kernel/auth/bound-keys.ts); every authenticated route refuses
 * it (Authenticator). The owner is the user whose key created the retriever (`created_by`); when that user
 * has left the organization, an `admin` key may act for them, so a departed owner's keys can still be revoked.
 */
import type { Knex } from 'knex';
import type { components } from '../../../generated/openapi.js';
import type { AuditActor, AuditLog } from '../../../kernel/auth/audit-log.js';
import type { AuthContext } from '../../../kernel/auth/authenticator.js';
import { keyStatus, type KeyRecord, type KeyStore } from '../../../kernel/auth/key-store.js';
import { generateKeySecret } from '../../../kernel/auth/keys.js';
import type { ResolvedNamespace } from '../../../kernel/auth/namespaces.js';
import { satisfies, type Permission } from '../../../kernel/auth/permissions.js';
import type { ResourceScope } from '../../../kernel/auth/scopes.js';
import type { TenantStore } from '../../../kernel/auth/tenants.js';
import type { Clock } from '../../../kernel/clock.js';
import { parseTimestamp } from '../../../kernel/dates.js';
import { ConflictError, InputError, NotAllowedError, NotFoundError } from '../../../kernel/errors.js';
import type { Announcer } from '../../../kernel/events/announcer.js';
import { iso, isoOrNull, isUniqueViolation } from '../../../kernel/http/values.js';
import type { RetrieverRow } from './store.js';

type Schemas = components['schemas'];
export type RetrieverApiKey = Schemas['RetrieverApiKey'];

/** What every `ret_sk_` key may do: read-level, this one retriever, execution only. */
const FIXED_PERMISSIONS: Permission[] = ['read'];
function fixedScopes(retrieverId: string): ResourceScope[] {
  return [{ resource_type: 'retriever', resource_id: retrieverId, operations: ['execute_retriever'] }];
}

export interface RetrieverKeyCaller {
  auth: AuthContext;
  requestId: string;
}

export interface RetrieverKeyServices {
  db: Knex;
  keys: KeyStore;
  tenants: TenantStore;
  audit: AuditLog;
  announcer: Announcer;
  clock: Clock;
  /** The retriever by id or name in the namespace, or a 404. */
  retriever: (organizationId: string, namespace: ResolvedNamespace, nameOrId: string) => Promise<RetrieverRow>;
}

export function toRetrieverApiKey(key: KeyRecord, now: Date): RetrieverApiKey {
  return {
    key_id: key.key_id,
    key_prefix: key.key_prefix,
    name: key.name,
    key_type: 'retriever',
    retriever_id: key.bound_retriever_id ?? '',
    permissions: key.permissions,
    scopes: key.scopes,
    allowed_origins: key.allowed_origins,
    expires_at: isoOrNull(key.expires_at),
    status: keyStatus(key, now),
    created_at: iso(key.created_at),
    created_by: key.created_by,
    last_used_at: isoOrNull(key.last_used_at),
    revoked_at: isoOrNull(key.revoked_at),
    revoked_by: key.revoked_by,
  };
}

export class RetrieverKeyService {
  constructor(private readonly s: RetrieverKeyServices) {}

  async create(
    caller: RetrieverKeyCaller,
    namespace: ResolvedNamespace,
    nameOrId: string,
    body: Schemas['RetrieverApiKeyCreateRequest'],
  ): Promise<{ key: KeyRecord; plaintext: string }> {
    const retriever = await this.ownedRetriever(caller.auth, namespace, nameOrId);
    const expiresAt = this.futureDate(body.expires_at);
    const plaintext = generateKeySecret('retriever');
    const { auth } = caller;
    let key: KeyRecord;
    try {
      key = await this.s.db.transaction(async (trx) => {
        await this.s.keys.retireExpiredBoundName(trx, auth.organizationId, retriever.retriever_id, body.name);
        const created = await this.s.keys.insert(trx, {
          organizationId: auth.organizationId,
          userId: auth.userId,
          name: body.name,
          description: null,
          plaintext,
          keyType: 'retriever',
          permissions: FIXED_PERMISSIONS,
          scopes: fixedScopes(retriever.retriever_id),
          rateLimitOverride: null,
          expiresAt,
          principalId: null,
          allowedOrigins: body.allowed_origins ?? [],
          isProtected: false,
          createdBy: auth.userEmail,
          boundRetriever: { organizationId: auth.organizationId, retrieverId: retriever.retriever_id },
        });
        await this.s.audit.record(trx, {
          organizationId: auth.organizationId,
          action: 'api_key_created',
          actor: { keyId: auth.keyId, userEmail: auth.userEmail, requestId: caller.requestId },
          resourceType: 'api_key',
          resourceId: created.key_id,
          resourceName: created.name,
          changes: {
            name: created.name,
            key_type: 'retriever',
            retriever_id: retriever.retriever_id,
            allowed_origins: created.allowed_origins,
            expires_at: created.expires_at?.toISOString() ?? null,
          },
        });
        return created;
      });
    } catch (err) {
      if (isUniqueViolation(err)) {
        throw new ConflictError(`Retriever '${retriever.retriever_name}' already has an active key named '${body.name}'`, { name: body.name });
      }
      throw err;
    }
    await this.announce('api_key.created', key);
    return { key, plaintext };
  }

  async list(auth: AuthContext, namespace: ResolvedNamespace, nameOrId: string, includeRevoked: boolean): Promise<KeyRecord[]> {
    const retriever = await this.ownedRetriever(auth, namespace, nameOrId);
    await this.s.keys.flushLastUsed();
    return this.s.keys.listBound(auth.organizationId, retriever.retriever_id, 'retriever', includeRevoked);
  }

  async revoke(caller: RetrieverKeyCaller, namespace: ResolvedNamespace, nameOrId: string, keyId: string): Promise<KeyRecord> {
    const { auth } = caller;
    const retriever = await this.ownedRetriever(auth, namespace, nameOrId);
    const before = await this.s.keys.findById(auth.organizationId, keyId);
    if (!before || before.key_type !== 'retriever' || before.bound_retriever_id !== retriever.retriever_id || before.status === 'revoked') {
      throw new NotFoundError(`Retriever '${retriever.retriever_name}' has no active key '${keyId}'`, { key_id: keyId });
    }
    const key = await this.s.db.transaction(async (trx) => {
      const revoked = await this.s.keys.revoke(trx, auth.organizationId, before.key_id, auth.userEmail);
      await this.s.audit.record(trx, {
        organizationId: auth.organizationId,
        action: 'api_key_revoked',
        actor: { keyId: auth.keyId, userEmail: auth.userEmail, requestId: caller.requestId },
        resourceType: 'api_key',
        resourceId: revoked.key_id,
        resourceName: revoked.name,
        changes: { status: { from: keyStatus(before, this.s.clock.now()), to: 'revoked' }, retriever_id: retriever.retriever_id },
      });
      return revoked;
    });
    await this.announce('api_key.revoked', key);
    return key;
  }

  /**
   * Revokes every active key bound to these retrievers (they are being deleted): a key of a retriever that
   * no longer exists must not stay listed as active, nor come back to life with a retriever of the same id.
   */
  async revokeAllOf(organizationId: string, retrieverIds: readonly string[], actor: AuditActor, reason: string): Promise<number> {
    if (retrieverIds.length === 0) return 0;
    const bound = (await this.s.db('api_keys')
      .where({ organization_id: organizationId, status: 'active' })
      .whereIn('bound_retriever_id', [...retrieverIds])
      .select('key_id')) as Array<{ key_id: string }>;
    for (const { key_id: keyId } of bound) {
      const before = await this.s.keys.findById(organizationId, keyId);
      if (!before || before.status === 'revoked') continue;
      const key = await this.s.db.transaction(async (trx) => {
        const revoked = await this.s.keys.revoke(trx, organizationId, keyId, actor.userEmail ?? 'system');
        await this.s.audit.record(trx, {
          organizationId,
          action: 'api_key_revoked',
          actor,
          resourceType: 'api_key',
          resourceId: revoked.key_id,
          resourceName: revoked.name,
          changes: { status: { from: keyStatus(before, this.s.clock.now()), to: 'revoked' }, retriever_id: before.bound_retriever_id, reason },
        });
        return revoked;
      });
      await this.announce('api_key.revoked', key);
    }
    return bound.length;
  }

  /** The retriever, when the caller is its owner (or an admin acting for a departed owner); else a 403. */
  private async ownedRetriever(auth: AuthContext, namespace: ResolvedNamespace, nameOrId: string): Promise<RetrieverRow> {
    const retriever = await this.s.retriever(auth.organizationId, namespace, nameOrId);
    const owner = retriever.created_by;
    if (owner !== null && owner.toLowerCase() === auth.userEmail.toLowerCase()) return retriever;
    const ownerGone = owner === null || !(await this.s.tenants.findUser(auth.organizationId, owner));
    if (ownerGone && satisfies(auth.permissions, 'admin')) return retriever;
    throw new NotAllowedError(
      `Only the owner of retriever '${retriever.retriever_name}' (the user who created it${owner ? `, ${owner}` : ''}) may manage its keys: use one of that user's API keys`,
      { retriever_id: retriever.retriever_id },
    );
  }

  private futureDate(value: string | null | undefined): Date | null {
    if (value === undefined || value === null) return null;
    const date = parseTimestamp(value, ['body', 'expires_at']);
    if (date.getTime() <= this.s.clock.now().getTime()) throw new InputError('expires_at must be in the future', { expires_at: value });
    return date;
  }

  /** After the change committed: evict the key here, then tell the other API processes. */
  private announce(type: string, key: KeyRecord): Promise<void> {
    this.s.keys.evict(key.key_id);
    return this.s.announcer.announce({
      type,
      organization_id: key.organization_id,
      data: { key_id: key.key_id, name: key.name, user_email: key.user_email, retriever_id: key.bound_retriever_id },
    });
  }
}
