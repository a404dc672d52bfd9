/**
 * Namespace templates: a name for "a namespace like that one". A template refers to its source namespace
 * live (no snapshot is taken): instantiating copies the source as it is at that moment (cloner.ts). Once the
 * source namespace is deleted the template is `inactive` and instantiating it is a 409; it can still be read,
 * renamed and deleted.
 *
 * A scoped key sees only templates whose source namespace its scopes let it read: the others are a 404 to
 * it, as if they did not exist, so a template never lets a key copy (and so read) a namespace it could not.
 */
import type { AuditActor } from '../../../kernel/auth/audit-log.js';
import type { AuthContext } from '../../../kernel/auth/authenticator.js';
import type { NamespaceResolver } from '../../../kernel/auth/namespaces.js';
import { scopesAllow } from '../../../kernel/auth/scopes.js';
import type { Clock } from '../../../kernel/clock.js';
import { ConflictError, InputError, NotFoundError, RequestValidationError } from '../../../kernel/errors.js';
import type { Announcer } from '../../../kernel/events/announcer.js';
import { isUniqueViolation } from '../../../kernel/http/values.js';
import { newId } from '../../../kernel/ids.js';
import { sourceGone, type CloneResult, type NamespaceCloner } from './cloner.js';
import type { TemplateStore, TemplateView } from './store.js';

/** Namespace names whose path under /v1/namespaces/ is another route (the namespaces plugin refuses them too). */
const RESERVED_NAMESPACE_NAMES = new Set(['templates']);

export interface TemplateInput {
  template_name?: string;
  description?: string | null;
}

export class TemplateService {
  constructor(
    private readonly store: TemplateStore,
    private readonly namespaces: NamespaceResolver,
    private readonly cloner: NamespaceCloner,
    private readonly announcer: Announcer,
    private readonly clock: Clock,
  ) {}

  /** Templates the caller may see, by name. */
  async list(caller: AuthContext, search: string | undefined): Promise<TemplateView[]> {
    return (await this.store.list(caller.organizationId, search)).filter((row) => this.mayRead(caller, row));
  }

  async get(caller: AuthContext, idOrName: string): Promise<TemplateView> {
    const row = await this.store.find(caller.organizationId, idOrName);
    if (!row || !this.mayRead(caller, row)) throw new NotFoundError(`Namespace template '${idOrName}' not found`, { template_id: idOrName });
    return row;
  }

  async create(caller: AuthContext, input: Required<Pick<TemplateInput, 'template_name'>> & TemplateInput & { source_namespace: string }): Promise<TemplateView> {
    const source = await this.namespaces.resolve(caller.organizationId, input.source_namespace);
    if (!source) throw new NotFoundError(`Namespace '${input.source_namespace}' not found`, { namespace: input.source_namespace });
    await this.cloner.checkSource(caller.organizationId, source.id, source.name);
    const now = this.clock.now();
    const row = {
      template_id: newId('tmpl'),
      organization_id: caller.organizationId,
      template_name: input.template_name,
      description: input.description ?? null,
      source_namespace_id: source.id,
      created_by: caller.userEmail,
      created_at: now,
      updated_at: now,
    };
    await this.guardName(row.template_name, () => this.store.insert(row));
    return { ...row, source_namespace_name: source.name };
  }

  async update(caller: AuthContext, idOrName: string, input: TemplateInput): Promise<TemplateView> {
    if (Object.keys(input).length === 0) throw new InputError('Nothing to update: send template_name or description');
    const before = await this.get(caller, idOrName);
    const changes = { ...input, updated_at: this.clock.now() };
    await this.guardName(input.template_name ?? before.template_name, () => this.store.update(caller.organizationId, before.template_id, changes));
    return { ...before, ...changes };
  }

  async delete(caller: AuthContext, idOrName: string): Promise<TemplateView> {
    const row = await this.get(caller, idOrName);
    await this.store.delete(caller.organizationId, row.template_id);
    return row;
  }

  async instantiate(caller: AuthContext, actor: AuditActor, idOrName: string, input: { namespace_name: string; description?: string | null }): Promise<CloneResult & { templateId: string }> {
    if (RESERVED_NAMESPACE_NAMES.has(input.namespace_name.toLowerCase())) {
      throw new RequestValidationError([{ loc: ['body', 'namespace_name'], msg: `'${input.namespace_name}' is reserved (/v1/namespaces/${input.namespace_name.toLowerCase()}/... is another route): choose another name`, type: 'reserved_name' }]);
    }
    const template = await this.get(caller, idOrName);
    if (template.source_namespace_name === null) throw sourceGone(template.template_name);
    const result = await this.cloner.clone(
      {
        organizationId: caller.organizationId,
        sourceNamespaceId: template.source_namespace_id,
        templateId: template.template_id,
        namespaceName: input.namespace_name,
        description: input.description === undefined ? template.description : input.description,
        actor,
      },
      template.template_name,
    );
    await this.announcer.announce({
      type: 'namespace.created',
      organization_id: caller.organizationId,
      data: { namespace_id: result.namespaceId, namespace_name: result.namespaceName, template_id: template.template_id },
    });
    return { ...result, templateId: template.template_id };
  }

  /** Whether the caller's scopes let it read the template's source namespace (what instantiating reads). */
  private mayRead(caller: AuthContext, row: TemplateView): boolean {
    const namespace = { id: row.source_namespace_id, name: row.source_namespace_name ?? row.source_namespace_id };
    return scopesAllow(caller.scopes, {
      organizationId: caller.organizationId,
      resource: { type: 'namespace', identifiers: [namespace.id, namespace.name] },
      namespace,
      operation: 'read_data',
    });
  }

  private async guardName(name: string, write: () => Promise<void>): Promise<void> {
    try {
      await write();
    } catch (err) {
      if (isUniqueViolation(err)) throw new ConflictError(`A namespace template named '${name}' already exists in this organization`, { template_name: name });
      throw err;
    }
  }
}
