/** Rows → contract bodies. Storage keys stay internal; download URLs are presigned on the way out. */
import type { components } from '../../../generated/openapi.js';
import type { BlobStore } from '../../../kernel/blobs/blob-store.js';
import { iso, isoOrNull } from '../../../kernel/http/values.js';
import type { BucketRow } from './bucket-store.js';
import { storeInlineBlob } from './ingest.js';
import type { ObjectRow } from './object-store.js';
import type { UploadRow } from './upload-store.js';

type Schemas = components['schemas'];

const DOWNLOAD_URL_SECONDS = 3600;

export function toBucket(row: BucketRow): Schemas['Bucket'] {
  return {
    bucket_id: row.bucket_id,
    bucket_name: row.bucket_name,
    namespace_id: row.namespace_id,
    description: row.description,
    schema: row.schema,
    metadata: row.metadata,
    object_count: Number(row.object_count),
    total_size_bytes: Number(row.total_size_bytes),
    created_by: row.created_by,
    created_at: iso(row.created_at),
    updated_at: iso(row.updated_at),
  };
}

export async function toObject(row: ObjectRow, blobs: BlobStore, presign: boolean): Promise<Schemas['BucketObject']> {
  return {
    object_id: row.object_id,
    bucket_id: row.bucket_id,
    namespace_id: row.namespace_id,
    key: row.key,
    metadata: row.metadata,
    size_bytes: Number(row.size_bytes),
    created_by: row.created_by,
    owner_principal: row.owner_principal ?? null,
    created_at: iso(row.created_at),
    updated_at: iso(row.updated_at),
    blobs: await Promise.all(
      row.blobs.map(async (b) => {
        // A download URL needs a file behind it: an inline blob gets its file on the first ask.
        if (presign) await storeInlineBlob(blobs, b);
        const signed = presign
          ? await blobs.presignGet(b.storage_key, { expiresInSeconds: DOWNLOAD_URL_SECONDS, ...(b.filename ? { filename: b.filename } : {}) })
          : undefined;
        return {
          property: b.property,
          type: b.type,
          content_type: b.content_type,
          size_bytes: b.size_bytes,
          md5: b.md5,
          sha256: b.sha256,
          filename: b.filename,
          source: b.source,
          source_url: b.source_url,
          url: signed?.url ?? null,
          url_expires_at: signed ? iso(signed.expiresAt) : null,
        };
      }),
    ),
  };
}

export function toUpload(row: UploadRow, presigned?: { url: string; headers: Record<string, string> }): Schemas['Upload'] {
  return {
    upload_id: row.upload_id,
    bucket_id: row.bucket_id,
    status: row.status,
    filename: row.filename,
    content_type: row.content_type,
    file_size_bytes: row.file_size_bytes === null ? null : Number(row.file_size_bytes),
    max_size_bytes: Number(row.max_size_bytes),
    property: row.property,
    key: row.object_key,
    metadata: row.metadata,
    create_object: row.create_object,
    presigned_url: presigned?.url ?? null,
    method: 'PUT',
    headers: presigned?.headers ?? {},
    expires_at: iso(row.expires_at),
    etag: row.etag,
    file_hash: row.file_hash,
    object_id: row.object_id,
    task_id: row.task_id,
    error: row.error,
    verified_at: isoOrNull(row.verified_at),
    completed_at: isoOrNull(row.completed_at),
    created_at: iso(row.created_at),
  };
}

export function toConfirmation(row: UploadRow): Schemas['UploadConfirmResponse'] {
  const message =
    row.status === 'COMPLETED'
      ? row.object_id
        ? `Upload confirmed; object ${row.object_id} created`
        : 'Upload confirmed'
      : `Confirmation runs in the background as task ${row.task_id}; GET the upload to follow it`;
  return {
    upload_id: row.upload_id,
    status: row.status,
    etag: row.etag,
    file_size_bytes: row.stored_size === null ? null : Number(row.stored_size),
    file_hash: row.file_hash,
    verified_at: isoOrNull(row.verified_at),
    completed_at: isoOrNull(row.completed_at),
    ...(row.object_id ? { object_id: row.object_id } : {}),
    ...(row.task_id ? { task_id: row.task_id } : {}),
    message,
  };
}
