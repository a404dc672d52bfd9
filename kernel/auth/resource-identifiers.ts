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

/** All identifiers of the resource the request names, its id first, then its name; undefined when there is none. */
export type IdentifierResolver = (query: IdentifierQuery) => Promise<readonly string[] | undefined>;

/** The namespace a namespace-scoped resource lives in, found by its (organization-unique) id. */
export type NamespaceLocator = (organizationId: string, id: string) => Promise<string | undefined>;

export class ResourceIdentifiers {
  private readonly resolvers = new Map<ResourceType, IdentifierResolver>();
  private readonly locators = new Map<ResourceType, NamespaceLocator>();

  registerLocator(type: ResourceType, locator: NamespaceLocator): void {
    if (this.locators.has(type)) throw new Error(`'${type}' resources are already located by another plugin`);
    this.locators.set(type, locator);
  }

  /**
   * The namespace id of the resource with this id, or undefined when there is none — nor when its namespace
   * was deleted (its contents are purged shortly after: until then they must be as unreachable as after).
   */
  async locate(type: ResourceType, organizationId: string, id: string): Promise<string | undefined> {
    const namespaceId = await this.locators.get(type)?.(organizationId, id);
    if (namespaceId === undefined) return undefined;
    const namespace = await this.find('namespace', { organizationId, namespace: null, identifier: namespaceId });
    return namespace?.[0] === namespaceId ? namespaceId : undefined;
  }

  register(type: ResourceType, resolver: IdentifierResolver): void {
    if (this.resolvers.has(type)) throw new Error(`identifiers of '${type}' are already resolved by another plugin`);
    this.resolvers.set(type, resolver);
  }

  async identifiersOf(type: ResourceType, query: IdentifierQuery): Promise<readonly string[]> {
    return (await this.find(type, query)) ?? [query.identifier];
  }

  /**
   * The identifiers (id first) of an existing resource, or undefined when none answers to the identifier.
   * Lets one plugin check another's resource exists (a collection's source bucket) without importing it.
   */
  async find(type: ResourceType, query: Omit<IdentifierQuery, 'source' | 'pathParams'> & Partial<IdentifierQuery>): Promise<readonly string[] | undefined> {
    const found = await this.resolvers.get(type)?.({ source: 'lookup', pathParams: {}, ...query });
    return found && found.length > 0 ? found : undefined;
  }
}
