/** Upload rows: one per requested upload, from PENDING to COMPLETED (or FAILED / CANCELED). */
import type { Knex } from 'knex';
import { cursorFields, decodeCursor, encodeCursor } from '../../../kernel/http/cursor.js';

export type UploadStatus = 'PENDING' | 'PROCESSING' | 'COMPLETED' | 'FAILED' | 'CANCELED';

export interface UploadRow {
  upload_id: string;
  organization_id: string;
  namespace_id: string;
  bucket_id: string;
  status: UploadStatus;
  filename: string;
  content_type: string | null;
  file_size_bytes: number | null;
  max_size_bytes: number;
  property: string;
  object_key: string | null;
  metadata: Record<string, unknown>;
  create_object: boolean;
  storage_key: string;
  expires_at: Date;
  expected_etag: string | null;
  expected_size: number | null;
  etag: string | null;
  file_hash: string | null;
  stored_size: number | null;
  object_id: string | null;
  task_id: string | null;
  error: string | null;
  created_by: string | null;
  /** The principal the upload (and the object it makes) belongs to. */
  owner_principal: string | null;
  verified_at: Date | null;
  completed_at: Date | null;
  created_at: Date;
}

export class UploadStore {
  constructor(private readonly db: Knex) {}

  find(bucketId: string, uploadId: string, principalId: string | null = null): Promise<UploadRow | undefined> {
    const q = this.db<UploadRow>('uploads').where({ bucket_id: bucketId, upload_id: uploadId });
    if (principalId) q.where({ owner_principal: principalId });
    return q.first();
  }

  findById(uploadId: string): Promise<UploadRow | undefined> {
    return this.db<UploadRow>('uploads').where({ upload_id: uploadId }).first();
  }

  async insert(row: UploadRow): Promise<void> {
    await this.db('uploads').insert({ ...row, metadata: JSON.stringify(row.metadata) });
  }

  async update(uploadId: string, changes: Partial<UploadRow>, db: Knex = this.db): Promise<void> {
    await db('uploads').where({ upload_id: uploadId }).update(changes);
  }

  /** Moves an upload from one status to another only if it is still in the first; false when it was not. */
  async transition(uploadId: string, from: UploadStatus, changes: Partial<UploadRow> & { status: UploadStatus }): Promise<boolean> {
    const count = await this.db('uploads').where({ upload_id: uploadId, status: from }).update(changes);
    return count === 1;
  }

  async list(bucketId: string, status: UploadStatus | undefined, limit: number, cursor: string | undefined, principalId: string | null = null) {
    const q = this.db<UploadRow>('uploads').where({ bucket_id: bucketId });
    if (principalId) q.where({ owner_principal: principalId });
    if (status) q.where({ status });
    if (cursor) {
      const c = decodeCursor(cursor, { t: cursorFields.timestamp(), id: cursorFields.id('upl') });
      q.whereRaw('(created_at, upload_id) < (?::timestamptz, ?)', [c.t, c.id]);
    }
    const rows = await q.orderBy([{ column: 'created_at', order: 'desc' }, { column: 'upload_id', order: 'desc' }]).limit(limit + 1);
    const page = rows.slice(0, limit);
    const last = page.at(-1);
    return { rows: page, nextCursor: rows.length > limit && last ? encodeCursor({ t: last.created_at.toISOString(), id: last.upload_id }) : null };
  }

  /** Unconfirmed uploads whose time is up. */
  expired(now: Date, limit: number): Promise<UploadRow[]> {
    return this.db<UploadRow>('uploads').where({ status: 'PENDING' }).where('expires_at', '<', now).limit(limit);
  }
}
