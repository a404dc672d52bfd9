/** API keys of the organization's users (create, list, get, update, rotate, revoke) and GET /v1/me. */
import type { components } from '../../../generated/openapi.js';
import type { AuthContext } from '../../../kernel/auth/authenticator.js';
import { effectivePermissions, strongestPermission } from '../../../kernel/auth/permissions.js';
import { operationsForPermission, scopesAllow } from '../../../kernel/auth/scopes.js';
import { NotAllowedError } from '../../../kernel/errors.js';
import type { RequestContext } from '../../../kernel/http/context.js';
import { callerOf } from '../../../kernel/http/handlers.js';
import { isoOrNull } from '../../../kernel/http/values.js';
import { defineResource } from '../../../kernel/plugins.js';
import {
  AuditLog,
  Clock,
  DatabaseHandle,
  Announcer,
  KeyStore,
  ResourceIdentifiers,
  PublishedRetrievers,
  TenantStore,
  createToken,
} from '../../../kernel/tokens.js';
import type { PublishedRetrieverDirectory } from '../../../kernel/retrieval/published.js';
import { ApiKeyService, type Caller } from './service.js';
import { toApiKey } from './serialize.js';

const ApiKeys = createToken<ApiKeyService>('api-keys.ApiKeyService');

function callerFrom(ctx: RequestContext): Caller {
  const auth = callerOf(ctx);
  return { organizationId: auth.organizationId, keyId: auth.keyId, userEmail: auth.userEmail, requestId: ctx.requestId };
}

export default defineResource({
  name: 'api-keys',
  services: (container, services) => {
    container.bind(ApiKeys).toConstantValue(
      new ApiKeyService(
        services.get(DatabaseHandle).db,
        services.get(KeyStore),
        services.get(TenantStore),
        services.get(AuditLog),
        services.get(Announcer),
        services.get(Clock),
      ),
    );
  },
  setup: ({ services }) => {
    const keys = services.get(KeyStore);
    const tenants = services.get(TenantStore);
    // Scopes on api_key may name a key by its key_id or its name.
    services.get(ResourceIdentifiers).register('api_key', async ({ organizationId, identifier, source, pathParams }) => {
      if (source === 'path.key_id') {
        const key = await keys.findById(organizationId, identifier);
        return key ? [key.key_id, key.name] : undefined;
      }
      if (source === 'path.key_name' && pathParams.user_email) {
        const user = await tenants.findUser(organizationId, pathParams.user_email);
        const key = user ? await keys.findByName(organizationId, user.user_id, identifier) : undefined;
        return key ? [key.key_id, key.name] : undefined;
      }
      return undefined;
    });
  },
  handlers: {
    createApiKey: async ({ params, body, ctx, services }) => {
      const { key, plaintext } = await services.get(ApiKeys).create(callerFrom(ctx), params.user_email, body);
      return { status: 201, body: { ...toApiKey(key, services.get(Clock).now()), key: plaintext } };
    },

    listApiKeys: async ({ params, query, ctx, services }) => {
      const caller = callerOf(ctx);
      const all = await services.get(ApiKeys).list(caller.organizationId, params.user_email, query.include_revoked ?? false);
      // A key scoped to some keys lists only those.
      const keys = all.filter((k) =>
        scopesAllow(caller.scopes, {
          organizationId: caller.organizationId,
          resource: { type: 'api_key', identifiers: [k.key_id, k.name] },
          operation: 'manage_permissions',
        }),
      );
      const now = services.get(Clock).now();
      return { status: 200, body: { results: keys.map((k) => toApiKey(k, now)), total: keys.length } };
    },

    getApiKey: async ({ params, ctx, services }) => {
      const key = await services.get(ApiKeys).get(callerOf(ctx).organizationId, params.user_email, params.key_name);
      return { status: 200, body: toApiKey(key, services.get(Clock).now()) };
    },

    updateApiKey: async ({ params, body, ctx, services }) => {
      const key = await services.get(ApiKeys).update(callerFrom(ctx), params.user_email, params.key_name, body);
      return { status: 200, body: toApiKey(key, services.get(Clock).now()) };
    },

    rotateApiKey: async ({ params, ctx, services }) => {
      const { key, plaintext } = await services.get(ApiKeys).rotate(callerFrom(ctx), params.user_email, params.key_name);
      return { status: 200, body: { ...toApiKey(key, services.get(Clock).now()), key: plaintext } };
    },

    revokeApiKey: async ({ params, query, ctx, services }) => {
      const key = await services.get(ApiKeys).revoke(callerFrom(ctx), params.user_email, params.key_name, query.force ?? false);
      return { status: 200, body: toApiKey(key, services.get(Clock).now()) };
    },

    getMe: async ({ ctx, services }) => {
      const auth = callerOf(ctx);
      const level = strongestPermission(auth.permissions) ?? 'read';
      if (auth.boundRetriever) return { status: 200, body: await boundKeyMe(auth, auth.boundRetriever, services.get(PublishedRetrievers)) };
      let namespace;
      if (ctx.namespace) {
        const ns = ctx.namespace;
        const allowed = operationsForPermission(level).filter((operation) =>
          scopesAllow(auth.scopes, {
            organizationId: auth.organizationId,
            resource: { type: 'namespace', identifiers: [ns.id, ns.name] },
            namespace: ns,
            operation,
          }),
        );
        if (allowed.length === 0) throw new NotAllowedError(`The API key's scopes do not include namespace '${ns.name}'`);
        namespace = { namespace_id: ns.id, namespace_name: ns.name, allowed_operations: allowed };
      }
      return {
        status: 200,
        body: {
          organization: { organization_id: auth.organizationId, name: auth.organizationName },
          user: { user_id: auth.userId, email: auth.userEmail },
          key: {
            key_id: auth.keyId,
            key_prefix: auth.keyPrefix,
            name: auth.keyName,
            key_type: auth.keyType,
            permissions: auth.permissions,
            scopes: auth.scopes,
            principal_id: auth.principalId,
            allowed_origins: auth.allowedOrigins,
            expires_at: isoOrNull(auth.expiresAt),
            rate_limit_per_minute: auth.rateLimitPerMinute,
          },
          capabilities: {
            permission_level: level,
            effective_permissions: effectivePermissions(auth.permissions),
            organization_wide: auth.scopes.length === 0,
          },
          ...(namespace ? { namespace } : {}),
        },
      };
    },
  },
});

/**
 * `GET /v1/me` for a key bound to one retriever: what it executes and where. Such keys are embedded in web
 * pages: nothing of the organization, its users or its ids is shown to whoever reads the page.
 */
async function boundKeyMe(
  auth: AuthContext,
  bound: NonNullable<AuthContext['boundRetriever']>,
  published: PublishedRetrieverDirectory,
): Promise<components['schemas']['BoundKeyMeResponse']> {
  const kind = auth.keyType === 'marketplace' ? 'marketplace' : 'retriever';
  const publication = await published.findByRetrieverId(bound.organizationId, bound.retrieverId);
  return {
    key: {
      key_prefix: auth.keyPrefix,
      key_type: kind,
      allowed_origins: auth.allowedOrigins,
      expires_at: isoOrNull(auth.expiresAt),
      rate_limit_per_minute: auth.rateLimitPerMinute,
    },
    bound_retriever: {
      kind,
      public_name: publication?.publicName ?? null,
      allowed_endpoints: ['POST /v1/public/retrievers/execute', 'POST /v1/public/retrievers/{public_name}/execute'],
    },
  };
}
