/**
 * Authorization for one request: the key's permission against the operation's `x-permission`, the
 * namespace named by `X-Namespace`, and the key's scopes against the operation's `x-scope`.
 */
import { InputError, NotAllowedError, NotFoundError } from '../errors.js';
import type { AuthContext } from './authenticator.js';
import type { NamespaceResolver, ResolvedNamespace } from './namespaces.js';
import { satisfies, strongestPermission } from './permissions.js';
import { scopesAllow, scopesMayReachNamespace, type ResourceRef } from './scopes.js';
import type { OperationSpec, ScopeRule } from '../http/operations.js';
import type { ResourceIdentifiers } from './resource-identifiers.js';

export interface AuthorizationInput {
  auth: AuthContext;
  operation: OperationSpec;
  namespaceHeader: string | undefined;
  pathParams: Record<string, string>;
  body: unknown;
}

export class Authorizer {
  constructor(
    private readonly namespaces: NamespaceResolver | undefined,
    private readonly identifiers: ResourceIdentifiers,
  ) {}

  /** Checks the request and returns the namespace it runs in, if any. */
  async authorize(input: AuthorizationInput): Promise<ResolvedNamespace | null> {
    const { auth, operation } = input;
    if (!satisfies(auth.permissions, operation.permission)) {
      throw new NotAllowedError(
        `This operation requires the '${operation.permission}' permission; the key's strongest is '${strongestPermission(auth.permissions) ?? 'none'}'`,
        { required_permission: operation.permission },
      );
    }
    const namespace = await this.resolveHeader(input);
    if (operation.scope) await this.checkScope(input, operation.scope, namespace);
    return namespace;
  }

  private async resolveHeader(input: AuthorizationInput): Promise<ResolvedNamespace | null> {
    const { operation, namespaceHeader } = input;
    // A key bound to one retriever has no namespace to speak of (GET /v1/me is its only authenticated route).
    if (!operation.namespaceHeader || input.auth.boundRetriever) return null;
    if (!namespaceHeader) {
      if (operation.namespaceHeader === 'required') {
        throw new InputError('This operation needs the X-Namespace header (a namespace name or ns_ id)');
      }
      return null;
    }
    const namespace = await this.resolver().resolve(input.auth.organizationId, namespaceHeader);
    // Scoped keys learn nothing of namespaces outside their scopes: the same 403 whether it exists or not.
    if (!scopesMayReachNamespace(input.auth.scopes, namespace ?? { id: namespaceHeader, name: namespaceHeader })) {
      throw new NotAllowedError(`The API key's scopes do not include namespace '${namespaceHeader}'`, { namespace: namespaceHeader });
    }
    if (!namespace) throw new NotFoundError(`Namespace '${namespaceHeader}' not found`, { namespace: namespaceHeader });
    return namespace;
  }

  private async checkScope(input: AuthorizationInput, rule: ScopeRule, namespace: ResolvedNamespace | null): Promise<void> {
    // A key without scopes may do anything its permission allows: no need to look the resource up.
    if (input.auth.scopes.length === 0) return;
    const resource: ResourceRef = { type: rule.resource_type };
    const identifier = this.identifierOf(input, rule);
    if (identifier !== undefined) {
      // The request may name the resource by id or by name; a scope may use either.
      resource.identifiers = await this.identifiers.identifiersOf(rule.resource_type, {
        organizationId: input.auth.organizationId,
        namespace,
        identifier,
        source: rule.id_from!,
        pathParams: input.pathParams,
      });
    }
    if (rule.id_from === 'namespace' && namespace) resource.identifiers = [namespace.id, namespace.name];
    const allowed = scopesAllow(input.auth.scopes, {
      organizationId: input.auth.organizationId,
      resource,
      ...(namespace ? { namespace } : {}),
      operation: rule.operation,
    });
    if (!allowed) {
      const target = resource.identifiers ? `${rule.resource_type} '${resource.identifiers.at(-1)}'` : `${rule.resource_type} resources`;
      throw new NotAllowedError(`The API key's scopes do not allow ${rule.operation} on ${target}`, {
        resource_type: rule.resource_type,
        operation: rule.operation,
      });
    }
  }

  private identifierOf(input: AuthorizationInput, rule: ScopeRule): string | undefined {
    const from = rule.id_from;
    if (!from || from === 'namespace') return undefined;
    const [where, name] = from.split('.', 2) as [string, string];
    if (where === 'path') return input.pathParams[name];
    if (where === 'body' && input.body && typeof input.body === 'object') {
      const value = (input.body as Record<string, unknown>)[name];
      return typeof value === 'string' ? value : undefined;
    }
    return undefined;
  }

  private resolver(): NamespaceResolver {
    if (!this.namespaces) throw new Error('no plugin provides the NamespaceResolver service');
    return this.namespaces;
  }
}
