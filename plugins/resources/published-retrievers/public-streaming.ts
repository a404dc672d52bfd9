/**
 * Streamed public executions: Server-Sent Events as the private execute sends them, minus what is private —
 * stage events carry only their index and count (no stage names, ids or statistics), and the closing
 * `execution_complete` carries the exposed documents only. Closed by `data: [DONE]`. What fails before the
 * first stage starts (inputs, limits) is an ordinary JSON error; later failures become `execution_error`.
 */
import { PassThrough } from 'node:stream';
import type { Response } from 'express';
import type { Logger } from 'pino';
import type { components } from '../../../generated/openapi.js';
import { ApiError, RequestValidationError } from '../../../kernel/errors.js';
import type { ExecutionObserver } from '../../../kernel/retrieval/engine.js';

type Schemas = components['schemas'];
type PublicEvent = Schemas['PublicExecutionEvent'];

export interface PublicStreamReply {
  status: 200;
  body: undefined;
  headers: Record<string, string>;
  stream: NodeJS.ReadableStream;
}

export async function streamPublicExecution(
  res: Response,
  log: Logger,
  run: (observer: ExecutionObserver, signal: AbortSignal) => Promise<Schemas['PublicExecutionResult']>,
): Promise<PublicStreamReply> {
  const events = new PassThrough();
  const abort = new AbortController();
  res.on('close', () => {
    if (!res.writableFinished) abort.abort();
  });
  let begun = false;
  let announce!: () => void;
  const firstEvent = new Promise<void>((resolve) => (announce = resolve));
  let totalStages = 0;
  let executionId = '';
  const send = (event: PublicEvent | '[DONE]') => {
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
      send({ event_type: 'stage_start', execution_id: e.execution_id, stage_index: e.stage_index, total_stages: e.total_stages });
    },
    stageFinished: ({ execution_id, total_stages, statistics }) => {
      send({ event_type: statistics.status === 'failed' ? 'stage_error' : 'stage_complete', execution_id, stage_index: statistics.stage_index, total_stages });
    },
  };
  const running = run(observer, abort.signal).then(
    (result) => {
      send({
        event_type: result.status === 'failed' ? 'execution_error' : 'execution_complete',
        execution_id: result.execution_id, stage_index: null, total_stages: totalStages,
        status: result.status, error: result.error, documents: result.documents, pagination: result.pagination,
      });
      end();
    },
    (err: unknown) => {
      if (!begun) throw err;
      if (abort.signal.aborted) {
        events.destroy();
        return;
      }
      const message = err instanceof ApiError || err instanceof RequestValidationError ? err.message : 'internal error (logged with the request id)';
      if (!(err instanceof ApiError)) log.error({ err }, 'streamed public execution failed');
      send({ event_type: 'execution_error', execution_id: executionId, stage_index: null, total_stages: totalStages, status: 'failed', error: message });
      end();
    },
  );
  await Promise.race([firstEvent, running]);
  return {
    status: 200,
    body: undefined,
    headers: { 'Content-Type': 'text/event-stream; charset=utf-8', 'Cache-Control': 'no-cache', 'X-Accel-Buffering': 'no' },
    stream: events,
  };
}
