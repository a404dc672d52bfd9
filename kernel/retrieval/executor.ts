/**
 * Runs a saved retriever, and records interactions on its results, on behalf of someone other than an API
 * key: the published-retriever endpoints (and retriever or marketplace keys). The retrievers plugin binds
 * `RetrieverExecutor`; callers never import that plugin. Executions run as the retriever's organization
 * with no principal and no scopes (the organization-wide view), and are recorded in the retriever's history
 * like any other; interactions land in its signals.
 */
import type { Logger } from 'pino';
import type { components } from '../../generated/openapi.js';
import type { ExecutionObserver, ExecutionOutcome } from './engine.js';
import type { PaginationRequest } from './pagination.js';

export type RetrieverInteractionInput = components['schemas']['RetrieverInteraction'];

export interface SavedRetrieverTarget {
  organizationId: string;
  namespaceId: string;
  retrieverId: string;
}

export interface SavedExecutionRequest extends SavedRetrieverTarget {
  inputs: Record<string, unknown>;
  pagination?: PaginationRequest;
  /** Fresh download URLs for the blobs the documents reference. */
  presignUrls: boolean;
  /** Recorded as the execution's `created_by` (e.g. `public:<public_name>`). */
  actor: string;
  observer?: ExecutionObserver;
  signal?: AbortSignal;
  log: Logger;
}

export interface SavedExecution {
  retrieverVersion: number;
  outcome: ExecutionOutcome;
}

export interface SavedInteractionsRequest extends SavedRetrieverTarget {
  interactions: ReadonlyArray<RetrieverInteractionInput>;
  /** Recorded as each interaction's `created_by`. */
  actor: string;
}

export interface RetrieverExecutor {
  /** 404 (NotFoundError) when the retriever is gone; input problems are 422 as on the private execute. */
  execute(request: SavedExecutionRequest): Promise<SavedExecution>;
  /** The new interaction ids; an `execution_id` that is not an execution of this retriever is a 404. */
  recordInteractions(request: SavedInteractionsRequest): Promise<string[]>;
}
