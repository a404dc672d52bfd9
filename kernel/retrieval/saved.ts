/**
 * Saved retrievers as readers outside the retrievers plugin see them (bound by that plugin): a definition
 * by name or id within a namespace, and the execution history written out so a reader counts every
 * execution answered before it (the history is written behind the answer).
 */
import type { components } from '../../generated/openapi.js';

type Schemas = components['schemas'];

export interface SavedRetrieverDefinition {
  retriever_id: string;
  retriever_name: string;
  stages: Array<Schemas['RetrieverStage']>;
  budget_limits: Schemas['RetrieverBudgetLimits'];
  cache_config: Schemas['RetrieverCacheConfig'];
  cache_stage_names: string[];
}

export interface SavedRetrievers {
  /** The retriever of that name or id in the namespace; undefined when there is none. */
  find(organizationId: string, namespaceId: string, nameOrId: string): Promise<SavedRetrieverDefinition | undefined>;
  /** Writes every execution recorded so far (queued behind their answers) to the history table. */
  flushHistory(): Promise<void>;
}
