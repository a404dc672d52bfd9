/** Retriever and execution rows, always within one organization (and namespace, for names). */
import type { Knex } from 'knex';
import type { DatabaseNotices } from '../../../kernel/db/database.js';
import { deepFreeze, LocalReadCache } from '../../../kernel/db/local-read-cache.js';
import { CROSS_PROCESS_TTL_MS, type CrossProcessNotices } from '../../../kernel/db/pg-notices.js';
import type { components } from '../../../generated/openapi.js';
import { packInputs, unpackInputs } from '../../../kernel/retrieval/history-inputs.js';

type Schemas = components['schemas'];

export interface RetrieverRow {
  retriever_id: string;
  organization_id: string;
  namespace_id: string;
  retriever_name: string;
  description: string | null;
  collection_identifiers: string[];
  collection_ids: string[];
  input_schema: Schemas['RetrieverInputSchema'];
  stages: Array<Schemas['RetrieverStage']>;
  budget_limits: Schemas['RetrieverBudgetLimits'];
  feature_dependencies: Array<Schemas['FeatureDependency']>;
  stage_versions: Schemas['RetrieverConfig']['stage_versions'];
  tags: string[];
  display_config: Schemas['RetrieverDisplayConfig'];
  cache_config: Schemas['RetrieverCacheConfig'];
  cache_stage_names: string[];
  version: number;
  created_by: string | null;
  updated_by: string | null;
  created_at: Date;
  updated_at: Date;
}

export interface ExecutionRow {
  execution_id: string;
  organization_id: string;
  namespace_id: string;
  retriever_id: string;
  retriever_version: number;
  status: 'completed' | 'failed' | 'budget_exceeded';
  inputs: Record<string, unknown>;
  collection_ids: string[];
  result_document_ids: string[];
  /** Each result's score (null without one), in the order of result_document_ids; null on older rows. */
  result_scores: Array<number | null> | null;
  total_results: number;
  stage_statistics: Schemas['RetrieverStatistics'];
  budget: Schemas['RetrieverBudgetUse'];
  error: string | null;
  duration_ms: number;
  started_at: Date;
  created_by: string | null;
  principal_id: string | null;
  /** Null when the retriever did not cache; else whether a cached stage output was used. */
  cache_hit: boolean | null;
}

const RETRIEVER_JSON = [
  'collection_identifiers', 'collection_ids', 'input_schema', 'stages', 'budget_limits', 'feature_dependencies', 'stage_versions',
  'tags', 'display_config', 'cache_config', 'cache_stage_names',
] as const;
const EXECUTION_JSON = ['collection_ids', 'result_document_ids', 'result_scores', 'stage_statistics', 'budget'] as const;

function toColumns(row: Record<string, unknown>, json: readonly string[]): Record<string, unknown> {
  const out: Record<string, unknown> = { ...row };
  for (const column of json) if (column in out) out[column] = JSON.stringify(out[column]);
  return out;
}

/** A history row as read, its stored inputs text turned back into the inputs. */
function withInputs(row: ExecutionRow): ExecutionRow {
  return { ...row, inputs: unpackInputs(row.inputs) };
}

export interface InteractionRow {
  interaction_id: string;
  organization_id: string;
  namespace_id: string;
  retriever_id: string;
  execution_id: string | null;
  document_id: string;
  interaction_types: string[];
  position: number | null;
  query_snapshot: Record<string, unknown> | null;
  session_id: string | null;
  created_by: string | null;
  created_at: Date;
}

export interface RetrieverListQuery {
  organizationId: string;
  namespaceId: string;
  search?: string;
  tags?: string[];
  limit: number;
  offset: number;
}

export class RetrieverStore {
  /** Definitions by (organization, namespace, name or id), kept while this process is the only writer. */
  private readonly definitions: LocalReadCache<RetrieverRow>;

  constructor(private readonly db: Knex, options: { onlyWriter: boolean; notices?: DatabaseNotices; crossProcess?: CrossProcessNotices } = { onlyWriter: false }) {
    this.definitions = new LocalReadCache({
      enabled: options.onlyWriter, maxEntries: 10_000, shared: { name: 'retrievers', notices: options.notices },
      ...(options.crossProcess ? { crossProcess: { name: 'retrievers', notices: options.crossProcess, ttlMs: CROSS_PROCESS_TTL_MS } } : {}),
    });
  }

  /** By `ret_` id or by name (case-insensitive) within a namespace. The row is shared: never change it. */
  find(organizationId: string, namespaceId: string, nameOrId: string): Promise<RetrieverRow | undefined> {
    return this.definitions.read(`${organizationId}\u0000${namespaceId}\u0000${nameOrId}`, async () => {
      const row = await this.findInDatabase(organizationId, namespaceId, nameOrId);
      return row && deepFreeze(row);
    });
  }

  private findInDatabase(organizationId: string, namespaceId: string, nameOrId: string): Promise<RetrieverRow | undefined> {
    return this.db<RetrieverRow>('retrievers')
      .where({ organization_id: organizationId, namespace_id: namespaceId })
      .where((q) => q.where({ retriever_id: nameOrId }).orWhereRaw('lower(retriever_name) = lower(?)', [nameOrId]))
      .orderByRaw('retriever_id = ? desc', [nameOrId])
      .first();
  }

  findById(organizationId: string, retrieverId: string): Promise<RetrieverRow | undefined> {
    return this.db<RetrieverRow>('retrievers').where({ organization_id: organizationId, retriever_id: retrieverId }).first();
  }

  async list(query: RetrieverListQuery): Promise<{ rows: RetrieverRow[]; total: number }> {
    const q = this.db<RetrieverRow>('retrievers').where({ organization_id: query.organizationId, namespace_id: query.namespaceId });
    if (query.search) q.whereRaw("strpos(lower(retriever_name), lower(?)) > 0", [query.search]);
    if (query.tags && query.tags.length > 0) q.whereRaw('tags @> ?::jsonb', [JSON.stringify(query.tags)]);
    const [counted] = (await q.clone().count({ count: '*' })) as Array<{ count: string | number }>;
    const count = counted?.count ?? 0;
    const rows = await q.orderByRaw('lower(retriever_name), retriever_id').limit(query.limit).offset(query.offset);
    return { rows, total: Number(count) };
  }

  /** Saved retrievers that run over this collection (it must not be deleted from under them). */
  readersOf(organizationId: string, collectionId: string): Promise<Array<Pick<RetrieverRow, 'retriever_id' | 'retriever_name'>>> {
    return this.db<RetrieverRow>('retrievers')
      .where({ organization_id: organizationId })
      .whereRaw('collection_ids @> ?::jsonb', [JSON.stringify([collectionId])])
      .orderByRaw('lower(retriever_name)')
      .select('retriever_id', 'retriever_name');
  }

  // Every write forgets every cached definition: they are rare, and a rename changes which name finds which row.
  async insert(row: RetrieverRow): Promise<void> {
    try {
      await this.db('retrievers').insert(toColumns({ ...row }, RETRIEVER_JSON));
    } finally {
      this.definitions.forgetAll();
    }
  }

  async update(retrieverId: string, changes: Partial<RetrieverRow>): Promise<void> {
    try {
      await this.db('retrievers').where({ retriever_id: retrieverId }).update(toColumns({ ...changes }, RETRIEVER_JSON));
    } finally {
      this.definitions.forgetAll();
    }
  }

  /** Ids of the namespace's retrievers (a deleted namespace's purge). */
  async idsInNamespace(organizationId: string, namespaceId: string): Promise<string[]> {
    const rows = (await this.db('retrievers').where({ organization_id: organizationId, namespace_id: namespaceId }).select('retriever_id')) as Array<{ retriever_id: string }>;
    return rows.map((r) => r.retriever_id);
  }

  async delete(retrieverId: string): Promise<void> {
    try {
      await this.db('retrievers').where({ retriever_id: retrieverId }).delete();
      // No foreign key (an eviction may be recorded while its retriever goes): removed here instead.
      await this.db('retriever_cache_evictions').where({ retriever_id: retrieverId }).delete();
    } finally {
      this.definitions.forgetAll();
    }
  }

  async insertExecutions(rows: readonly ExecutionRow[]): Promise<void> {
    if (rows.length === 0) return;
    await this.db('retriever_executions').insert(rows.map((row) => toColumns({ ...row, inputs: packInputs(row.inputs) }, EXECUTION_JSON)));
  }

  /** `principalId` (user-scoped keys): only the executions that principal ran (their results name its documents). */
  async listExecutions(retrieverId: string, principalId: string | null, limit: number, offset: number): Promise<{ rows: ExecutionRow[]; total: number }> {
    const q = this.db<ExecutionRow>('retriever_executions').where({ retriever_id: retrieverId });
    if (principalId) q.where({ principal_id: principalId });
    const [counted] = (await q.clone().count({ count: '*' })) as Array<{ count: string | number }>;
    const count = counted?.count ?? 0;
    const rows = await q.orderBy([{ column: 'started_at', order: 'desc' }, { column: 'execution_id', order: 'desc' }]).limit(limit).offset(offset);
    return { rows: rows.map(withInputs), total: Number(count) };
  }

  async findExecution(retrieverId: string, executionId: string, principalId: string | null): Promise<ExecutionRow | undefined> {
    const q = this.db<ExecutionRow>('retriever_executions').where({ retriever_id: retrieverId, execution_id: executionId });
    if (principalId) q.where({ principal_id: principalId });
    const row = await q.first();
    return row && withInputs(row);
  }

  async insertInteractions(rows: readonly InteractionRow[]): Promise<void> {
    if (rows.length === 0) return;
    await this.db('retriever_interactions').insert(
      rows.map((r) => ({ ...r, interaction_types: JSON.stringify(r.interaction_types), query_snapshot: r.query_snapshot === null ? null : JSON.stringify(r.query_snapshot) })),
    );
  }
}
