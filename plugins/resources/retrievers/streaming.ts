/**
 * Streamed executions of the private execute routes: `stage_start` (with the input count), then
 * `stage_complete` or `stage_error` for each stage that runs (with its statistics), then
 * `execution_complete` (with the documents, pagination, status and budget) or `execution_error`, closed by
 * `data: [DONE]`. The mechanics (first event, client hang-up, failures) are kernel/retrieval/event-stream.ts.
 */
import type { Request, Response } from 'express';
import type { Logger } from 'pino';
import type { components } from '../../../generated/openapi.js';
import type { ExecutionObserver } from '../../../kernel/retrieval/engine.js';
import { EVENT_STREAM, streamExecutionEvents, type ExecutionEventFormat, type StreamedReply } from '../../../kernel/retrieval/event-stream.js';

type Schemas = components['schemas'];
type ExecutionEvent = Schemas['RetrieverExecutionEvent'];
type ExecutionResult = Schemas['RetrieverExecutionResult'];

/** `stream: true` in the body, or an `Accept` that asks for events (and not JSON first). */
export function wantsEventStream(req: Request, stream: boolean | undefined): boolean {
  if (stream === true) return true;
  const accept = req.get('accept');
  return accept !== undefined && req.accepts(['application/json', EVENT_STREAM]) === EVENT_STREAM && accept.includes(EVENT_STREAM);
}

const privateEvents: ExecutionEventFormat<ExecutionResult, ExecutionEvent> = {
  stageStarted: (e) => ({
    event_type: 'stage_start', execution_id: e.execution_id, stage_name: e.stage_name, stage_index: e.stage_index, total_stages: e.total_stages,
    statistics: { input_count: e.input_count },
  }),
  stageFinished: ({ execution_id, total_stages, statistics }) => ({
    event_type: statistics.status === 'failed' ? 'stage_error' : 'stage_complete',
    execution_id, stage_name: statistics.stage_name, stage_index: statistics.stage_index, total_stages,
    statistics: { input_count: statistics.input_count, output_count: statistics.output_count, duration_ms: statistics.duration_ms },
    stage_statistics: statistics,
    ...(statistics.error !== undefined ? { error: statistics.error } : {}),
  }),
  result: (result, totalStages) => ({
    event_type: result.status === 'failed' ? 'execution_error' : 'execution_complete',
    execution_id: result.execution_id, stage_name: null, stage_index: null, total_stages: Object.keys(result.stage_statistics.stages).length || totalStages,
    statistics: { output_count: result.documents.length, duration_ms: result.stage_statistics.total_time_ms },
    status: result.status, error: result.error, documents: result.documents, pagination: result.pagination, budget: result.budget,
  }),
  failure: (executionId, totalStages, message) => ({
    event_type: 'execution_error', execution_id: executionId, stage_name: null, stage_index: null, total_stages: totalStages, status: 'failed', error: message,
  }),
};

export function streamExecution(
  res: Response,
  log: Logger,
  headers: Record<string, string>,
  run: (observer: ExecutionObserver, signal: AbortSignal) => Promise<ExecutionResult>,
): Promise<StreamedReply> {
  return streamExecutionEvents(res, log, headers, privateEvents, run);
}
