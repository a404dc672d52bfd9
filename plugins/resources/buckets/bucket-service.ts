/** Bucket rules: names unique per namespace, additive schema changes only, guarded deletion. */
import type { Knex } from 'knex';
import type { ResolvedNamespace } from '../../../kernel/auth/namespaces.js';
import type { Clock } from '../../../kernel/clock.js';
import { ConflictError, InputError, NotFoundError } from '../../../kernel/errors.js';
import type { Announcer } from '../../../kernel/events/announcer.js';
import { newId } from '../../../kernel/ids.js';
import { isUniqueViolation } from '../../../kernel/http/values.js';
import type { ReferenceRegistry } from '../../../kernel/references.js';
import type { TaskQueue } from '../../../kernel/tasks/task-queue.js';
import type { BucketRow, BucketStore, Scope } from './bucket-store.js';
import { breakingChanges, type BucketSchema } from './schema.js';

export interface BucketInput {
  bucket_name?: string;
  description?: string | null;
  schema?: BucketSchema;
  metadata?: Record<string, unknown>;
}

export const PURGE_BLOBS_TASK = 'buckets.purge_blobs';

export class BucketService {
  constructor(
    private readonly db: Knex,
    private readonly store: BucketStore,
    private readonly references: ReferenceRegistry,
    private readonly tasks: TaskQueue,
    private readonly announcer: Announcer,
    private readonly clock: Clock,
  ) {}

  scopeOf(organizationId: string, namespace: ResolvedNamespace): Scope {
    return { organizationId, namespaceId: namespace.id };
  }

  async get(scope: Scope, nameOrId: string, db?: Knex): Promise<BucketRow> {
    const row = await this.store.find(scope, nameOrId, db);
    if (!row) throw new NotFoundError(`Bucket '${nameOrId}' not found in this namespace`, { bucket: nameOrId });
    return row;
  }

  list(scope: Scope, search: string | undefined): Promise<BucketRow[]> {
    return this.store.list(scope, search);
  }

  async create(scope: Scope, createdBy: string | null, input: BucketInput & { bucket_name: string }): Promise<BucketRow> {
    const now = this.clock.now();
    const row: BucketRow = {
      bucket_id: newId('bkt'),
      organization_id: scope.organizationId,
      namespace_id: scope.namespaceId,
      bucket_name: input.bucket_name,
      description: input.description ?? null,
      schema: input.schema ?? { properties: {} },
      metadata: input.metadata ?? {},
      object_count: 0,
      total_size_bytes: 0,
      created_by: createdBy,
      created_at: now,
      updated_at: now,
    };
    await this.uniqueName(row.bucket_name, () => this.store.insert(this.db, row));
    await this.announce('bucket.created', row);
    return row;
  }

  async update(scope: Scope, nameOrId: string, input: BucketInput): Promise<BucketRow> {
    if (Object.keys(input).length === 0) throw new InputError('Nothing to update: send at least one field');
    const before = await this.get(scope, nameOrId);
    if (input.schema) {
      const problems = breakingChanges(before.schema, input.schema);
      if (problems.length > 0) {
        throw new ConflictError(`The schema change would break existing objects: ${problems.join('; ')}`, { problems });
      }
    }
    const after: BucketRow = { ...before, ...input, updated_at: this.clock.now() } as BucketRow;
    await this.uniqueName(after.bucket_name, () => this.store.update(this.db, after));
    await this.announce('bucket.updated', after);
    return after;
  }

  /** Deletes the bucket and its rows now; its blobs are removed by a durable background task. */
  async delete(scope: Scope, nameOrId: string, force: boolean): Promise<{ bucket: BucketRow; objectsDeleted: number }> {
    const bucket = await this.get(scope, nameOrId);
    const references = await this.references.referencesTo('bucket', scope.organizationId, bucket.bucket_id);
    if (references.length > 0 && !force) {
      throw new ConflictError(
        `Bucket '${bucket.bucket_name}' is still read by ${references.map((r) => `${r.resource_type} '${r.resource_name ?? r.resource_id}'`).join(', ')}; pass force=true to delete it anyway`,
        { references },
      );
    }
    const objectsDeleted = await this.db.transaction(async (trx) => {
      const count = await trx('objects').where({ bucket_id: bucket.bucket_id }).count<{ count: number }[]>({ count: '*' }).first();
      await this.store.delete(trx, bucket.bucket_id);
      await this.tasks.enqueue(
        PURGE_BLOBS_TASK,
        { prefix: blobPrefix(bucket) },
        { organizationId: scope.organizationId, dedupeKey: `purge:${bucket.bucket_id}`, transaction: trx },
      );
      return Number(count?.count ?? 0);
    });
    await this.announce('bucket.deleted', bucket);
    return { bucket, objectsDeleted };
  }

  private async uniqueName(name: string, write: () => Promise<void>): Promise<void> {
    try {
      await write();
    } catch (err) {
      if (isUniqueViolation(err)) throw new ConflictError(`A bucket named '${name}' already exists in this namespace`, { bucket_name: name });
      throw err;
    }
  }

  private announce(type: string, row: BucketRow): Promise<void> {
    return this.announcer.announce({
      type,
      organization_id: row.organization_id,
      data: { bucket_id: row.bucket_id, bucket_name: row.bucket_name, namespace_id: row.namespace_id },
    });
  }
}

/** Every blob of a bucket lives under this prefix. */
export function blobPrefix(bucket: Pick<BucketRow, 'organization_id' | 'namespace_id' | 'bucket_id'>): string {
  return `${bucket.organization_id}/${bucket.namespace_id}/${bucket.bucket_id}/`;
}
