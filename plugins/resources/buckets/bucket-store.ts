/** Bucket rows, always within one organization and namespace. */
import type { Knex } from 'knex';
import type { BucketSchema } from './schema.js';

export interface BucketRow {
  bucket_id: string;
  organization_id: string;
  namespace_id: string;
  bucket_name: string;
  description: string | null;
  schema: BucketSchema;
  metadata: Record<string, unknown>;
  object_count: number;
  total_size_bytes: number;
  created_by: string | null;
  created_at: Date;
  updated_at: Date;
}

export interface Scope {
  organizationId: string;
  namespaceId: string;
}

export class BucketStore {
  constructor(private readonly db: Knex) {}

  private scoped(db: Knex, scope: Scope) {
    return db<BucketRow>('buckets').where({ organization_id: scope.organizationId, namespace_id: scope.namespaceId });
  }

  /** By `bkt_` id or by name (case-insensitive). */
  async find(scope: Scope, nameOrId: string, db: Knex = this.db): Promise<BucketRow | undefined> {
    return this.scoped(db, scope)
      .where((q) => q.where({ bucket_id: nameOrId }).orWhereRaw('lower(bucket_name) = lower(?)', [nameOrId]))
      .orderByRaw('bucket_id = ? desc', [nameOrId])
      .first();
  }

  async list(scope: Scope, search: string | undefined): Promise<BucketRow[]> {
    const q = this.scoped(this.db, scope).orderByRaw('lower(bucket_name)');
    if (search) q.whereRaw("bucket_name ilike ? escape '\\'", [`%${search.replace(/[\\%_]/g, (c) => `\\${c}`)}%`]);
    return q;
  }

  async insert(db: Knex, row: BucketRow): Promise<void> {
    await db('buckets').insert({ ...row, schema: JSON.stringify(row.schema), metadata: JSON.stringify(row.metadata) });
  }

  async update(db: Knex, row: BucketRow): Promise<void> {
    await db('buckets').where({ bucket_id: row.bucket_id }).update({
      bucket_name: row.bucket_name,
      description: row.description,
      schema: JSON.stringify(row.schema),
      metadata: JSON.stringify(row.metadata),
      updated_at: row.updated_at,
    });
  }

  /** Keeps object_count and total_size_bytes in step with the objects table (same transaction). */
  async adjustTotals(db: Knex, bucketId: string, objects: number, bytes: number): Promise<void> {
    await db('buckets')
      .where({ bucket_id: bucketId })
      .update({
        object_count: db.raw('object_count + ?', [objects]),
        total_size_bytes: db.raw('total_size_bytes + ?', [bytes]),
      });
  }

  async delete(db: Knex, bucketId: string): Promise<void> {
    await db('buckets').where({ bucket_id: bucketId }).delete();
  }

}
