import type { components } from '../../../generated/openapi.js';
import { iso } from '../../../kernel/http/values.js';
import type { BatchProgress } from './aggregate.js';
import type { EncodedJson } from '../../../kernel/http/encoded-json.js';
import type { BatchRow, EncodedIdLists } from './store.js';

type Batch = components['schemas']['Batch'];

/** A Batch body whose id lists may be already encoded (a submitted batch's, see BatchStore.encodedIdLists). */
export type BatchReply = Omit<Batch, 'object_ids' | 'loaded_object_ids'> & {
  object_ids: Batch['object_ids'] | EncodedJson<string[]>;
  loaded_object_ids: Batch['loaded_object_ids'] | EncodedJson<string[] | null>;
};

export function toBatch(row: BatchRow, progress: BatchProgress): Batch;
export function toBatch(row: BatchRow, progress: BatchProgress, encoded: EncodedIdLists | undefined): BatchReply;
export function toBatch(row: BatchRow, progress: BatchProgress, encoded?: EncodedIdLists): BatchReply {
  return {
    batch_id: row.batch_id,
    bucket_id: row.bucket_id,
    status: row.status,
    type: row.type,
    object_ids: encoded?.object_ids ?? row.object_ids,
    collection_ids: row.collection_ids,
    error: row.error,
    error_summary: row.error_summary,
    manifest_key: row.manifest_key,
    task_id: row.task_id,
    loaded_object_ids: encoded?.loaded_object_ids ?? row.loaded_object_ids,
    internal_metadata: row.internal_metadata,
    metadata: row.metadata,
    tier_tasks: row.tier_tasks,
    current_tier: row.current_tier,
    total_tiers: row.total_tiers,
    dag_tiers: row.dag_tiers,
    progress,
    created_at: iso(row.created_at),
    updated_at: iso(row.updated_at),
  };
}
