/**
 * Cursor and keyset pages of retriever executions (the rules are in kernel/retrieval/pagination.ts):
 * reads a request's cursor, serves a later `cursor` page from the execution history's recorded ranking
 * (documents re-read by id, so deleted ones drop out and the rest keep their places), and puts signed
 * cursors into the answer.
 */
import { InputError, RequestValidationError } from '../../../kernel/errors.js';
import type { StageDocument } from '../../../kernel/plugins.js';
import type { ExecutionOutcome } from '../../../kernel/retrieval/engine.js';
import type { DocumentSource } from '../../../kernel/retrieval/documents.js';
import type { CursorBinding, PageCursors, SnapshotPosition } from '../../../kernel/retrieval/page-cursors.js';
import type { KeysetPosition, PaginationRequest } from '../../../kernel/retrieval/pagination.js';
import type { ExecutionRow } from './store.js';

/** What a request's pagination asks for, its cursor read and checked. */
export type PagePlan =
  | { kind: 'run'; pagination: PaginationRequest | undefined; keysetAfter?: KeysetPosition }
  | { kind: 'recorded'; position: SnapshotPosition };

export function planPage(cursors: PageCursors, pagination: PaginationRequest | undefined, binding: CursorBinding, recorded: boolean): PagePlan {
  const method = pagination?.method;
  if (pagination?.cursor !== undefined && method !== 'cursor' && method !== 'keyset') {
    throw new RequestValidationError([{ loc: ['body', 'pagination', 'cursor'], msg: "a cursor needs pagination.method 'cursor' or 'keyset'", type: 'cursor_without_method' }]);
  }
  if (method === 'cursor' && !recorded) {
    throw new RequestValidationError([{
      loc: ['body', 'pagination', 'method'],
      msg: "'cursor' pagination pages a recorded execution and ad hoc executions record none: use 'keyset' (re-runs the pipeline) or 'offset'",
      type: 'cursor_needs_saved_retriever',
    }]);
  }
  if (method === 'cursor' && pagination?.cursor !== undefined) {
    const position = cursors.readSnapshot(pagination.cursor, binding);
    // A page size given with the cursor wins; else the first page's.
    const size = pagination.page_size ?? pagination.limit;
    return { kind: 'recorded', position: size ? { ...position, pageSize: size } : position };
  }
  if (method === 'keyset' && pagination?.cursor !== undefined) {
    const { after, pageSize } = cursors.readKeyset(pagination.cursor, binding);
    const { cursor: _cursor, ...rest } = pagination;
    void _cursor;
    return { kind: 'run', pagination: { ...rest, page_size: pagination.page_size ?? pagination.limit ?? pageSize }, keysetAfter: after };
  }
  return { kind: 'run', pagination };
}

/** Puts the signed cursor for the next page into an execution's answer. */
export function withCursor(cursors: PageCursors, outcome: ExecutionOutcome, binding: CursorBinding): ExecutionOutcome {
  const next = outcome.continuation;
  if (!next) return outcome;
  if (next.method === 'cursor' && outcome.pagination.method === 'cursor') {
    const cursor = cursors.issueSnapshot(binding, { executionId: outcome.execution_id, offset: next.offset, pageSize: next.page_size });
    return { ...outcome, pagination: { ...outcome.pagination, cursor } };
  }
  if (next.method === 'keyset' && outcome.pagination.method === 'keyset') {
    return { ...outcome, pagination: { ...outcome.pagination, next_cursor: cursors.issueKeyset(binding, next.after, next.page_size) } };
  }
  return outcome;
}

/**
 * A later page of a recorded ranking: the next ids in recorded order, read again by id with the caller's
 * principal (deleted or no longer visible documents drop out and the page is filled from the ids after them).
 */
export async function recordedPage(
  documents: DocumentSource,
  cursors: PageCursors,
  execution: ExecutionRow,
  position: SnapshotPosition,
  binding: CursorBinding,
  budgetLimits: ExecutionOutcome['budget']['limits'],
): Promise<ExecutionOutcome> {
  if (execution.status === 'failed') throw new InputError(`Execution '${execution.execution_id}' failed: it has no further pages`, { execution_id: execution.execution_id });
  const startedAt = new Date();
  const t0 = performance.now();
  const ids = execution.result_document_ids;
  const scores = execution.result_scores;
  const page: StageDocument[] = [];
  let offset = Math.min(position.offset, ids.length);
  while (page.length < position.pageSize && offset < ids.length) {
    const from = offset;
    const chunk = ids.slice(from, from + (position.pageSize - page.length));
    offset += chunk.length;
    const found = await documents.getByIds(binding.organizationId, execution.collection_ids, chunk, binding.principalId);
    const scoreOf = new Map(chunk.map((id, i) => [id, scores?.[from + i] ?? null]));
    for (const doc of found) {
      const score = scoreOf.get(doc.document_id);
      page.push(typeof score === 'number' ? { ...doc, score } : doc);
    }
  }
  const hasNext = offset < ids.length;
  const duration = Math.round((performance.now() - t0) * 1000) / 1000;
  return {
    execution_id: execution.execution_id,
    status: execution.status,
    documents: page,
    result_ids: page.map((d) => d.document_id),
    result_scores: page.map((d) => (typeof d.score === 'number' ? d.score : null)),
    pagination: {
      method: 'cursor',
      cursor: hasNext ? cursors.issueSnapshot(binding, { executionId: execution.execution_id, offset, pageSize: position.pageSize }) : null,
      has_next: hasNext,
      page_size: position.pageSize,
    },
    continuation: null,
    // Nothing ran for this page: it was read from the recorded ranking.
    stage_statistics: { stages: {}, total_time_ms: duration, credits_used: 0, inference_calls: 0 },
    budget: { credits_used: 0, credits_remaining: null, time_used_ms: duration, inference_calls: 0, llm_tokens: 0, limits: budgetLimits, exceeded: null },
    error: null,
    collection_ids: execution.collection_ids,
    inputs: execution.inputs,
    started_at: startedAt,
    duration_ms: duration,
    optimization: null,
  };
}

