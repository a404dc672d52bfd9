/**
 * Namespace templates (`/v1/namespaces/templates/...`): templates of existing namespaces, and instantiation,
 * which creates a namespace holding a copy of the template's source namespace (cloner.ts).
 */
import type { components } from '../../../generated/openapi.js';
import { callerOf } from '../../../kernel/http/handlers.js';
import type { RequestContext } from '../../../kernel/http/context.js';
import { iso } from '../../../kernel/http/values.js';
import { defineResource, type ResourcePlugin } from '../../../kernel/plugins.js';
import {
  Announcer,
  AuditLog,
  BlobStore,
  Clock,
  DatabaseHandle,
  NamespaceResolver,
  PluginRegistry,
  RootLogger,
  TextIndex,
  VectorIndex,
  createToken,
} from '../../../kernel/tokens.js';
import { NamespaceCloner } from './cloner.js';
import { DEFAULT_CLONE_LIMITS, type CloneLimits } from './limits.js';
import { templateMigrations } from './migrations.js';
import { TemplateService } from './service.js';
import { TemplateStore, type TemplateView } from './store.js';

const Templates = createToken<TemplateService>('namespace-templates.TemplateService');

function toTemplate(row: TemplateView): components['schemas']['NamespaceTemplate'] {
  return {
    template_id: row.template_id,
    template_name: row.template_name,
    description: row.description,
    source_namespace_id: row.source_namespace_id,
    source_namespace_name: row.source_namespace_name,
    status: row.source_namespace_name === null ? 'inactive' : 'active',
    created_by: row.created_by,
    created_at: iso(row.created_at),
    updated_at: iso(row.updated_at),
  };
}

function actorOf(ctx: RequestContext) {
  const caller = callerOf(ctx);
  return { keyId: caller.keyId, userEmail: caller.userEmail, requestId: ctx.requestId };
}

/** The plugin, with other clone limits than the defaults (tests use small ones). */
export function namespaceTemplates(limits: CloneLimits = DEFAULT_CLONE_LIMITS): ResourcePlugin {
  return defineResource({
    name: 'namespace-templates',
    migrations: templateMigrations,
    services: (container, services) => {
      const db = services.get(DatabaseHandle).db;
      const cloner = new NamespaceCloner({
        db,
        vectors: services.get(VectorIndex),
        blobs: services.get(BlobStore),
        text: services.get(TextIndex),
        plugins: services.get(PluginRegistry),
        audit: services.get(AuditLog),
        clock: services.get(Clock),
        log: services.get(RootLogger).child({ plugin: 'namespace-templates' }),
        limits,
      });
      container.bind(Templates).toConstantValue(
        new TemplateService(new TemplateStore(db), services.get(NamespaceResolver), cloner, services.get(Announcer), services.get(Clock)),
      );
    },
    handlers: {
      createNamespaceTemplate: async ({ body, ctx, services }) => {
        const row = await services.get(Templates).create(callerOf(ctx), body);
        return { status: 201, body: toTemplate(row) };
      },

      listNamespaceTemplates: async ({ query, ctx, services }) => {
        const limit = query.limit ?? 100;
        const offset = query.offset ?? 0;
        const rows = await services.get(Templates).list(callerOf(ctx), query.search);
        return {
          status: 200,
          body: { results: rows.slice(offset, offset + limit).map(toTemplate), total: rows.length, limit, offset, has_next: offset + limit < rows.length },
        };
      },

      getNamespaceTemplate: async ({ params, ctx, services }) => {
        return { status: 200, body: toTemplate(await services.get(Templates).get(callerOf(ctx), params.template_id)) };
      },

      updateNamespaceTemplate: async ({ params, body, ctx, services }) => {
        return { status: 200, body: toTemplate(await services.get(Templates).update(callerOf(ctx), params.template_id, body)) };
      },

      deleteNamespaceTemplate: async ({ params, ctx, services }) => {
        const row = await services.get(Templates).delete(callerOf(ctx), params.template_id);
        return { status: 200, body: { template_id: row.template_id, template_name: row.template_name, deleted: true } };
      },

      instantiateNamespaceTemplate: async ({ params, body, ctx, services }) => {
        const result = await services.get(Templates).instantiate(callerOf(ctx), actorOf(ctx), params.template_id, body);
        return {
          status: 201,
          body: {
            namespace_id: result.namespaceId,
            namespace_name: result.namespaceName,
            template_id: result.templateId,
            status: 'ready',
            created_at: iso(result.createdAt),
            copied: result.copied,
          },
        };
      },
    },
  });
}

export default namespaceTemplates();
