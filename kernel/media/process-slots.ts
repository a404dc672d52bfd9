/**
 * A bound on helper processes (ffmpeg) running at once: every media helper given `slots` takes one before
 * it starts its process and gives it back when the process is gone. Without it each extractor bounds only
 * its own runs, and a video collection and an audio collection batched at the same time add up.
 *
 * Waiters are served first come, first served. A waiter whose signal aborts leaves the queue and rejects
 * with the signal's reason; a slot given back twice counts once.
 */
export class ProcessSlots {
  private running = 0;
  private peak = 0;
  private readonly waiting: Array<() => void> = [];

  constructor(readonly limit: number) {
    if (!Number.isInteger(limit) || limit < 1) throw new RangeError(`a process limit must be a whole number of at least 1, not ${limit}`);
  }

  /** Processes running now under these slots. */
  get active(): number {
    return this.running;
  }

  /** Callers waiting for a slot. */
  get queued(): number {
    return this.waiting.length;
  }

  /** The most processes that ever ran at once under these slots. */
  get highWater(): number {
    return this.peak;
  }

  /** Resolves with the slot's release once one is free. */
  acquire(signal?: AbortSignal): Promise<() => void> {
    if (signal?.aborted) return Promise.reject(reasonOf(signal));
    if (this.running < this.limit) return Promise.resolve(this.take());
    return new Promise((resolve, reject) => {
      const grant = (): void => {
        signal?.removeEventListener('abort', onAbort);
        resolve(this.take());
      };
      const onAbort = (): void => {
        const at = this.waiting.indexOf(grant);
        if (at >= 0) this.waiting.splice(at, 1);
        reject(reasonOf(signal!));
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      this.waiting.push(grant);
    });
  }

  private take(): () => void {
    this.running += 1;
    this.peak = Math.max(this.peak, this.running);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.running -= 1;
      // The slot passes straight to the next waiter (running goes back up in take()).
      this.waiting.shift()?.();
    };
  }
}

function reasonOf(signal: AbortSignal): Error {
  return signal.reason instanceof Error ? signal.reason : new Error(String(signal.reason ?? 'aborted'));
}
