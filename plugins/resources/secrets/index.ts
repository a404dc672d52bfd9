/**
 * Organization secrets: named values (admin) that manifests refer to as `${{ secrets.NAME }}`. Sealed at
 * rest; no operation ever returns a value. Other plugins read them through the kernel's OrganizationSecrets.
 */
import type { Container } from 'inversify';
import { ConflictError, NotFoundError } from '../../../kernel/errors.js';
import { callerOf } from '../../../kernel/http/handlers.js';
import { defineResource } from '../../../kernel/plugins.js';
import { SecretBox } from '../../../kernel/secret-box.js';
import { BlobSigningSecret, Clock, DatabaseHandle, OrganizationSecrets, createToken, type Services } from '../../../kernel/tokens.js';
import { secretMigrations } from './migrations.js';
import { SecretStore, type SecretSummary } from './store.js';

const Secrets = createToken<SecretStore>('secrets.SecretStore');

function bind(container: Container, services: Services): void {
  const store = new SecretStore(services.get(DatabaseHandle).db, new SecretBox(services.get(BlobSigningSecret), 'organization-secrets'));
  container.bind(Secrets).toConstantValue(store);
  container.bind(OrganizationSecrets).toConstantValue(store);
}

function toSecret(row: SecretSummary) {
  return {
    name: row.name,
    description: row.description,
    created_at: new Date(row.created_at).toISOString(),
    updated_at: new Date(row.updated_at).toISOString(),
    created_by: row.created_by,
  };
}

export default defineResource({
  name: 'secrets',
  migrations: secretMigrations,
  services: bind,
  handlers: {
    createOrganizationSecret: async ({ body, ctx, services }) => {
      const caller = callerOf(ctx);
      const now = services.get(Clock).now();
      const row = { organization_id: caller.organizationId, name: body.name, value: body.value, description: body.description ?? null, created_by: caller.userEmail, created_at: now, updated_at: now };
      if (!(await services.get(Secrets).insert(row))) throw new ConflictError(`A secret named '${body.name}' already exists`, { name: body.name });
      return { status: 201, body: toSecret(row) };
    },
    listOrganizationSecrets: async ({ ctx, services }) => {
      const rows = await services.get(Secrets).list(callerOf(ctx).organizationId);
      return { status: 200, body: { results: rows.map(toSecret), total: rows.length } };
    },
    replaceOrganizationSecret: async ({ params, body, ctx, services }) => {
      const row = await services.get(Secrets).replace(callerOf(ctx).organizationId, params.secret_name, body.value, body.description, services.get(Clock).now());
      if (!row) throw new NotFoundError(`Secret '${params.secret_name}' not found`);
      return { status: 200, body: toSecret(row) };
    },
    deleteOrganizationSecret: async ({ params, ctx, services }) => {
      if (!(await services.get(Secrets).delete(callerOf(ctx).organizationId, params.secret_name))) throw new NotFoundError(`Secret '${params.secret_name}' not found`);
      return { status: 200, body: { name: params.secret_name, deleted: true } };
    },
  },
});
