/**
 * Streamed executions: Server-Sent Events, one `data: {json}` line per event — `stage_start`, then
 * `stage_complete` or `stage_error` for each stage that runs, then `execution_complete` (with the documents,
 * pagination, status and budget) or `execution_error` — closed by `data: [DONE]`.
 *
 * The status line is sent with the first event, not before: what fails before any stage starts (bad inputs,
 * an unknown retriever, a bad cursor) is still an ordinary JSON error. Once the stream has begun, an error
 * becomes an `execution_error` event. Each event is written as it happens (nothing buffers or compresses the
 * body); a client that hangs up aborts the run before its next stage.
 */
import { PassThrough } from 'node:stream';
import type { Request, Response } from 'express';
import type { Logger } from 'pino';
import type { components } from '../../../generated/openapi.js';
import { ApiError, RequestValidationError } from '../../../kernel/errors.js';
import type { ExecutionObserver } from '../../../kernel/retrieval/engine.js';

type Schemas = components['schemas'];
type ExecutionEvent = Schemas['RetrieverExecutionEvent'];
type ExecutionResult = Schemas['RetrieverExecutionResult'];

export const EVENT_STREAM = 'text/event-stream';

/** `stream: true` in the body, or an `Accept` that asks for events (and not JSON first). */
export function wantsEventStream(req: Request, stream: boolean | undefined): boolean {
  if (stream === true) return true;
  const accept = req.get('accept');
  return accept !== undefined && req.accepts(['application/json', EVENT_STREAM]) === EVENT_STREAM && accept.includes(EVENT_STREAM);
}

export interface StreamedReply {
  status: 200;
  body: undefined;
  headers: Record<string, string>;
  stream: NodeJS.ReadableStream;
}

/**
 * Runs `run` with an observer that writes the events, and answers once the first event exists (or the run
 * ended before any): a run that throws before its first event throws here, as a JSON error.
 */
export async function streamExecution(
  res: Response,
  log: Logger,
  headers: Record<string, string>,
  run: (observer: ExecutionObserver, signal: AbortSignal) => Promise<ExecutionResult>,
): Promise<StreamedReply> {
  const events = new PassThrough();
  const abort = new AbortController();
  // The response closing before it finished is the client hanging up: stop the run.
  res.on('close', () => {
    if (!res.writableFinished) abort.abort();
  });
  let begun = false;
  let announce!: () => void;
  const firstEvent = new Promise<void>((resolve) => (announce = resolve));
  let totalStages = 0;
  let executionId = '';
  const send = (event: ExecutionEvent | '[DONE]') => {
    begun = true;
    if (!events.destroyed && !events.writableEnded) events.write(`data: ${event === '[DONE]' ? event : JSON.stringify(event)}\n\n`);
    announce();
  };
  const end = () => {
    send('[DONE]');
    events.end();
  };

  const observer: ExecutionObserver = {
    stageStarted: (e) => {
      totalStages = e.total_stages;
      executionId = e.execution_id;
      send({
        event_type: 'stage_start', execution_id: e.execution_id, stage_name: e.stage_name, stage_index: e.stage_index, total_stages: e.total_stages,
        statistics: { input_count: e.input_count },
      });
    },
    stageFinished: ({ execution_id, total_stages, statistics }) => {
      send({
        event_type: statistics.status === 'failed' ? 'stage_error' : 'stage_complete',
        execution_id, stage_name: statistics.stage_name, stage_index: statistics.stage_index, total_stages,
        statistics: { input_count: statistics.input_count, output_count: statistics.output_count, duration_ms: statistics.duration_ms },
        stage_statistics: statistics,
        ...(statistics.error !== undefined ? { error: statistics.error } : {}),
      });
    },
  };

  const running = run(observer, abort.signal).then(
    (result) => {
      if (abort.signal.aborted) {
        // Nobody is reading: the execution was recorded (stopped where the client left), nothing more is sent.
        log.info({ execution_id: result.execution_id, status: result.status }, 'streamed retriever execution stopped: the client went away');
        events.destroy();
        return;
      }
      const stages = Object.keys(result.stage_statistics.stages).length || totalStages;
      send({
        event_type: result.status === 'failed' ? 'execution_error' : 'execution_complete',
        execution_id: result.execution_id, stage_name: null, stage_index: null, total_stages: stages,
        statistics: { output_count: result.documents.length, duration_ms: result.stage_statistics.total_time_ms },
        status: result.status, error: result.error, documents: result.documents, pagination: result.pagination, budget: result.budget,
      });
      end();
    },
    (err: unknown) => {
      if (!begun) throw err;
      if (abort.signal.aborted) {
        log.info({ reason: (err as Error).message }, 'streamed retriever execution stopped: the client went away');
        events.destroy();
        return;
      }
      const message = err instanceof ApiError || err instanceof RequestValidationError ? err.message : 'internal error (logged with the request id)';
      if (!(err instanceof ApiError)) log.error({ err }, 'streamed retriever execution failed');
      send({ event_type: 'execution_error', execution_id: executionId, stage_name: null, stage_index: null, total_stages: totalStages, status: 'failed', error: message });
      end();
    },
  );
  await Promise.race([firstEvent, running]);
  return {
    status: 200,
    body: undefined,
    headers: {
      ...headers,
      'Content-Type': `${EVENT_STREAM}; charset=utf-8`,
      'Cache-Control': 'no-cache',
      // Proxies (nginx) must pass each event on as it comes.
      'X-Accel-Buffering': 'no',
    },
    stream: events,
  };
}
