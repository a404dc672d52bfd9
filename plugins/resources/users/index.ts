/** Users of the organization: create, list, get, remove. Keys are issued per user (see api-keys). */
import type { components } from '../../../generated/openapi.js';
import { callerOf } from '../../../kernel/http/handlers.js';
import type { RequestContext } from '../../../kernel/http/context.js';
import { iso } from '../../../kernel/http/values.js';
import { defineResource } from '../../../kernel/plugins.js';
import { scopesAllow } from '../../../kernel/auth/scopes.js';
import {
  AuditLog,
  Clock,
  DatabaseHandle,
  Announcer,
  KeyStore,
  ResourceIdentifiers,
  TenantStore,
  createToken,
} from '../../../kernel/tokens.js';
import { UserService, type UserWithKeys } from './service.js';

const Users = createToken<UserService>('users.UserService');

function toUser(row: UserWithKeys): components['schemas']['User'] {
  return {
    user_id: row.user_id,
    email: row.email,
    name: row.name,
    role: row.role,
    created_at: iso(row.created_at),
    active_key_count: Number(row.active_key_count),
  };
}

function actorOf(ctx: RequestContext) {
  const auth = callerOf(ctx);
  return { keyId: auth.keyId, userEmail: auth.userEmail, requestId: ctx.requestId };
}

export default defineResource({
  name: 'users',
  services: (container, services) => {
    container.bind(Users).toConstantValue(
      new UserService(
        services.get(DatabaseHandle).db,
        services.get(TenantStore),
        services.get(KeyStore),
        services.get(AuditLog),
        services.get(Announcer),
        services.get(Clock),
      ),
    );
  },
  setup: ({ services }) => {
    const tenants = services.get(TenantStore);
    // Scopes on user may name a user by user_id or email.
    services.get(ResourceIdentifiers).register('user', async ({ organizationId, identifier }) => {
      const user = await tenants.findUser(organizationId, identifier);
      return user ? [user.user_id, user.email] : undefined;
    });
  },
  handlers: {
    createUser: async ({ body, ctx, services }) => {
      const user = await services.get(Users).create(callerOf(ctx).organizationId, actorOf(ctx), body);
      return { status: 201, body: toUser(user) };
    },
    listUsers: async ({ query, ctx, services }) => {
      const limit = query.limit ?? 100;
      const offset = query.offset ?? 0;
      const caller = callerOf(ctx);
      const { rows, total } = await services.get(Users).list(caller.organizationId, limit, offset);
      if (caller.scopes.length === 0) return { status: 200, body: { results: rows.map(toUser), total, limit, offset } };
      // A key scoped to some users lists only those.
      const visible = rows.filter((u) =>
        scopesAllow(caller.scopes, {
          organizationId: caller.organizationId,
          resource: { type: 'user', identifiers: [u.user_id, u.email] },
          operation: 'manage_permissions',
        }),
      );
      return { status: 200, body: { results: visible.map(toUser), total: visible.length, limit, offset } };
    },
    getUser: async ({ params, ctx, services }) => {
      return { status: 200, body: toUser(await services.get(Users).get(callerOf(ctx).organizationId, params.user_email)) };
    },
    deleteUser: async ({ params, ctx, services }) => {
      const { user, revokedKeyIds } = await services.get(Users).delete(callerOf(ctx).organizationId, actorOf(ctx), params.user_email);
      return { status: 200, body: { email: user.email, deleted: true, revoked_key_ids: revokedKeyIds } };
    },
  },
});
