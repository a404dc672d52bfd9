/**
 * The operation table generated from the OpenAPI document, and matching a request to its operation.
 */
import { operationTable, type OperationId } from '../../generated/operations.js';
import type { RoutePermission } from '../auth/permissions.js';
import type { JsonLimit } from './body-checks.js';
import { InputError } from '../errors.js';
import type { ResourceType, ScopeOperation } from '../auth/scopes.js';

export type { OperationId };

export interface ScopeRule {
  resource_type: ResourceType;
  /** `namespace` (the X-Namespace header), `path.<param>`, `body.<field>`; absent for collection-level ops. */
  id_from?: string;
  operation: ScopeOperation;
}

export interface OperationSpec {
  operationId: OperationId;
  method: string;
  path: string;
  permission: RoutePermission;
  public: boolean;
  scope: ScopeRule | null;
  namespaceHeader: 'required' | 'optional' | null;
  /** `binary` bodies are streamed to the handler unparsed and skip schema validation of the body. */
  body: 'json' | 'binary' | null;
  credits: number;
  /** Parts of the JSON body bounded in size (`x-max-json-bytes`): a 422 above (body-checks.ts: oversizedJson). */
  jsonLimits: readonly JsonLimit[];
  /** `x-bound-keys`: keys bound to one retriever may call it (every other authenticated route refuses them). */
  boundKeys: boolean;
}

export const operations: ReadonlyMap<OperationId, OperationSpec> = new Map(
  (Object.entries(operationTable) as Array<[OperationId, Omit<OperationSpec, 'operationId'>]>).map(
    ([operationId, spec]) => [operationId, { operationId, ...spec }],
  ),
);

interface CompiledRoute {
  regex: RegExp;
  paramNames: string[];
  byMethod: Map<string, OperationSpec>;
  literalLength: number;
}

export type RouteMatch =
  | { kind: 'found'; operation: OperationSpec; params: Record<string, string> }
  | { kind: 'method_not_allowed'; allowed: string[] }
  | { kind: 'not_found' };

/** Matches method + path to an operation; literal segments win over parameters (`/a/b` before `/a/{x}`). */
export class OperationMatcher {
  private readonly routes: CompiledRoute[];

  constructor(specs: Iterable<OperationSpec>) {
    const byPath = new Map<string, CompiledRoute>();
    for (const spec of specs) {
      let route = byPath.get(spec.path);
      if (!route) {
        const paramNames: string[] = [];
        const pattern = spec.path.replace(/[.*+?^$()|[\]\\]/g, '\\$&').replace(/\{([^}]+)\}/g, (_, name: string) => {
          paramNames.push(name);
          return '([^/]+)';
        });
        route = {
          regex: new RegExp(`^${pattern}/?$`),
          paramNames,
          byMethod: new Map(),
          literalLength: spec.path.replace(/\{[^}]+\}/g, '').length,
        };
        byPath.set(spec.path, route);
      }
      route.byMethod.set(spec.method.toUpperCase(), spec);
    }
    this.routes = [...byPath.values()].sort((a, b) => b.literalLength - a.literalLength);
  }

  match(method: string, path: string): RouteMatch {
    // Literal routes are tried first; a literal route without this method falls through to a parameterised
    // one that has it (GET /v1/collections/create is the collection named "create").
    const allowed = new Set<string>();
    for (const route of this.routes) {
      const m = route.regex.exec(path);
      if (!m) continue;
      const verb = method.toUpperCase();
      // HEAD is GET without the body (RFC 9110 §9.3.2): every GET operation answers it.
      const operation = route.byMethod.get(verb) ?? (verb === 'HEAD' ? route.byMethod.get('GET') : undefined);
      if (!operation) {
        for (const known of route.byMethod.keys()) {
          allowed.add(known);
          if (known === 'GET') allowed.add('HEAD');
        }
        continue;
      }
      const params: Record<string, string> = {};
      route.paramNames.forEach((name, i) => {
        try {
          params[name] = decodeURIComponent(m[i + 1]!);
        } catch {
          throw new InputError(`The path parameter '${name}' is not valid percent-encoding`, { parameter: name });
        }
      });
      return { kind: 'found', operation, params };
    }
    return allowed.size > 0 ? { kind: 'method_not_allowed', allowed: [...allowed] } : { kind: 'not_found' };
  }

}
