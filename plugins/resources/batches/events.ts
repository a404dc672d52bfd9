/**
 * The events a batch publishes when it ends, one shape for every ending: `batch.completed` (COMPLETED or
 * COMPLETED_WITH_ERRORS), `batch.failed` (adds `error` and `failed_tier`) and `batch.canceled` (adds
 * `canceled_tier`, the tier that was running). Each carries the batch's ids, its status, the documents
 * written so far over every tier, and its `error_summary`, so a subscriber handles them alike.
 */
import type { EventInput } from '../../../kernel/events/event-bus.js';
import type { BatchRow } from './store.js';

export type BatchEndedType = 'batch.completed' | 'batch.failed' | 'batch.canceled';

export function batchEnded(
  type: BatchEndedType,
  batch: Pick<BatchRow, 'organization_id' | 'batch_id' | 'bucket_id' | 'namespace_id'>,
  ended: { status: BatchRow['status']; tierTasks: BatchRow['tier_tasks']; errorSummary: BatchRow['error_summary'] },
  extra: Record<string, unknown> = {},
): EventInput {
  return {
    type,
    organization_id: batch.organization_id,
    data: {
      batch_id: batch.batch_id,
      bucket_id: batch.bucket_id,
      namespace_id: batch.namespace_id,
      status: ended.status,
      documents_written: ended.tierTasks.reduce((n, t) => n + t.documents_written, 0),
      error_summary: ended.errorSummary,
      ...extra,
    },
  };
}
