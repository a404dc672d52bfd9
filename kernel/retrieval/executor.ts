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

/** A saved retriever's definition, as publishing and templates read it. */
export interface SavedRetrieverDefinition {
  retrieverId: string;
  retrieverName: string;
  namespaceId: string;
  description: string | null;
  inputSchema: Record<string, Record<string, unknown>>;
  stages: ReadonlyArray<components['schemas']['RetrieverStage']>;
  collectionCount: number;
  displayConfig: Record<string, unknown>;
  version: number;
}

export interface RetrieverExecutor {
  /** A retriever of the namespace by name or `ret_` id, or null. */
  find(organizationId: string, namespaceId: string, nameOrId: string): Promise<SavedRetrieverDefinition | null>;
  /** 404 (NotFoundError) when the retriever is gone; input problems are 422 as on the private execute. */
  execute(request: SavedExecutionRequest): Promise<SavedExecution>;
  /** The new interaction ids; an `execution_id` that is not an execution of this retriever is a 404. */
  recordInteractions(request: SavedInteractionsRequest): Promise<string[]>;
}
