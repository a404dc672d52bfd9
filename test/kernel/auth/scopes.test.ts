import { describe, expect, it } from 'vitest';
import {
  scopesMayReachNamespace,
  SCOPE_OPERATIONS,
  operationsForPermission,
  patternMatches,
  scopesAllow,
  type ResourceScope,
  type ScopeOperation,
  type ScopeQuery,
} from '../../../kernel/auth/scopes.js';

const ORG = 'org_123';
const NS_A = { id: 'ns_aaaa', name: 'customer_a' };
const NS_B = { id: 'ns_bbbb', name: 'customer_b' };
const NS_INTERNAL = { id: 'ns_iiii', name: 'internal' };

/** A request touching namespace `ns` itself (GET /v1/namespaces/{name}). */
function onNamespace(ns: { id: string; name: string }, operation: ScopeOperation = 'read_data'): ScopeQuery {
  return { organizationId: ORG, resource: { type: 'namespace', identifiers: [ns.id, ns.name] }, namespace: ns, operation };
}

/** A request touching a collection inside namespace `ns`. */
function inNamespace(ns: { id: string; name: string }, collection: string, operation: ScopeOperation = 'read_data'): ScopeQuery {
  return { organizationId: ORG, resource: { type: 'collection', identifiers: [collection] }, namespace: ns, operation };
}

describe('patternMatches', () => {
  it('matches a literal exactly, and case-sensitively', () => {
    expect(patternMatches('customer_a', 'customer_a')).toBe(true);
    expect(patternMatches('customer_a', 'customer_ab')).toBe(false);
    expect(patternMatches('customer_a', 'customer_')).toBe(false);
    expect(patternMatches('customer_a', 'Customer_A')).toBe(false);
  });

  it('matches everything with `*`', () => {
    expect(patternMatches('*', 'anything')).toBe(true);
    expect(patternMatches('*', '')).toBe(true);
  });

  it('matches a prefix with a trailing `*`', () => {
    expect(patternMatches('ns_customer_*', 'ns_customer_1')).toBe(true);
    expect(patternMatches('ns_customer_*', 'ns_customer_')).toBe(true);
    expect(patternMatches('ns_customer_*', 'ns_customer')).toBe(false);
    expect(patternMatches('ns_customer_*', 'ns_internal_1')).toBe(false);
    expect(patternMatches('ns_customer_*', 'xns_customer_1')).toBe(false);
  });

  it('treats a `*` that is not last as a literal character', () => {
    expect(patternMatches('a*b', 'axxb')).toBe(false);
    expect(patternMatches('a*b', 'a*b')).toBe(true);
  });
});

describe('scopesAllow', () => {
  it('allows everything when there are no scopes (organization-wide)', () => {
    expect(scopesAllow([], onNamespace(NS_A, 'modify_infrastructure'))).toBe(true);
    expect(scopesAllow([], { organizationId: ORG, resource: { type: 'api_key' }, operation: 'manage_permissions' })).toBe(true);
  });

  describe('organization scopes', () => {
    it('cover every resource of the organization', () => {
      const scopes: ResourceScope[] = [{ resource_type: 'organization', resource_id: ORG }];
      expect(scopesAllow(scopes, onNamespace(NS_A))).toBe(true);
      expect(scopesAllow(scopes, inNamespace(NS_B, 'col_1', 'write_data'))).toBe(true);
      expect(scopesAllow(scopes, { organizationId: ORG, resource: { type: 'api_key' }, operation: 'manage_permissions' })).toBe(true);
    });

    it('accept `*` and prefix patterns for the organization id', () => {
      expect(scopesAllow([{ resource_type: 'organization', resource_id: '*' }], onNamespace(NS_A))).toBe(true);
      expect(scopesAllow([{ resource_type: 'organization', resource_id: 'org_*' }], onNamespace(NS_A))).toBe(true);
    });

    it('do not cover another organization', () => {
      const scopes: ResourceScope[] = [{ resource_type: 'organization', resource_id: 'org_other' }];
      expect(scopesAllow(scopes, onNamespace(NS_A))).toBe(false);
      expect(scopesAllow(scopes, { organizationId: ORG, resource: { type: 'user' }, operation: 'manage_permissions' })).toBe(false);
    });

    it('respect their operations list', () => {
      const scopes: ResourceScope[] = [{ resource_type: 'organization', resource_id: ORG, operations: ['read_data'] }];
      expect(scopesAllow(scopes, onNamespace(NS_A, 'read_data'))).toBe(true);
      expect(scopesAllow(scopes, onNamespace(NS_A, 'modify_infrastructure'))).toBe(false);
    });
  });

  describe('namespace scopes', () => {
    it('cover the namespace by literal id or literal name', () => {
      expect(scopesAllow([{ resource_type: 'namespace', resource_id: NS_A.id }], onNamespace(NS_A))).toBe(true);
      expect(scopesAllow([{ resource_type: 'namespace', resource_id: NS_A.name }], onNamespace(NS_A))).toBe(true);
      expect(scopesAllow([{ resource_type: 'namespace', resource_id: NS_A.id }], onNamespace(NS_B))).toBe(false);
      expect(scopesAllow([{ resource_type: 'namespace', resource_id: NS_A.name }], onNamespace(NS_B))).toBe(false);
    });

    it('cover every resource inside the namespace', () => {
      const scopes: ResourceScope[] = [{ resource_type: 'namespace', resource_id: NS_A.name }];
      expect(scopesAllow(scopes, inNamespace(NS_A, 'col_1'))).toBe(true);
      expect(scopesAllow(scopes, inNamespace(NS_A, 'col_2', 'delete_data'))).toBe(true);
      expect(scopesAllow(scopes, inNamespace(NS_B, 'col_1'))).toBe(false);
    });

    it('match namespace names by prefix pattern', () => {
      const scopes: ResourceScope[] = [{ resource_type: 'namespace', resource_id: 'customer_*' }];
      expect(scopesAllow(scopes, onNamespace(NS_A))).toBe(true);
      expect(scopesAllow(scopes, onNamespace(NS_B))).toBe(true);
      expect(scopesAllow(scopes, onNamespace(NS_INTERNAL))).toBe(false);
      expect(scopesAllow(scopes, inNamespace(NS_B, 'col_9'))).toBe(true);
      expect(scopesAllow(scopes, inNamespace(NS_INTERNAL, 'col_9'))).toBe(false);
    });

    it('match `*` for every namespace', () => {
      const scopes: ResourceScope[] = [{ resource_type: 'namespace', resource_id: '*' }];
      expect(scopesAllow(scopes, onNamespace(NS_INTERNAL))).toBe(true);
      expect(scopesAllow(scopes, inNamespace(NS_B, 'c'))).toBe(true);
    });

    it('allow a collection-level operation (list) whose items are filtered later', () => {
      const scopes: ResourceScope[] = [{ resource_type: 'namespace', resource_id: NS_A.name }];
      expect(scopesAllow(scopes, { organizationId: ORG, resource: { type: 'namespace' }, operation: 'read_data' })).toBe(true);
    });

    it('do not cover resources outside any namespace', () => {
      const scopes: ResourceScope[] = [{ resource_type: 'namespace', resource_id: '*' }];
      expect(scopesAllow(scopes, { organizationId: ORG, resource: { type: 'api_key' }, operation: 'manage_permissions' })).toBe(false);
      expect(scopesAllow(scopes, { organizationId: ORG, resource: { type: 'user', identifiers: ['a@b.c'] }, operation: 'manage_permissions' })).toBe(false);
    });

    it('respect their operations list', () => {
      const scopes: ResourceScope[] = [{ resource_type: 'namespace', resource_id: NS_A.name, operations: ['read_data', 'execute_retriever'] }];
      expect(scopesAllow(scopes, onNamespace(NS_A, 'read_data'))).toBe(true);
      expect(scopesAllow(scopes, inNamespace(NS_A, 'c', 'execute_retriever'))).toBe(true);
      expect(scopesAllow(scopes, onNamespace(NS_A, 'modify_infrastructure'))).toBe(false);
      expect(scopesAllow(scopes, inNamespace(NS_A, 'c', 'write_data'))).toBe(false);
    });

    it('treat operations: null like an omitted list, and an empty list as allowing nothing', () => {
      expect(scopesAllow([{ resource_type: 'namespace', resource_id: NS_A.name, operations: null }], onNamespace(NS_A, 'delete_data'))).toBe(true);
      expect(scopesAllow([{ resource_type: 'namespace', resource_id: NS_A.name, operations: [] }], onNamespace(NS_A, 'read_data'))).toBe(false);
    });
  });

  describe("scopes of the resource's own type", () => {
    it('cover that resource by id or name', () => {
      const scopes: ResourceScope[] = [{ resource_type: 'collection', resource_id: 'col_1' }];
      expect(scopesAllow(scopes, inNamespace(NS_A, 'col_1'))).toBe(true);
      expect(scopesAllow(scopes, inNamespace(NS_B, 'col_1'))).toBe(true);
      expect(scopesAllow(scopes, inNamespace(NS_A, 'col_2'))).toBe(false);
    });

    it('match any of the identifiers a resource answers to', () => {
      const scopes: ResourceScope[] = [{ resource_type: 'retriever', resource_id: '*/search_*' }];
      const query: ScopeQuery = {
        organizationId: ORG,
        resource: { type: 'retriever', identifiers: ['ret_123', 'search_products'] },
        namespace: NS_A,
        operation: 'execute_retriever',
      };
      expect(scopesAllow(scopes, query)).toBe(true);
      expect(scopesAllow(scopes, { ...query, resource: { type: 'retriever', identifiers: ['ret_123', 'other'] } })).toBe(false);
    });

    it('confine a bare name of a namespaced resource to the key\'s namespace scopes', () => {
      const query: ScopeQuery = {
        organizationId: ORG,
        resource: { type: 'retriever', identifiers: ['ret_123', 'search_products'] },
        namespace: NS_A,
        operation: 'execute_retriever',
      };
      expect(scopesAllow([{ resource_type: 'retriever', resource_id: 'search_*' }], query)).toBe(false);
      const confined: ResourceScope[] = [
        { resource_type: 'namespace', resource_id: NS_A.name, operations: ['read_data'] },
        { resource_type: 'retriever', resource_id: 'search_*' },
      ];
      expect(scopesAllow(confined, query)).toBe(true);
      expect(scopesAllow(confined, { ...query, namespace: { id: 'ns_other', name: 'other' } })).toBe(false);
    });

    it('do not cover resources of another type', () => {
      const scopes: ResourceScope[] = [{ resource_type: 'collection', resource_id: '*' }];
      expect(scopesAllow(scopes, { organizationId: ORG, resource: { type: 'bucket', identifiers: ['b1'] }, operation: 'read_data' })).toBe(false);
      expect(scopesAllow(scopes, onNamespace(NS_A))).toBe(false);
    });

    it('respect their operations list', () => {
      const scopes: ResourceScope[] = [{ resource_type: 'retriever', resource_id: 'ret_1', operations: ['execute_retriever'] }];
      const base: ScopeQuery = { organizationId: ORG, resource: { type: 'retriever', identifiers: ['ret_1'] }, operation: 'execute_retriever' };
      expect(scopesAllow(scopes, base)).toBe(true);
      expect(scopesAllow(scopes, { ...base, operation: 'delete_retriever' })).toBe(false);
    });

    it('api_key scopes cover key management', () => {
      const scopes: ResourceScope[] = [{ resource_type: 'api_key', resource_id: '*', operations: ['manage_permissions'] }];
      expect(scopesAllow(scopes, { organizationId: ORG, resource: { type: 'api_key' }, operation: 'manage_permissions' })).toBe(true);
      expect(scopesAllow(scopes, onNamespace(NS_A))).toBe(false);
    });
  });

  it('tells which namespaces a key could reach at all (the same answer whether one exists or not)', () => {
    const reach = (scopes: ResourceScope[], ns: { id: string; name: string }) => scopesMayReachNamespace(scopes, ns);
    expect(reach([], NS_B)).toBe(true);
    expect(reach([{ resource_type: 'namespace', resource_id: 'customer_a' }], NS_A)).toBe(true);
    expect(reach([{ resource_type: 'namespace', resource_id: 'customer_a' }], NS_B)).toBe(false);
    expect(reach([{ resource_type: 'namespace', resource_id: 'customer_*' }], { id: 'nope', name: 'nope' })).toBe(false);
    expect(reach([{ resource_type: 'bucket', resource_id: 'customer_a/d*' }], NS_A)).toBe(true);
    expect(reach([{ resource_type: 'bucket', resource_id: 'customer_a/d*' }], NS_B)).toBe(false);
    expect(reach([{ resource_type: 'bucket', resource_id: '*/shared' }], NS_B)).toBe(true);
    // An id says nothing of its namespace; an organization scope covers them all.
    expect(reach([{ resource_type: 'collection', resource_id: 'col_123' }], NS_B)).toBe(true);
    expect(reach([{ resource_type: 'organization', resource_id: ORG }], NS_B)).toBe(true);
    // A bare name is confined to the namespace scopes; keys and users live in no namespace.
    expect(reach([{ resource_type: 'namespace', resource_id: 'customer_a' }, { resource_type: 'bucket', resource_id: 'docs' }], NS_B)).toBe(false);
    expect(reach([{ resource_type: 'api_key', resource_id: '*' }], NS_A)).toBe(false);
  });

  it('allows when any one scope allows', () => {
    const scopes: ResourceScope[] = [
      { resource_type: 'namespace', resource_id: NS_A.name, operations: ['read_data'] },
      { resource_type: 'namespace', resource_id: NS_B.id },
    ];
    expect(scopesAllow(scopes, onNamespace(NS_A, 'read_data'))).toBe(true);
    expect(scopesAllow(scopes, onNamespace(NS_A, 'modify_infrastructure'))).toBe(false);
    expect(scopesAllow(scopes, onNamespace(NS_B, 'modify_infrastructure'))).toBe(true);
    expect(scopesAllow(scopes, onNamespace(NS_INTERNAL, 'read_data'))).toBe(false);
  });
});

describe('operationsForPermission', () => {
  it('grows with the permission level and only admin may manage permissions', () => {
    const read = operationsForPermission('read');
    const write = operationsForPermission('write');
    const del = operationsForPermission('delete');
    const admin = operationsForPermission('admin');
    expect(read).toEqual(expect.arrayContaining(['read_data', 'execute_retriever']));
    expect(read).not.toContain('write_data');
    for (const op of read) expect(write).toContain(op);
    for (const op of write) expect(del).toContain(op);
    for (const op of del) expect(admin).toContain(op);
    expect(write).toEqual(expect.arrayContaining(['write_data', 'create_retriever', 'modify_infrastructure']));
    expect(write).not.toContain('delete_data');
    expect(del).toEqual(expect.arrayContaining(['delete_data', 'delete_retriever', 'cancel_job', 'delete_cluster']));
    expect(del).not.toContain('manage_permissions');
    expect(admin).toContain('manage_permissions');
  });

  it('gives admin every scope operation, each once', () => {
    const admin = operationsForPermission('admin');
    expect([...admin].sort()).toEqual([...SCOPE_OPERATIONS].sort());
    expect(new Set(admin).size).toBe(admin.length);
  });
});
