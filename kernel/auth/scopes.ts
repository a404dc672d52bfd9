/**
 * Resource scopes. An empty list is organization-wide. Otherwise a request is allowed when one scope
 * matches the resource it touches and allows the operation:
 * - `organization` scopes cover everything in the organization;
 * - a scope of the resource's own type covers that resource (by id or name);
 * - a `namespace` scope covers the namespace and every resource inside it.
 * `resource_id` is a literal, `*`, or a prefix pattern ending in `*`.
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

function scopeMatches(scope: ResourceScope, query: ScopeQuery): boolean {
  if (scope.operations && !scope.operations.includes(query.operation)) return false;
  if (scope.resource_type === 'organization') return patternMatches(scope.resource_id, query.organizationId);
  if (scope.resource_type === query.resource.type) {
    // A collection-level operation (list) is allowed; its results are filtered item by item.
    return query.resource.identifiers === undefined || anyMatch(scope.resource_id, query.resource.identifiers);
  }
  if (scope.resource_type === 'namespace' && query.namespace) {
    return anyMatch(scope.resource_id, [query.namespace.id, query.namespace.name]);
  }
  return false;
}

export function scopesAllow(scopes: readonly ResourceScope[], query: ScopeQuery): boolean {
  return scopes.length === 0 || scopes.some((scope) => scopeMatches(scope, query));
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
