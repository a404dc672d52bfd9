/**
 * Per-key requests-per-minute ceilings, in fixed one-minute windows on the injected clock.
 * Counters live in this process: with several API processes behind a balancer, each enforces the
 * limit on the requests it serves.
 */
import type { Clock } from '../clock.js';

export interface RateDecision {
  allowed: boolean;
  limit: number;
  remaining: number;
  /** Seconds until the current window ends. */
  resetSeconds: number;
}

const WINDOW_MS = 60_000;

export class RateLimiter {
  private readonly windows = new Map<string, { window: number; count: number }>();

  constructor(private readonly clock: Clock) {}

  consume(subject: string, limitPerMinute: number): RateDecision {
    const now = this.clock.now().getTime();
    const window = Math.floor(now / WINDOW_MS);
    const resetSeconds = Math.max(1, Math.ceil(((window + 1) * WINDOW_MS - now) / 1000));
    let entry = this.windows.get(subject);
    if (!entry || entry.window !== window) {
      entry = { window, count: 0 };
      this.windows.set(subject, entry);
      if (this.windows.size > 100_000) this.dropStale(window);
    }
    if (entry.count >= limitPerMinute) {
      return { allowed: false, limit: limitPerMinute, remaining: 0, resetSeconds };
    }
    entry.count += 1;
    return { allowed: true, limit: limitPerMinute, remaining: limitPerMinute - entry.count, resetSeconds };
  }

  /** Whether `subject` has used up its limit in the current window (consumes nothing). */
  exhausted(subject: string, limitPerMinute: number): boolean {
    const entry = this.windows.get(subject);
    return entry !== undefined && entry.window === Math.floor(this.clock.now().getTime() / WINDOW_MS) && entry.count >= limitPerMinute;
  }

  private dropStale(current: number): void {
    for (const [subject, entry] of this.windows) if (entry.window !== current) this.windows.delete(subject);
  }
}
