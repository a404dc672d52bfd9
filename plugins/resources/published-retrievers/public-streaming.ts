/**
 * Streamed public executions: Server-Sent Events as the private execute sends them, minus what is private —
 * stage events carry only their index and count (no stage names, ids or statistics), and the closing
 * `execution_complete` carries the exposed documents only. Closed by `data: [DONE]`. What fails before the
 * first stage starts (inputs, limits) is an ordinary JSON error; later failures become `execution_error`.
 * The mechanics are kernel/retrieval/event-stream.ts.
 */
import type { Response } from 'express';
import type { Logger } from 'pino';
import type { components } from '../../../generated/openapi.js';
import type { ExecutionObserver } from '../../../kernel/retrieval/engine.js';
import { streamExecutionEvents, type ExecutionEventFormat, type StreamedReply } from '../../../kernel/retrieval/event-stream.js';

type Schemas = components['schemas'];
type PublicEvent = Schemas['PublicExecutionEvent'];
type PublicResult = Schemas['PublicExecutionResult'];

const publicEvents: ExecutionEventFormat<PublicResult, PublicEvent> = {
  stageStarted: (e) => ({ event_type: 'stage_start', execution_id: e.execution_id, stage_index: e.stage_index, total_stages: e.total_stages }),
  stageFinished: ({ execution_id, total_stages, statistics }) => ({
    event_type: statistics.status === 'failed' ? 'stage_error' : 'stage_complete', execution_id, stage_index: statistics.stage_index, total_stages,
  }),
  result: (result, totalStages) => ({
    event_type: result.status === 'failed' ? 'execution_error' : 'execution_complete',
    execution_id: result.execution_id, stage_index: null, total_stages: totalStages,
    status: result.status, error: result.error, documents: result.documents, pagination: result.pagination,
  }),
  failure: (executionId, totalStages, message) => ({
    event_type: 'execution_error', execution_id: executionId, stage_index: null, total_stages: totalStages, status: 'failed', error: message,
  }),
};

export function streamPublicExecution(
  res: Response,
  log: Logger,
  run: (observer: ExecutionObserver, signal: AbortSignal) => Promise<PublicResult>,
): Promise<StreamedReply> {
  return streamExecutionEvents(res, log, {}, publicEvents, run);
}
