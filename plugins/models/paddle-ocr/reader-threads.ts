/**
 * OCR on several cores in one process: `count` reader threads (./reader-thread-main.ts), each with its own
 * pair of sessions (15 MB of weights), taking pictures one at a time from one queue, so the pictures of a
 * call and of calls side by side spread over the threads alike. onnxruntime-node runs a session on the
 * calling JavaScript thread, and threads inside one run bought no speed on these models (see ./engine.ts),
 * so a picture per thread is the grain that uses the cores; the process's own event loop (which answers
 * the other models' calls) never runs a session. A picture reads the same whichever thread takes it.
 *
 * Large pictures (detection's buffers grow with the area: a page holds ~100 MB of them, which the thread's
 * allocator keeps once freed) go to the first thread only, so only one thread ever holds a page's worth.
 *
 * A thread that dies (a crash, the process running short of memory) fails the picture it held and is
 * started again for the next one; idle threads do not keep the process alive.
 */
import { Worker } from 'node:worker_threads';
import { threadEntrySource } from '../../../kernel/thread-entry.js';
import type { RawLine, RgbImage } from './engine.js';
import type { ReaderMessage, ReadRequest } from './reader-thread-main.js';

/** Pictures above this many pixels are read by the first thread only (about 640×640). */
export const LARGE_PICTURE_PIXELS = 410_000;

interface Job {
  picture: RgbImage;
  large: boolean;
  resolve(lines: RawLine[]): void;
  reject(error: Error): void;
}

interface ReaderThread {
  worker: Worker;
  state: 'opening' | 'idle' | 'busy' | 'ended';
  /** The job it is reading, when busy. */
  job?: Job;
  /** Settles once the thread has opened its sessions (or could not). */
  opened: Promise<void>;
}

export interface ReaderThreads {
  /** One prepared picture's lines, top to bottom. */
  read(picture: RgbImage): Promise<RawLine[]>;
  /** Ends every thread; pictures still queued or being read fail. */
  close(): Promise<void>;
  /** @internal The running threads, by slot (tests end one to see the pool recover). */
  readonly workers: ReadonlyArray<Worker | undefined>;
}

function asError(error: { message: string; name: string }): Error {
  return Object.assign(new Error(error.message), { name: error.name });
}

/** Starts `count` reader threads and resolves once all have opened their sessions (or rejects with the first failure). */
export async function openReaderThreads(count: number): Promise<ReaderThreads> {
  const threads: Array<ReaderThread | undefined> = Array.from({ length: Math.max(1, count) }, () => undefined);
  const queue: Job[] = [];
  let closed = false;

  const failQueued = (error: Error): void => {
    for (const job of queue.splice(0)) job.reject(error);
  };

  const start = (slot: number): ReaderThread => {
    const worker = new Worker(threadEntrySource(import.meta.url, 'reader-thread-main'), { eval: true, name: `tessera-ocr-reader-${slot}` });
    let opened!: () => void;
    let failed!: (error: Error) => void;
    const thread: ReaderThread = { worker, state: 'opening', opened: new Promise<void>((resolve, reject) => ((opened = resolve), (failed = reject))) };
    thread.opened.catch(() => undefined); // observed by openReaderThreads for the first threads
    const end = (error: Error): void => {
      if (thread.state === 'ended') return;
      const wasOpening = thread.state === 'opening';
      thread.state = 'ended';
      failed(error);
      thread.job?.reject(error);
      thread.job = undefined;
      if (threads[slot] === thread) threads[slot] = undefined;
      void worker.terminate();
      // A thread that cannot open its sessions fails what waits for it rather than being restarted forever.
      if (wasOpening) failQueued(error);
      else if (!closed) dispatch();
    };
    worker.on('message', (message: ReaderMessage) => {
      if ('ready' in message) {
        if (!message.ready) return end(asError(message.error));
        thread.state = 'idle';
        worker.unref();
        opened();
        return dispatch();
      }
      const job = thread.job;
      thread.job = undefined;
      thread.state = 'idle';
      worker.unref();
      if (message.ok) job?.resolve(message.lines);
      else job?.reject(asError(message.error));
      dispatch();
    });
    worker.on('error', (err) => end(new Error(`paddle-ocr: a reader thread failed: ${err.message}`, { cause: err })));
    worker.on('exit', (code) => end(new Error(`paddle-ocr: a reader thread stopped (exit code ${code})`)));
    threads[slot] = thread;
    return thread;
  };

  const dispatch = (): void => {
    for (let slot = 0; slot < threads.length && queue.length > 0; slot++) {
      const thread = threads[slot] ?? start(slot);
      if (thread.state !== 'idle') continue; // opening: its ready message dispatches again
      const next = slot === 0 ? 0 : queue.findIndex((job) => !job.large);
      if (next < 0) continue;
      const [job] = queue.splice(next, 1);
      thread.state = 'busy';
      thread.job = job;
      thread.worker.ref(); // a caller is waiting: the process may not exit under it
      thread.worker.postMessage({ picture: job!.picture } satisfies ReadRequest);
    }
  };

  const first = threads.map((_, slot) => start(slot));
  try {
    await Promise.all(first.map((thread) => thread.opened));
  } catch (err) {
    closed = true;
    await Promise.all(first.map((thread) => thread.worker.terminate()));
    throw err;
  }

  return {
    read: (picture) =>
      new Promise<RawLine[]>((resolve, reject) => {
        if (closed) return reject(new Error('paddle-ocr: the model is closed'));
        queue.push({ picture, large: picture.width * picture.height > LARGE_PICTURE_PIXELS, resolve, reject });
        dispatch();
      }),
    close: async () => {
      closed = true;
      failQueued(new Error('paddle-ocr: the model is closed'));
      await Promise.all(threads.map((thread) => thread?.worker.terminate()));
    },
    get workers() {
      return threads.map((thread) => thread?.worker);
    },
  };
}
