/** Users of the organization: create, list, get, remove. Keys are issued per user (see api-keys). */
import type { components } from '../../../generated/openapi.js';
import { callerOf } from '../../../kernel/http/handlers.js';
import type { RequestContext } from '../../../kernel/http/context.js';
import { iso } from '../../../kernel/http/values.js';
import { defineResource } from '../../../kernel/plugins.js';
import { AuditLog, Clock, DatabaseHandle, EventBus, KeyStore, TenantStore, createToken } from '../../../kernel/tokens.js';
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
        services.get(EventBus),
        services.get(Clock),
      ),
    );
  },
  handlers: {
    createUser: async ({ body, ctx, services }) => {
      const user = await services.get(Users).create(callerOf(ctx).organizationId, actorOf(ctx), body);
      return { status: 201, body: toUser(user) };
    },
    listUsers: async ({ query, ctx, services }) => {
      const limit = query.limit ?? 100;
      const offset = query.offset ?? 0;
      const { rows, total } = await services.get(Users).list(callerOf(ctx).organizationId, limit, offset);
      return { status: 200, body: { results: rows.map(toUser), total, limit, offset } };
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
