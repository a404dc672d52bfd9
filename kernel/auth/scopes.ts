/**
 * Resource scopes. An empty list is organization-wide. Otherwise a request is allowed when one scope
 * matches the resource it touches and allows the operation:
 * - `organization` scopes cover everything in the organization;
 * - a scope of the resource's own type covers that resource (by id or name);
 * - a `namespace` scope covers the namespace and every resource inside it.
 * `resource_id` is a literal, `*`, or a prefix pattern ending in `*`.
 *
 * Buckets, collections and retrievers live in namespaces, and their names repeat across namespaces, so a
 * name alone does not say which one. Their scopes name one by id (`bkt_…`, unique in the organization),
 * or by `namespace/name` where each part is a literal, `*` or a prefix pattern (`customer_a/shared`,
 * `customer_x*` + `/shared`, or `*` + `/shared` for every namespace on purpose). A bare name (`shared`,
 * as keys made before this rule have) matches only inside a namespace one of the key's namespace scopes
 * covers, never across the organization; new keys cannot name one without such a namespace scope.
 */
import type { Permission } from './permissions.js';

export type ResourceType =
  | 'organization' | 'user' | 'api_key' | 'namespace' | 'collection' | 'bucket' | 'retriever' | 'cluster'
  | 'taxonomy' | 'storage_connection' | 'alert' | 'annotation' | 'secret' | 'webhook';

export type ScopeOperation =
  | 'read_data' | 'write_data' | 'delete_data' | 'execute_retriever' | 'create_retriever'
  | 'delete_retriever' | 'execute_job' | 'cancel_job' | 'create_cluster' | 'delete_cluster'
  | 'modify_cluster' | 'modify_infrastructure' | 'manage_permissions';

export const SCOPE_OPERATIONS: readonly ScopeOperation[] = [
  'read_data', 'write_data', 'delete_data', 'execute_retriever', 'create_retriever', 'delete_retriever',
  'execute_job', 'cancel_job', 'create_cluster', 'delete_cluster', 'modify_cluster',
  'modify_infrastructure', 'manage_permissions',
];

export interface ResourceScope {
  resource_type: ResourceType;
  resource_id: string;
  operations?: ScopeOperation[] | null;
}

/** The names a resource answers to: its id and, where it has one, its name. */
export interface ResourceRef {
  type: ResourceType;
  /** Absent for collection-level operations (list, create without a known id). */
  identifiers?: readonly string[];
}

export interface ScopeQuery {
  organizationId: string;
  resource: ResourceRef;
  /** The namespace the resource lives in, when it lives in one. */
  namespace?: { id: string; name: string };
  operation: ScopeOperation;
}

export function patternMatches(pattern: string, candidate: string): boolean {
  if (pattern === '*') return true;
  if (pattern.endsWith('*')) return candidate.startsWith(pattern.slice(0, -1));
  return pattern === candidate;
}

function anyMatch(pattern: string, candidates: readonly string[]): boolean {
  return candidates.some((c) => patternMatches(pattern, c));
}

/** Resource types that live inside a namespace, with the prefix of their ids. */
export const NAMESPACED_ID_PREFIXES: Partial<Record<ResourceType, string>> = { bucket: 'bkt_', collection: 'col_', retriever: 'ret_' };

const PATTERN_PART = /^(\*|[^*/]+\*?)$/;

/** A namespaced scope's `resource_id`, read: everything, an id (pattern), `namespace/name`, or a bare name. */
type NamespacedTarget =
  | { kind: 'any' }
  | { kind: 'id'; pattern: string }
  | { kind: 'qualified'; namespace: string; name: string }
  | { kind: 'bare'; pattern: string };

function namespacedTarget(type: ResourceType, resourceId: string): NamespacedTarget {
  if (resourceId === '*') return { kind: 'any' };
  const slash = resourceId.indexOf('/');
  if (slash >= 0) return { kind: 'qualified', namespace: resourceId.slice(0, slash), name: resourceId.slice(slash + 1) };
  const idPrefix = NAMESPACED_ID_PREFIXES[type]!;
  return resourceId.startsWith(idPrefix) ? { kind: 'id', pattern: resourceId } : { kind: 'bare', pattern: resourceId };
}

/**
 * Why a scope's `resource_id` cannot be stored, or undefined when it can (checked at key create and update).
 * `scopes` is the whole list, because a bare name needs a namespace scope to be confined to.
 */
export function scopeProblem(scope: ResourceScope, scopes: readonly ResourceScope[]): string | undefined {
  const idPrefix = NAMESPACED_ID_PREFIXES[scope.resource_type];
  if (!idPrefix) {
    return scope.resource_id.includes('/')
      ? `a ${scope.resource_type} scope names one ${scope.resource_type} by id or name; only bucket, collection and retriever scopes take "namespace/name"`
      : undefined;
  }
  const target = namespacedTarget(scope.resource_type, scope.resource_id);
  if (target.kind === 'qualified') {
    if (!PATTERN_PART.test(target.namespace) || !PATTERN_PART.test(target.name)) {
      return `write "namespace/name", each part a literal, "*" or a prefix ending in "*" (e.g. "customer_*/shared", "*/shared")`;
    }
    return undefined;
  }
  if (target.kind === 'bare' && !scopes.some((s) => s.resource_type === 'namespace')) {
    return `the ${scope.resource_type} name '${scope.resource_id}' exists in every namespace that has one: write "namespace/${scope.resource_id}" ` +
      `(or "*/${scope.resource_id}" to mean every namespace), or a ${idPrefix}… id`;
  }
  return undefined;
}

function namespaceMatches(pattern: string, namespace: { id: string; name: string } | undefined): boolean {
  if (pattern === '*') return true;
  return namespace !== undefined && anyMatch(pattern, [namespace.id, namespace.name]);
}

function namespacedScopeMatches(scope: ResourceScope, query: ScopeQuery, confinedTo: readonly ResourceScope[]): boolean {
  const target = namespacedTarget(scope.resource_type, scope.resource_id);
  const identifiers = query.resource.identifiers;
  switch (target.kind) {
    case 'any':
      return true;
    case 'id':
      return identifiers === undefined || patternMatches(target.pattern, identifiers[0]!);
    case 'qualified':
      if (!namespaceMatches(target.namespace, query.namespace)) return false;
      return identifiers === undefined || anyMatch(target.name, identifiers);
    case 'bare':
      // Only inside a namespace the key's namespace scopes cover.
      if (!confinedTo.some((s) => query.namespace && anyMatch(s.resource_id, [query.namespace.id, query.namespace.name]))) return false;
      return identifiers === undefined || anyMatch(target.pattern, identifiers);
  }
}

function scopeMatches(scope: ResourceScope, query: ScopeQuery, namespaceScopes: readonly ResourceScope[]): boolean {
  if (scope.operations && !scope.operations.includes(query.operation)) return false;
  if (scope.resource_type === 'organization') return patternMatches(scope.resource_id, query.organizationId);
  if (scope.resource_type === query.resource.type) {
    // A collection-level operation (list) is allowed; its results are filtered item by item.
    if (NAMESPACED_ID_PREFIXES[scope.resource_type]) return namespacedScopeMatches(scope, query, namespaceScopes);
    return query.resource.identifiers === undefined || anyMatch(scope.resource_id, query.resource.identifiers);
  }
  if (scope.resource_type === 'namespace' && query.namespace) {
    return anyMatch(scope.resource_id, [query.namespace.id, query.namespace.name]);
  }
  return false;
}

/**
 * Whether any scope could allow something inside this namespace (a namespace, organization or namespaced
 * scope that can point into it; an id scope might, as ids do not say their namespace). A key none of
 * whose scopes can is told so before the namespace is looked up, the same way whether it exists or not.
 */
export function scopesMayReachNamespace(scopes: readonly ResourceScope[], namespace: { id: string; name: string }): boolean {
  if (scopes.length === 0) return true;
  const namespaceScopes = scopes.filter((s) => s.resource_type === 'namespace');
  const confined = namespaceScopes.some((s) => anyMatch(s.resource_id, [namespace.id, namespace.name]));
  return scopes.some((scope) => {
    if (scope.resource_type === 'organization') return true;
    if (scope.resource_type === 'namespace') return confined;
    if (!NAMESPACED_ID_PREFIXES[scope.resource_type]) return false;
    const target = namespacedTarget(scope.resource_type, scope.resource_id);
    switch (target.kind) {
      case 'any':
      case 'id':
        return true;
      case 'qualified':
        return namespaceMatches(target.namespace, namespace);
      case 'bare':
        return confined;
    }
  });
}

export function scopesAllow(scopes: readonly ResourceScope[], query: ScopeQuery): boolean {
  if (scopes.length === 0) return true;
  const namespaceScopes = scopes.filter((s) => s.resource_type === 'namespace');
  return scopes.some((scope) => scopeMatches(scope, query, namespaceScopes));
}

/** The scope operations a permission level can ever perform, before scopes narrow them. */
export function operationsForPermission(level: Permission): ScopeOperation[] {
  const read: ScopeOperation[] = ['read_data', 'execute_retriever'];
  const write: ScopeOperation[] = [...read, 'write_data', 'create_retriever', 'execute_job', 'create_cluster',
    'modify_cluster', 'modify_infrastructure'];
  const del: ScopeOperation[] = [...write, 'delete_data', 'delete_retriever', 'cancel_job', 'delete_cluster'];
  switch (level) {
    case 'read': return read;
    case 'write': return write;
    case 'delete': return del;
    case 'admin': return [...del, 'manage_permissions'];
  }
}
