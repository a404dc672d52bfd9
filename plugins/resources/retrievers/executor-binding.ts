/**
 * `RetrieverExecutor` (kernel/retrieval/executor.ts) over the retriever service: saved executions and
 * interactions for callers without an API key (published retrievers). They run as the retriever's
 * organization with no principal and no scopes — the organization-wide view — and are recorded in the
 * retriever's history and signals like any other, with `created_by` naming the public caller.
 */
import type { NamespaceResolver } from '../../../kernel/auth/namespaces.js';
import { NotFoundError } from '../../../kernel/errors.js';
import type { RetrieverExecutor, SavedRetrieverTarget } from '../../../kernel/retrieval/executor.js';
import type { Caller, RetrieverService } from './service.js';
import type { RetrieverStore } from './store.js';

export function retrieverExecutor(retrievers: RetrieverService, store: RetrieverStore, namespaces: () => NamespaceResolver): RetrieverExecutor {
  const namespaceOf = async (target: SavedRetrieverTarget) => {
    const namespace = await namespaces().resolve(target.organizationId, target.namespaceId);
    if (!namespace) throw new NotFoundError('The retriever no longer exists', { retriever: target.retrieverId });
    return namespace;
  };
  const callerOf = (target: SavedRetrieverTarget, actor: string): Caller => ({ organizationId: target.organizationId, principalId: null, scopes: [], userEmail: actor });
  return {
    async find(organizationId, namespaceId, nameOrId) {
      const row = await store.find(organizationId, namespaceId, nameOrId);
      if (!row) return null;
      return {
        retrieverId: row.retriever_id, retrieverName: row.retriever_name, namespaceId: row.namespace_id, description: row.description,
        inputSchema: row.input_schema, stages: row.stages, collectionCount: row.collection_ids.length,
        displayConfig: row.display_config, version: Number(row.version),
      };
    },
    async execute(request) {
      const { row, outcome } = await retrievers.execute(callerOf(request, request.actor), await namespaceOf(request), request.retrieverId, {
        inputs: request.inputs,
        ...(request.pagination ? { pagination: request.pagination } : {}),
        presignUrls: request.presignUrls,
        ...(request.observer ? { observer: request.observer } : {}),
        ...(request.signal ? { signal: request.signal } : {}),
        log: request.log,
      });
      return { retrieverVersion: Number(row.version), outcome };
    },
    async recordInteractions(request) {
      return retrievers.recordInteractions(callerOf(request, request.actor), await namespaceOf(request), request.retrieverId, request.interactions);
    },
  };
}
