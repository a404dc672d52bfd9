/**
 * A scope may name a resource by id or by name (`ns_4fT…`, `customer_acme`, `customer_*`), and a request
 * may too. Resource plugins register how to find every identifier of one of their resources, so the
 * authorizer can match a scope whichever form either side uses.
 */
import type { ResolvedNamespace } from './namespaces.js';
import type { ResourceType } from './scopes.js';

export interface IdentifierQuery {
  organizationId: string;
  namespace: ResolvedNamespace | null;
  identifier: string;
  /** Where the identifier came from (`path.key_name`, `body.email`, ...), and the request's path parameters. */
  source: string;
  pathParams: Readonly<Record<string, string>>;
}

/** All identifiers of the resource the request names (its id and name), or undefined when there is none. */
export type IdentifierResolver = (query: IdentifierQuery) => Promise<readonly string[] | undefined>;

export class ResourceIdentifiers {
  private readonly resolvers = new Map<ResourceType, IdentifierResolver>();

  register(type: ResourceType, resolver: IdentifierResolver): void {
    if (this.resolvers.has(type)) throw new Error(`identifiers of '${type}' are already resolved by another plugin`);
    this.resolvers.set(type, resolver);
  }

  async identifiersOf(type: ResourceType, query: IdentifierQuery): Promise<readonly string[]> {
    const found = await this.resolvers.get(type)?.(query);
    return found && found.length > 0 ? found : [query.identifier];
  }
}
