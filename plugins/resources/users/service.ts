/**
 * Users of an organization. Removing a user revokes every active key of theirs in the same transaction;
 * the owner (holder of the protected admin-key) cannot be removed.
 */
import type { Knex } from 'knex';
import type { AuditActor, AuditLog } from '../../../kernel/auth/audit-log.js';
import type { KeyStore } from '../../../kernel/auth/key-store.js';
import type { TenantStore, UserRow } from '../../../kernel/auth/tenants.js';
import type { Clock } from '../../../kernel/clock.js';
import { ConflictError, NotAllowedError, NotFoundError } from '../../../kernel/errors.js';
import type { Announcer } from '../../../kernel/events/announcer.js';
import { newId } from '../../../kernel/ids.js';
import { isUniqueViolation } from '../../../kernel/http/values.js';

export interface UserWithKeys extends UserRow {
  active_key_count: number;
}

export class UserService {
  constructor(
    private readonly db: Knex,
    private readonly tenants: TenantStore,
    private readonly keys: KeyStore,
    private readonly audit: AuditLog,
    private readonly announcer: Announcer,
    private readonly clock: Clock,
  ) {}

  private withKeyCounts(organizationId: string) {
    return this.db('users as u')
      .where({ 'u.organization_id': organizationId })
      .whereNull('u.deleted_at')
      .select(
        'u.*',
        this.db.raw(
          "(select count(*) from api_keys k where k.user_id = u.user_id and k.status = 'active' and k.key_type <> 'session')::int as active_key_count",
        ),
      );
  }

  async list(organizationId: string, limit: number, offset: number): Promise<{ rows: UserWithKeys[]; total: number }> {
    const rows = (await this.withKeyCounts(organizationId).orderBy('u.created_at').orderBy('u.user_id').limit(limit).offset(offset)) as UserWithKeys[];
    const total = await this.db('users').where({ organization_id: organizationId }).whereNull('deleted_at').count<{ count: number }[]>({ count: '*' }).first();
    return { rows, total: Number(total?.count ?? 0) };
  }

  async get(organizationId: string, email: string): Promise<UserWithKeys> {
    const row = (await this.withKeyCounts(organizationId).whereRaw('lower(u.email) = lower(?)', [email]).first()) as UserWithKeys | undefined;
    if (!row) throw new NotFoundError(`User '${email}' not found in this organization`, { user_email: email });
    return row;
  }

  async create(organizationId: string, actor: AuditActor, input: { email: string; name?: string }): Promise<UserWithKeys> {
    const user: UserRow = {
      user_id: newId('user'),
      organization_id: organizationId,
      email: input.email.toLowerCase(),
      name: input.name ?? null,
      role: 'member',
      created_at: this.clock.now(),
      deleted_at: null,
    };
    try {
      await this.db.transaction(async (trx) => {
        await trx('users').insert(user);
        await this.audit.record(trx, {
          organizationId,
          action: 'user_created',
          actor,
          resourceType: 'user',
          resourceId: user.user_id,
          resourceName: user.email,
          changes: { email: user.email, name: user.name },
        });
      });
    } catch (err) {
      if (isUniqueViolation(err)) throw new ConflictError(`User '${input.email}' already exists`, { email: input.email });
      throw err;
    }
    await this.announcer.announce({ type: 'user.created', organization_id: organizationId, data: { user_id: user.user_id, email: user.email } });
    return { ...user, active_key_count: 0 };
  }

  async delete(organizationId: string, actor: AuditActor, email: string): Promise<{ user: UserRow; revokedKeyIds: string[] }> {
    const user = await this.tenants.findUser(organizationId, email);
    if (!user) throw new NotFoundError(`User '${email}' not found in this organization`, { user_email: email });
    if (user.role === 'owner') throw new NotAllowedError('The organization owner (holder of the protected admin-key) cannot be removed');
    const revokedBy = actor.userEmail ?? actor.keyId ?? 'system';
    const revoked = await this.db.transaction(async (trx) => {
      const active = await this.keys.listActiveIdsForUser(trx, organizationId, user.user_id);
      for (const key of active) {
        await this.keys.revoke(trx, organizationId, key.key_id, revokedBy);
        await this.audit.record(trx, {
          organizationId,
          action: 'api_key_revoked',
          actor,
          resourceType: 'api_key',
          resourceId: key.key_id,
          resourceName: key.name,
          changes: { status: { from: 'active', to: 'revoked' }, reason: 'user_deleted' },
        });
      }
      await trx('users').where({ user_id: user.user_id, organization_id: organizationId }).update({ deleted_at: this.clock.now() });
      await this.audit.record(trx, {
        organizationId,
        action: 'user_deleted',
        actor,
        resourceType: 'user',
        resourceId: user.user_id,
        resourceName: user.email,
        changes: { revoked_key_ids: active.map((k) => k.key_id) },
      });
      return active;
    });
    await this.announcer.announceAll([
      ...revoked.map((key) => ({ type: 'api_key.revoked', organization_id: organizationId, data: { key_id: key.key_id, name: key.name, user_email: user.email } })),
      { type: 'user.deleted', organization_id: organizationId, data: { user_id: user.user_id, email: user.email } },
    ]);
    return { user, revokedKeyIds: revoked.map((k) => k.key_id) };
  }
}
