/**
 * Manifests: namespaces, buckets, collections and retrievers declared in one YAML file, validated, compared
 * with the deployment, applied all or nothing, and exported. Every read and creation goes through this
 * service's own API with the caller's key (api-client.ts), so a manifest can do exactly what its caller could
 * do request by request, and no other plugin is imported.
 */
import type { Request } from 'express';
import { RequestValidationError } from '../../../kernel/errors.js';
import { callerOf } from '../../../kernel/http/handlers.js';
import type { RequestContext } from '../../../kernel/http/context.js';
import { defineResource } from '../../../kernel/plugins.js';
import { ApiDocument, LocalApiUrl, OrganizationSecrets, type Services } from '../../../kernel/tokens.js';
import { Readable } from 'node:stream';
import { LoopbackApi } from './api-client.js';
import { applyEntries } from './apply.js';
import { checkManifest, type CheckedManifest } from './check.js';
import { Deployment } from './deployment.js';
import { diffManifest } from './diff.js';
import { exportManifest } from './export.js';
import { ManifestSchema } from './schema.js';
import { SecretRedactor } from './secret-refs.js';

let schemaCache: { document: Record<string, unknown>; schema: ManifestSchema } | undefined;

function schemaOf(services: Services): ManifestSchema {
  const document = services.get(ApiDocument);
  if (schemaCache?.document !== document) schemaCache = { document, schema: new ManifestSchema(document) };
  return schemaCache.schema;
}

/** The manifest's text: the form field `manifest_file`, or the whole YAML body. */
function manifestText(req: Request): string {
  const body: unknown = req.body;
  if (typeof body === 'string') return body;
  const field = (body as { manifest_file?: unknown } | undefined)?.manifest_file;
  if (typeof field === 'string') return field;
  throw new RequestValidationError([{ loc: ['body', 'manifest_file'], msg: 'the manifest (YAML) is required', type: 'missing' }]);
}

function deploymentFor(req: Request, ctx: RequestContext, services: Services): Deployment {
  return new Deployment(new LoopbackApi(services.get(LocalApiUrl).current, req.get('authorization') ?? '', ctx.requestId));
}

async function check(req: Request, ctx: RequestContext, services: Services): Promise<{ checked: CheckedManifest; deployment: Deployment }> {
  const deployment = deploymentFor(req, ctx, services);
  const checked = await checkManifest({
    text: manifestText(req),
    organizationId: callerOf(ctx).organizationId,
    schema: schemaOf(services),
    secrets: services.get(OrganizationSecrets),
    deployment,
  });
  return { checked, deployment };
}

/** Problems as a 422: each at `["body", "manifest_file", <path>]`, its message starting with the path. */
function refuse(checked: CheckedManifest): never {
  throw new RequestValidationError(
    checked.problems.map((p) => ({
      loc: ['body', 'manifest_file', ...(p.path ? [p.path] : [])],
      msg: `${p.path || '(manifest)'}: ${p.message}${p.line !== undefined ? ` (line ${p.line}, column ${p.column ?? 1})` : ''}`,
      type: `manifest_${p.type}`,
    })),
  );
}

export default defineResource({
  name: 'manifests',
  migrations: [],
  handlers: {
    validateManifest: async ({ req, ctx, services }) => {
      const { checked } = await check(req, ctx, services);
      return { status: 200, body: { valid: checked.problems.length === 0, errors: checked.problems, counts: checked.counts, secrets: checked.secrets } };
    },
    applyManifest: async ({ req, ctx, services }) => {
      const { checked, deployment } = await check(req, ctx, services);
      if (checked.problems.length > 0) refuse(checked);
      const results = await applyEntries(checked, deployment);
      return {
        status: 200,
        body: {
          manifest_name: checked.name,
          results,
          created: results.filter((r) => r.action === 'created').length,
          unchanged: results.filter((r) => r.action === 'unchanged').length,
        },
      };
    },
    diffManifest: async ({ req, ctx, services }) => {
      const { checked, deployment } = await check(req, ctx, services);
      if (checked.problems.length > 0) refuse(checked);
      const changes = await diffManifest(checked, deployment);
      const count = (action: string) => changes.filter((c) => c.action === action).length;
      return {
        status: 200,
        body: { manifest_name: checked.name, changes, summary: { create: count('create'), unchanged: count('unchanged'), differs: count('differs'), extra: count('extra') } },
      };
    },
    exportManifest: async ({ req, query, ctx, services }) => {
      const organizationId = callerOf(ctx).organizationId;
      const secrets = services.get(OrganizationSecrets);
      const redactor = new SecretRedactor(await secrets.values(organizationId, await secrets.names(organizationId)));
      const only = query.namespace ?? req.get('x-namespace') ?? undefined;
      const text = await exportManifest(deploymentFor(req, ctx, services), query.name ?? 'export', only, redactor);
      return { status: 200, body: undefined, headers: { 'Content-Type': 'application/yaml; charset=utf-8' }, stream: Readable.from([text]) };
    },
  },
});
