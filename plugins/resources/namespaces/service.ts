/** Namespace rules: names unique per organization (case-insensitive), audit and events on every change. */
import type { Knex } from 'knex';
import type { AuditActor, AuditLog } from '../../../kernel/auth/audit-log.js';
import { diffFields } from '../../../kernel/auth/audit-log.js';
import type { Clock } from '../../../kernel/clock.js';
import { ConflictError, InputError, NotFoundError, RequestValidationError, type FieldProblem } from '../../../kernel/errors.js';
import type { Announcer } from '../../../kernel/events/announcer.js';
import { newId } from '../../../kernel/ids.js';
import { isUniqueViolation } from '../../../kernel/http/values.js';
import type { TaskQueue } from '../../../kernel/tasks/task-queue.js';
import type { NamespaceRow, NamespaceStore, CachedNamespaceResolver } from './store.js';

/** The durable task that removes what a deleted namespace held (kernel/namespace-purge.ts). */
export const PURGE_TASK = 'namespaces.purge';

export interface NamespaceInput {
  namespace_name?: string;
  description?: string | null;
  metadata?: Record<string, unknown>;
  feature_extractors?: Array<{ name: string; version?: string }>;
}

const MUTABLE = ['namespace_name', 'description', 'metadata', 'feature_extractors'] as const;

/** Names that paths under /v1/namespaces/ give another meaning (`/v1/namespaces/templates/...`). */
const RESERVED_NAMES = new Set(['templates']);

function checkName(name: string | undefined): void {
  if (name !== undefined && RESERVED_NAMES.has(name.toLowerCase())) {
    throw new RequestValidationError([{ loc: ['body', 'namespace_name'], msg: `'${name}' is reserved (/v1/namespaces/${name.toLowerCase()}/... is another route): choose another name`, type: 'reserved_name' }]);
  }
}

export class NamespaceService {
  constructor(
    private readonly db: Knex,
    private readonly store: NamespaceStore,
    private readonly resolver: CachedNamespaceResolver,
    private readonly audit: AuditLog,
    private readonly announcer: Announcer,
    private readonly clock: Clock,
    private readonly tasks: TaskQueue,
    /** The extractors this deployment runs, by name and version (what `feature_extractors` may name). */
    private readonly extractors: () => ReadonlyMap<string, { version: string }>,
  ) {}

  /** `feature_extractors` name registered extractors, at the version this deployment runs when one is given. */
  private checkExtractors(refs: NamespaceInput['feature_extractors']): void {
    const registered = this.extractors();
    const problems: FieldProblem[] = [];
    for (const [i, ref] of (refs ?? []).entries()) {
      const extractor = registered.get(ref.name);
      if (!extractor) {
        problems.push({ loc: ['body', 'feature_extractors', i, 'name'], msg: `unknown extractor; registered: ${[...registered.keys()].join(', ') || 'none'}`, type: 'unknown_extractor' });
      } else if (ref.version !== undefined && ref.version !== extractor.version) {
        problems.push({ loc: ['body', 'feature_extractors', i, 'version'], msg: `this deployment runs version ${extractor.version}`, type: 'extractor_version' });
      }
    }
    if (problems.length > 0) throw new RequestValidationError(problems);
  }

  async get(organizationId: string, nameOrId: string): Promise<NamespaceRow> {
    const row = await this.store.find(organizationId, nameOrId);
    if (!row) throw new NotFoundError(`Namespace '${nameOrId}' not found`, { namespace: nameOrId });
    return row;
  }

  /** Ids and names, by name (`rows` reads a page of them whole). */
  listNames(organizationId: string, search: string | undefined): Promise<Array<Pick<NamespaceRow, 'namespace_id' | 'namespace_name'>>> {
    return this.store.listNames(organizationId, search);
  }

  rows(organizationId: string, ids: readonly string[]): Promise<NamespaceRow[]> {
    return this.store.rows(organizationId, ids);
  }

  async create(organizationId: string, actor: AuditActor, input: NamespaceInput & { namespace_name: string }): Promise<NamespaceRow> {
    checkName(input.namespace_name);
    this.checkExtractors(input.feature_extractors);
    const now = this.clock.now();
    const row: NamespaceRow = {
      namespace_id: newId('ns'),
      organization_id: organizationId,
      namespace_name: input.namespace_name,
      description: input.description ?? null,
      metadata: input.metadata ?? {},
      feature_extractors: input.feature_extractors ?? [],
      created_by: actor.userEmail,
      created_at: now,
      updated_at: now,
    };
    await this.guardName(row.namespace_name, () =>
      this.db.transaction(async (trx) => {
        await this.store.insert(trx, row);
        await this.audit.record(trx, {
          organizationId,
          action: 'namespace_created',
          actor,
          resourceType: 'namespace',
          resourceId: row.namespace_id,
          resourceName: row.namespace_name,
          changes: { namespace_name: row.namespace_name, description: row.description },
        });
      }),
    );
    await this.announce('namespace.created', row);
    return row;
  }

  async update(organizationId: string, actor: AuditActor, nameOrId: string, input: NamespaceInput): Promise<NamespaceRow> {
    if (Object.keys(input).length === 0) throw new InputError('Nothing to update: send at least one field');
    checkName(input.namespace_name);
    this.checkExtractors(input.feature_extractors);
    const before = await this.get(organizationId, nameOrId);
    const after: NamespaceRow = { ...before, ...input, updated_at: this.clock.now() } as NamespaceRow;
    const changes = diffFields(before as unknown as Record<string, unknown>, after as unknown as Record<string, unknown>, MUTABLE);
    await this.guardName(after.namespace_name, () =>
      this.db.transaction(async (trx) => {
        await this.store.update(trx, after);
        await this.audit.record(trx, {
          organizationId,
          action: 'namespace_updated',
          actor,
          resourceType: 'namespace',
          resourceId: after.namespace_id,
          resourceName: after.namespace_name,
          changes,
        });
      }),
    );
    this.resolver.forget(organizationId);
    await this.announce('namespace.updated', after);
    return after;
  }

  /**
   * Deletes the namespace and, in the same transaction, queues the purge of everything in it (retrievers and
   * their publications and keys, batches, collections with their documents and vectors, buckets with their
   * objects and blobs): the name is free at once, the contents go within moments, and a crash in between
   * loses nothing.
   */
  async delete(organizationId: string, actor: AuditActor, nameOrId: string): Promise<NamespaceRow> {
    const row = await this.get(organizationId, nameOrId);
    await this.db.transaction(async (trx) => {
      await this.store.delete(trx, organizationId, row.namespace_id);
      await this.tasks.enqueue(
        PURGE_TASK,
        { organization_id: organizationId, namespace_id: row.namespace_id, deleted_by: actor.userEmail },
        { organizationId, dedupeKey: `purge-namespace:${row.namespace_id}`, transaction: trx, maxAttempts: 20 },
      );
      await this.audit.record(trx, {
        organizationId,
        action: 'namespace_deleted',
        actor,
        resourceType: 'namespace',
        resourceId: row.namespace_id,
        resourceName: row.namespace_name,
        changes: {},
      });
    });
    this.resolver.forget(organizationId);
    await this.announce('namespace.deleted', row);
    return row;
  }

  /** Runs a write that may collide with the unique name index, turning a collision into a 409. */
  private async guardName(name: string, write: () => Promise<void>): Promise<void> {
    try {
      await write();
    } catch (err) {
      if (isUniqueViolation(err)) {
        throw new ConflictError(`A namespace named '${name}' already exists in this organization`, { namespace_name: name });
      }
      throw err;
    }
  }

  private announce(type: string, row: NamespaceRow): Promise<void> {
    return this.announcer.announce({
      type,
      organization_id: row.organization_id,
      data: { namespace_id: row.namespace_id, namespace_name: row.namespace_name },
    });
  }
}
