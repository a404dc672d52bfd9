/**
 * Request ceilings in fixed windows on the injected clock. `RateLimiter` is the seam every limit goes
 * through (per key, per unauthenticated address, per published retriever, per visitor address), so the
 * counters can live in one store shared by every API process. `InProcessRateLimiter` keeps them in this
 * process: exact and free of I/O, and right for the embedded default (PGlite), which runs one API process.
 * With PostgreSQL, several API processes may serve one deployment: `SharedRateLimiter`
 * (shared-rate-limiter.ts) keeps the counters there.
 */
import type { Clock } from '../clock.js';

export interface RateDecision {
  allowed: boolean;
  limit: number;
  remaining: number;
  /** Seconds until the current window ends. */
  resetSeconds: number;
}

export const MINUTE_MS = 60_000;
export const HOUR_MS = 3_600_000;
export const DAY_MS = 86_400_000;

/** The fixed window `now` falls in (its index since the epoch), and the whole seconds until it ends (at least 1). */
export function windowAt(now: number, windowMs: number): { window: number; resetSeconds: number } {
  const window = Math.floor(now / windowMs);
  return { window, resetSeconds: Math.max(1, Math.ceil(((window + 1) * windowMs - now) / 1000)) };
}

export interface RateLimiter {
  /** Counts one request for `subject` in the current window of `windowMs` (default one minute). */
  consume(subject: string, limit: number, windowMs?: number): Promise<RateDecision>;
  /** Whether `subject` has used up its limit in the current window (consumes nothing). */
  exhausted(subject: string, limit: number, windowMs?: number): Promise<boolean>;
}

export class InProcessRateLimiter implements RateLimiter {
  private readonly windows = new Map<string, { window: number; count: number }>();

  constructor(private readonly clock: Clock) {}

  async consume(subject: string, limit: number, windowMs = MINUTE_MS): Promise<RateDecision> {
    return this.consumeNow(subject, limit, windowMs);
  }

  async exhausted(subject: string, limit: number, windowMs = MINUTE_MS): Promise<boolean> {
    const entry = this.windows.get(`${windowMs}:${subject}`);
    return entry !== undefined && entry.window === Math.floor(this.clock.now().getTime() / windowMs) && entry.count >= limit;
  }

  private consumeNow(subject: string, limit: number, windowMs: number): RateDecision {
    const now = this.clock.now().getTime();
    const { window, resetSeconds } = windowAt(now, windowMs);
    const slot = `${windowMs}:${subject}`;
    let entry = this.windows.get(slot);
    if (!entry || entry.window !== window) {
      entry = { window, count: 0 };
      this.windows.set(slot, entry);
      if (this.windows.size > 100_000) this.dropStale(now);
    }
    if (entry.count >= limit) return { allowed: false, limit, remaining: 0, resetSeconds };
    entry.count += 1;
    return { allowed: true, limit, remaining: limit - entry.count, resetSeconds };
  }

  private dropStale(now: number): void {
    for (const [slot, entry] of this.windows) {
      const windowMs = Number(slot.slice(0, slot.indexOf(':')));
      if (entry.window !== Math.floor(now / windowMs)) this.windows.delete(slot);
    }
  }
}
