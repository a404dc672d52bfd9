/**
 * Retriever rules: collections must exist in the namespace and be readable by the key, stages must be
 * registered with parameters that pass their schemas, names are unique per namespace, `version` starts
 * at 1 and goes up on every metadata change; the pipeline itself never changes (clone to change it).
 */
import type { Logger } from 'pino';
import type { components } from '../../../generated/openapi.js';
import type { ResolvedNamespace } from '../../../kernel/auth/namespaces.js';
import type { Clock } from '../../../kernel/clock.js';
import { ConflictError, InputError, NotFoundError, RequestValidationError } from '../../../kernel/errors.js';
import { isUniqueViolation } from '../../../kernel/http/values.js';
import { newId } from '../../../kernel/ids.js';
import type { BlobStore } from '../../../kernel/blobs/blob-store.js';
import type { ExecutionCaller, ExecutionObserver, ExecutionOutcome, RetrievalEngine } from '../../../kernel/retrieval/engine.js';
import { cacheRequestOf } from '../../../kernel/retrieval/cache.js';
import { checkInputSchema } from '../../../kernel/retrieval/inputs.js';
import { withVectors } from '../../../kernel/retrieval/vectors.js';
import { digestOf, type CursorBinding, type PageCursors } from '../../../kernel/retrieval/page-cursors.js';
import type { PaginationRequest } from '../../../kernel/retrieval/pagination.js';
import { planPage, recordedPage, withCursor } from './paging.js';
import { lineageReader } from '../../../kernel/retrieval/lineage.js';
import { DocumentUrlSigner } from '../../../kernel/retrieval/presign.js';
import type { ExecutionAlerts } from './alerts.js';
import type { ExecutionHistory } from './execution-history.js';
import type { ExecutionRow, RetrieverRow, RetrieverStore } from './store.js';

type Schemas = components['schemas'];
export type RetrieverInput = Schemas['RetrieverCreateRequest'];

/** Path words under /v1/retrievers/ that a name would shadow. */
const RESERVED_NAMES = new Set(['stages', 'execute', 'explain']);

export interface Caller extends ExecutionCaller {
  userEmail: string | null;
}

/** How one execution is asked for, beyond the pipeline. */
export interface ExecuteOptions {
  inputs: Record<string, unknown>;
  pagination?: PaginationRequest;
  /** Give every stored blob the returned documents reference a fresh download URL. */
  presignUrls?: boolean;
  /** Each returned document carries its stored vectors by feature name (kernel/retrieval/vectors.ts). */
  returnVectors?: boolean;
  /** false runs the stages exactly as written (the optimizer is on by default). */
  optimize?: boolean;
  /** Told as stages start and end (streaming). */
  observer?: ExecutionObserver;
  /** Aborted when the client went away: no further stage starts. */
  signal?: AbortSignal;
  log: Logger;
}

/** What executions need besides the engine: page cursors, the blob store (for download URLs) and the history writer. */
export interface ExecutionServices {
  cursors: PageCursors;
  blobs: () => BlobStore;
  history: ExecutionHistory;
  /** Told of every recorded execution (retriever.slow_query, cache.low_hit_rate). */
  alerts?: ExecutionAlerts;
}

export class RetrieverService {
  constructor(
    private readonly store: RetrieverStore,
    private readonly engine: RetrievalEngine,
    private readonly clock: Clock,
    private readonly executions: ExecutionServices,
  ) {}

  async get(organizationId: string, namespace: ResolvedNamespace, nameOrId: string): Promise<RetrieverRow> {
    const row = await this.store.find(organizationId, namespace.id, nameOrId);
    if (!row) throw new NotFoundError(`Retriever '${nameOrId}' not found in namespace '${namespace.name}'`, { retriever: nameOrId });
    return row;
  }

  /** Checks a pipeline as a new retriever (or an ad hoc run) defines it. */
  async checkPipeline(caller: Caller, namespace: ResolvedNamespace, input: Pick<RetrieverInput, 'collection_identifiers' | 'input_schema' | 'stages'>) {
    const inputSchema = checkInputSchema(input.input_schema ?? {}, ['body', 'input_schema']);
    const stageVersions = this.engine.checker.checkDefinition(input.stages, inputSchema, ['body', 'stages']);
    const collections = await this.engine.collections(caller, namespace, input.collection_identifiers);
    return { inputSchema, stageVersions, collections, featureDependencies: this.engine.checker.featureDependencies(input.stages) };
  }

  async create(caller: Caller, namespace: ResolvedNamespace, input: RetrieverInput): Promise<RetrieverRow> {
    this.checkName(input.retriever_name);
    const checked = await this.checkPipeline(caller, namespace, input);
    this.checkCacheStages(input);
    const now = this.clock.now();
    const row: RetrieverRow = {
      retriever_id: newId('ret'),
      organization_id: caller.organizationId,
      namespace_id: namespace.id,
      retriever_name: input.retriever_name,
      description: input.description ?? null,
      collection_identifiers: input.collection_identifiers,
      collection_ids: checked.collections.map((c) => c.collection_id),
      input_schema: input.input_schema ?? {},
      stages: input.stages,
      budget_limits: input.budget_limits ?? {},
      feature_dependencies: checked.featureDependencies,
      stage_versions: checked.stageVersions,
      tags: input.tags ?? [],
      display_config: input.display_config ?? {},
      cache_config: input.cache_config ?? {},
      cache_stage_names: input.cache_stage_names ?? [],
      version: 1,
      created_by: caller.userEmail,
      updated_by: caller.userEmail,
      created_at: now,
      updated_at: now,
    };
    await this.insert(row, namespace);
    return row;
  }

  async update(caller: Caller, namespace: ResolvedNamespace, nameOrId: string, patch: Schemas['RetrieverUpdateRequest']): Promise<RetrieverRow> {
    const row = await this.get(caller.organizationId, namespace, nameOrId);
    const changes: Partial<RetrieverRow> = {};
    if (patch.retriever_name !== undefined) {
      this.checkName(patch.retriever_name);
      changes.retriever_name = patch.retriever_name;
    }
    if (patch.description !== undefined) changes.description = patch.description;
    if (patch.tags !== undefined) changes.tags = patch.tags;
    if (patch.display_config !== undefined) changes.display_config = patch.display_config;
    if (Object.keys(changes).length === 0) {
      throw new InputError('Nothing to update: give retriever_name, description, tags or display_config (clone the retriever to change its logic)');
    }
    changes.version = row.version + 1;
    changes.updated_by = caller.userEmail;
    changes.updated_at = this.clock.now();
    try {
      await this.store.update(row.retriever_id, changes);
    } catch (err) {
      if (isUniqueViolation(err)) throw this.nameTaken(changes.retriever_name ?? row.retriever_name, namespace);
      throw err;
    }
    return { ...row, ...changes };
  }

  async clone(caller: Caller, namespace: ResolvedNamespace, nameOrId: string, body: Schemas['RetrieverCloneRequest']): Promise<RetrieverRow> {
    const source = await this.get(caller.organizationId, namespace, nameOrId);
    const input: RetrieverInput = {
      retriever_name: body.retriever_name ?? (await this.copyName(caller.organizationId, namespace, source.retriever_name)),
      description: body.description !== undefined ? body.description : source.description,
      collection_identifiers: body.collection_identifiers ?? source.collection_identifiers,
      input_schema: body.input_schema ?? source.input_schema,
      stages: body.stages ?? source.stages,
      budget_limits: body.budget_limits ?? source.budget_limits,
      tags: source.tags,
      display_config: source.display_config,
      cache_config: source.cache_config,
      // Cached stage names that the new stages no longer have are dropped rather than refused.
      cache_stage_names: source.cache_stage_names.filter((n) => (body.stages ?? source.stages).some((s) => s.stage_name === n)),
    };
    return this.create(caller, namespace, input);
  }

  async delete(organizationId: string, namespace: ResolvedNamespace, nameOrId: string): Promise<RetrieverRow> {
    const row = await this.get(organizationId, namespace, nameOrId);
    // Its queued executions are written first, so the delete takes them with the rest of its history.
    await this.executions.history.flush();
    await this.store.delete(row.retriever_id);
    return row;
  }

  /**
   * Runs a saved retriever and records the execution in its history; a later `cursor` page is read from the
   * recorded ranking of the execution its cursor names instead (nothing runs and nothing is recorded).
   */
  async execute(caller: Caller, namespace: ResolvedNamespace, nameOrId: string, options: ExecuteOptions) {
    const row = await this.get(caller.organizationId, namespace, nameOrId);
    const binding: CursorBinding = {
      organizationId: caller.organizationId, namespaceId: namespace.id, retriever: row.retriever_id, principalId: caller.principalId, inputs: options.inputs,
    };
    const plan = planPage(this.executions.cursors, options.pagination, binding, true);
    if (plan.kind === 'recorded') {
      await this.executions.history.flush();
      const execution = await this.store.findExecution(row.retriever_id, plan.position.executionId, caller.principalId);
      if (!execution || execution.organization_id !== caller.organizationId) {
        throw new InputError(`The execution pagination.cursor pages no longer exists: request the first page again`, { execution_id: plan.position.executionId });
      }
      const outcome = await recordedPage(this.engine.documents(), this.executions.cursors, execution, plan.position, binding, row.budget_limits);
      return { row, outcome: await this.finish(outcome, caller, namespace, options) };
    }
    this.checkStageVersions(row);
    const cache = cacheRequestOf(row.retriever_id, row.cache_config, row.cache_stage_names);
    const outcome = await this.engine.execute({
      caller,
      namespace,
      executionId: newId('exec'),
      collectionIdentifiers: row.collection_ids,
      inputSchema: row.input_schema as never,
      stages: row.stages,
      inputs: options.inputs,
      budgetLimits: row.budget_limits,
      ...this.runOptions(plan, options),
      ...(cache ? { cache } : {}),
    });
    const record: ExecutionRow = {
      execution_id: outcome.execution_id,
      organization_id: caller.organizationId,
      namespace_id: namespace.id,
      retriever_id: row.retriever_id,
      retriever_version: row.version,
      status: outcome.status,
      inputs: outcome.inputs,
      collection_ids: outcome.collection_ids,
      result_document_ids: outcome.result_ids,
      result_scores: outcome.result_scores,
      total_results: outcome.result_ids.length,
      stage_statistics: outcome.stage_statistics,
      budget: outcome.budget as Schemas['RetrieverBudgetUse'],
      error: outcome.error,
      duration_ms: outcome.duration_ms,
      started_at: outcome.started_at,
      created_by: caller.userEmail,
      principal_id: caller.principalId,
      cache_hit: outcome.cache_hit ?? null,
    };
    // A cursor for later pages reads this record back: it is written before the cursor is handed out.
    if (outcome.continuation?.method === 'cursor') await this.executions.history.recordNow(record);
    else this.executions.history.record(record);
    this.executions.alerts?.observe(row, record);
    return { row, outcome: await this.finish(withCursor(this.executions.cursors, outcome, binding), caller, namespace, options) };
  }

  /** Runs a pipeline that is not saved: nothing is written. */
  async executeAdHoc(
    caller: Caller,
    namespace: ResolvedNamespace,
    body: Pick<Schemas['AdHocRetrieverExecuteRequest'], 'collection_identifiers' | 'input_schema' | 'stages' | 'budget_limits'>,
    options: ExecuteOptions,
  ): Promise<ExecutionOutcome> {
    const checked = await this.checkPipeline(caller, namespace, body);
    const pipeline = { collection_ids: checked.collections.map((c) => c.collection_id), input_schema: body.input_schema, stages: body.stages, budget_limits: body.budget_limits ?? {} };
    const binding: CursorBinding = {
      organizationId: caller.organizationId, namespaceId: namespace.id, retriever: `adhoc:${digestOf(pipeline)}`, principalId: caller.principalId, inputs: options.inputs,
    };
    const plan = planPage(this.executions.cursors, options.pagination, binding, false);
    if (plan.kind === 'recorded') throw new Error('ad hoc executions have no recorded pages');
    const outcome = await this.engine.execute({
      caller,
      namespace,
      executionId: newId('exec'),
      collectionIdentifiers: pipeline.collection_ids,
      inputSchema: checked.inputSchema,
      stages: body.stages,
      inputs: options.inputs,
      budgetLimits: pipeline.budget_limits,
      ...this.runOptions(plan, options),
    });
    return this.finish(withCursor(this.executions.cursors, outcome, binding), caller, namespace, options);
  }

  private runOptions(plan: Extract<ReturnType<typeof planPage>, { kind: 'run' }>, options: ExecuteOptions) {
    return {
      ...(plan.pagination ? { pagination: plan.pagination } : {}),
      ...(plan.keysetAfter ? { keysetAfter: plan.keysetAfter } : {}),
      ...(options.observer ? { observer: options.observer } : {}),
      ...(options.signal ? { signal: options.signal } : {}),
      ...(options.optimize !== undefined ? { optimize: options.optimize } : {}),
      log: options.log,
    };
  }

  /**
   * The answer's last touches, on every page however it was made (run or recorded): the documents' vectors
   * and download URLs for the blobs they reference, when asked for.
   */
  private async finish(outcome: ExecutionOutcome, caller: Caller, namespace: ResolvedNamespace, options: ExecuteOptions): Promise<ExecutionOutcome> {
    if (outcome.documents.length === 0) return outcome;
    let documents = outcome.documents;
    if (options.returnVectors) documents = await withVectors(this.engine.documents(), caller, outcome.collection_ids, documents);
    if (options.presignUrls) {
      const signer = new DocumentUrlSigner(this.executions.blobs(), this.engine.documents(), { organizationId: caller.organizationId, namespaceId: namespace.id });
      // A user-scoped caller gets URLs only for blobs derived from a result's own lineage (presign.ts, lineage.ts).
      const lineageOf = caller.principalId !== null ? await lineageReader(this.engine.documents(), caller.organizationId, caller.principalId, documents) : undefined;
      documents = await signer.sign(documents, lineageOf ? { lineageOf } : {});
    }
    return documents === outcome.documents ? outcome : { ...outcome, documents };
  }

  /** The plan a saved retriever would run for these inputs (nothing runs, nothing is recorded). */
  async explain(caller: Caller, namespace: ResolvedNamespace, nameOrId: string, inputs: Record<string, unknown>, optimize: boolean | undefined) {
    const row = await this.get(caller.organizationId, namespace, nameOrId);
    this.checkStageVersions(row);
    const explanation = await this.engine.explain({
      caller, namespace, collectionIdentifiers: row.collection_ids, inputSchema: row.input_schema as never, stages: row.stages, inputs,
      ...(optimize !== undefined ? { optimize } : {}),
      cacheEnabled: (row.cache_config as { enabled?: unknown }).enabled === true,
    });
    return { row, explanation };
  }

  /** The plan of a pipeline that is not saved. */
  async explainAdHoc(caller: Caller, namespace: ResolvedNamespace, body: Schemas['AdHocRetrieverExecuteRequest']) {
    const checked = await this.checkPipeline(caller, namespace, body);
    return this.engine.explain({
      caller, namespace, collectionIdentifiers: checked.collections.map((c) => c.collection_id), inputSchema: checked.inputSchema, stages: body.stages,
      inputs: body.inputs, ...(body.optimize !== undefined ? { optimize: body.optimize } : {}), cacheEnabled: null,
    });
  }

  /** A saved pipeline runs only with the stage versions it was built with: a new version never changes it silently. */
  private checkStageVersions(row: RetrieverRow): void {
    for (const recorded of row.stage_versions) {
      const running = this.engine.checker.stageOf(recorded.stage_id);
      if (!running || running.version !== recorded.version) {
        throw new ConflictError(
          `Retriever '${row.retriever_name}' was built with stage ${recorded.stage_id} ${recorded.version}; this deployment runs ` +
            `${running ? `version ${running.version}` : 'no such stage'}. Clone the retriever to rebuild it with the running stages.`,
          { stage_name: recorded.stage_name, stage_id: recorded.stage_id, recorded_version: recorded.version, running_version: running?.version ?? null },
        );
      }
    }
  }

  /**
   * Records interactions on a retriever's results. Lower-case kinds are stored as their upper-case types; an
   * `execution_id` must be an execution of this retriever (ad hoc executions keep none).
   */
  async recordInteractions(caller: Caller, namespace: ResolvedNamespace, nameOrId: string, interactions: ReadonlyArray<Schemas['RetrieverInteraction']>): Promise<string[]> {
    const row = await this.get(caller.organizationId, namespace, nameOrId);
    if (interactions.some((i) => i.execution_id)) await this.executions.history.flush();
    const resultsOf = new Map<string, Set<string>>();
    for (const executionId of new Set(interactions.flatMap((i) => (i.execution_id ? [i.execution_id] : [])))) {
      const execution = await this.store.findExecution(row.retriever_id, executionId, caller.principalId);
      if (!execution) throw new NotFoundError(`Execution '${executionId}' of retriever '${row.retriever_name}' not found`, { execution_id: executionId });
      resultsOf.set(executionId, new Set(execution.result_document_ids));
    }
    // An interaction tied to an execution is on one of its results (its whole ranking, every page): anything
    // else would count, in the retriever's signals, a click on a document that search never showed.
    interactions.forEach((interaction, index) => {
      const results = interaction.execution_id ? resultsOf.get(interaction.execution_id) : undefined;
      if (!results || results.has(interaction.document_id)) return;
      throw new InputError(
        `Document '${interaction.document_id}' is not among the results of execution '${interaction.execution_id}'${interactions.length > 1 ? ` (interaction ${index})` : ''}: ` +
          'pass the document_id of a result that execution returned, or leave execution_id out',
        { execution_id: interaction.execution_id, document_id: interaction.document_id, index },
      );
    });
    const now = this.clock.now();
    const rows = interactions.map((i) => ({
      interaction_id: newId('int'),
      organization_id: caller.organizationId,
      namespace_id: namespace.id,
      retriever_id: row.retriever_id,
      execution_id: i.execution_id ?? null,
      document_id: i.document_id,
      interaction_types: [...new Set(i.interaction_type.map((t) => t.toUpperCase()))],
      position: i.position ?? null,
      query_snapshot: i.query_snapshot ?? null,
      session_id: i.session_id ?? null,
      created_by: caller.userEmail,
      created_at: now,
    }));
    await this.store.insertInteractions(rows);
    return rows.map((r) => r.interaction_id);
  }

  private checkName(name: string): void {
    if (RESERVED_NAMES.has(name.toLowerCase())) {
      throw new RequestValidationError([{ loc: ['body', 'retriever_name'], msg: `'${name}' is reserved (it is a path under /v1/retrievers/)`, type: 'reserved_name' }]);
    }
  }

  private checkCacheStages(input: RetrieverInput): void {
    const names = new Set(input.stages.map((s) => s.stage_name));
    const unknown = (input.cache_stage_names ?? []).findIndex((n) => !names.has(n));
    if (unknown >= 0) {
      throw new RequestValidationError([{ loc: ['body', 'cache_stage_names', unknown], msg: `no stage is named '${input.cache_stage_names![unknown]}'`, type: 'unknown_stage_name' }]);
    }
  }

  private async insert(row: RetrieverRow, namespace: ResolvedNamespace): Promise<void> {
    try {
      await this.store.insert(row);
    } catch (err) {
      if (isUniqueViolation(err)) throw this.nameTaken(row.retriever_name, namespace);
      throw err;
    }
  }

  private nameTaken(name: string, namespace: ResolvedNamespace): ConflictError {
    return new ConflictError(`A retriever named '${name}' already exists in namespace '${namespace.name}'`, { retriever_name: name });
  }

  private async copyName(organizationId: string, namespace: ResolvedNamespace, name: string): Promise<string> {
    for (let n = 1; n <= 100; n++) {
      const candidate = `${name.slice(0, 90)}-copy${n === 1 ? '' : `-${n}`}`;
      if (!(await this.store.find(organizationId, namespace.id, candidate))) return candidate;
    }
    throw new ConflictError(`Too many copies of '${name}': give the clone a retriever_name`);
  }
}
