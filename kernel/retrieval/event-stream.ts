/**
 * Streamed executions as Server-Sent Events: one `data: {json}` line per event, as stages start and end,
 * then the result (or a failure), closed by `data: [DONE]`. What each event says is the caller's `format`
 * (the private execute tells everything; a public one leaves out what is private); the mechanics are here.
 *
 * The status line is sent with the first event, not before: what fails before any stage starts (bad inputs,
 * an unknown retriever, a bad cursor) is still an ordinary JSON error. Once the stream has begun, an error
 * becomes the format's failure event. Each event is written as it happens (nothing buffers or compresses
 * the body); a client that hangs up aborts the run before its next stage, and nothing more is written.
 */
import { PassThrough } from 'node:stream';
import type { Response } from 'express';
import type { Logger } from 'pino';
import { ApiError, RequestValidationError } from '../errors.js';
import type { ExecutionObserver, StageStartEvent, StageStatistics } from './engine.js';

export const EVENT_STREAM = 'text/event-stream';

/** What a stream's events say, for one kind of execution result. */
export interface ExecutionEventFormat<Result, Event> {
  stageStarted(event: StageStartEvent): Event;
  stageFinished(event: { execution_id: string; total_stages: number; statistics: StageStatistics }): Event;
  /** The closing event of a run that ended (completed, failed or stopped by its budget). */
  result(result: Result, totalStages: number): Event;
  /** The closing event of a run that threw after the stream began (`message` is safe to show). */
  failure(executionId: string, totalStages: number, message: string): Event;
}

export interface StreamedReply {
  status: 200;
  body: undefined;
  headers: Record<string, string>;
  stream: NodeJS.ReadableStream;
}

/**
 * Runs `run` with an observer that writes the format's events, and answers once the first event exists (or
 * the run ended before any): a run that throws before its first event throws here, as a JSON error.
 */
export async function streamExecutionEvents<Result extends { execution_id: string; status: string }, Event>(
  res: Response,
  log: Logger,
  headers: Record<string, string>,
  format: ExecutionEventFormat<Result, Event>,
  run: (observer: ExecutionObserver, signal: AbortSignal) => Promise<Result>,
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
  const send = (event: Event | '[DONE]') => {
    begun = true;
    if (!events.destroyed && !events.writableEnded) events.write(`data: ${event === '[DONE]' ? event : JSON.stringify(event)}\n\n`);
    announce();
  };
  const end = () => {
    send('[DONE]');
    events.end();
  };
  const clientLeft = (details: Record<string, unknown>) => {
    log.info(details, 'streamed retriever execution stopped: the client went away');
    events.destroy();
  };

  const observer: ExecutionObserver = {
    stageStarted: (e) => {
      totalStages = e.total_stages;
      executionId = e.execution_id;
      send(format.stageStarted(e));
    },
    stageFinished: (e) => send(format.stageFinished(e)),
  };

  const running = run(observer, abort.signal).then(
    (result) => {
      // Nobody is reading: the run stopped where the client left (and was recorded); nothing more is sent.
      if (abort.signal.aborted) return clientLeft({ execution_id: result.execution_id, status: result.status });
      send(format.result(result, totalStages));
      end();
    },
    (err: unknown) => {
      if (!begun) throw err;
      if (abort.signal.aborted) return clientLeft({ reason: (err as Error).message });
      const message = err instanceof ApiError || err instanceof RequestValidationError ? err.message : 'internal error (logged with the request id)';
      if (!(err instanceof ApiError)) log.error({ err }, 'streamed retriever execution failed');
      send(format.failure(executionId, totalStages, message));
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
