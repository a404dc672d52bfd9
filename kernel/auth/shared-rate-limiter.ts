/**
 * Rate limits shared by every API process on one PostgreSQL database: each (subject, window) has one
 * counter row in `rate_limit_counters`, and nothing is allowed that the row did not grant, so the
 * total across processes never exceeds the limit.
 *
 * A round trip per request would cost more than the rest of an authenticated request, so a process
 * claims a slice of the window's quota at a time (one atomic `INSERT ... ON CONFLICT DO UPDATE`) and
 * hands it out locally, without I/O, until it runs low; then it claims the next slice in the background.
 * - Small limits (under `exactBelow`) are claimed one request at a time: exact, one round trip per
 *   allowed request, so never more round trips a window than the limit itself.
 * - Larger limits claim at most limit/`sliceOfLimit` and at most an `sliceOfRemaining`th of what is
 *   left, so slices shrink as the window fills up.
 * - Once the counter has reached the limit, this process refuses locally (counts only grow within a
 *   window) until the window ends: refusals cost no I/O either.
 * The trade-off: a slice one process holds is invisible to the others, so a process can refuse a little
 * early while another still holds part of its last slice (at most one slice per process). Unused slices
 * expire with their window, and are given back when the process shuts down.
 *
 * If the database cannot be reached, each process counts on its own (and logs it) until it can again: a
 * limiter outage must neither refuse every request nor lift every limit.
 */
import { createHash } from 'node:crypto';
import type { Knex } from 'knex';
import type { Logger } from 'pino';
import type { Clock } from '../clock.js';
import { MINUTE_MS, windowAt, type RateDecision, type RateLimiter } from './rate-limiter.js';

export interface SharedRateLimiterOptions {
  /** Limits below this are claimed one request at a time (exact). Default 100. */
  exactBelow?: number;
  /** A claim takes at most limit / sliceOfLimit. Default 50 (2% of the limit). */
  sliceOfLimit?: number;
  /** A claim takes at most (limit - counted) / sliceOfRemaining, and at least 1. Default 8. */
  sliceOfRemaining?: number;
  /** How often this process deletes counters of windows that have ended (ms). Default one minute. */
  sweepEveryMs?: number;
  log?: Logger;
}

/** Windows that ended this long ago are swept: room for clocks of API processes that differ a little. */
const SWEEP_GRACE_MS = MINUTE_MS;
/** The largest value of an `integer` column. */
const MAX_COUNT = 2_147_483_647;
/** Above this many local leases, those of ended windows are dropped. */
const MAX_LOCAL_LEASES = 100_000;

/** What this process holds of one subject's current window. */
interface Lease {
  window: number;
  windowMs: number;
  /** The subject as stored: long ones are hashed, so any subject fits the primary key. */
  storedSubject: string;
  /** Requests the shared counter granted this process in this window. */
  granted: number;
  /** Requests this process allowed in this window. */
  used: number;
  /** The shared counter as of this process's last claim (every process's grants). */
  counted: number;
  /** What the last claim granted (sizes the background refill). */
  lastGrant: number;
  /** The background claim of the next slice, while it is on its way. */
  refill: Promise<void> | undefined;
}

interface Claim {
  granted: number;
  counted: number;
}

export class SharedRateLimiter implements RateLimiter {
  private readonly leases = new Map<string, Lease>();
  private readonly exactBelow: number;
  private readonly sliceOfLimit: number;
  private readonly sliceOfRemaining: number;
  private readonly sweepEveryMs: number;
  private nextSweepAt = 0;
  private readonly inFlight = new Set<Promise<unknown>>();
  private lastFailureLoggedAt = -Infinity;
  private claimsMade = 0;

  constructor(
    private readonly db: Knex,
    private readonly clock: Clock,
    private readonly options: SharedRateLimiterOptions = {},
  ) {
    this.exactBelow = options.exactBelow ?? 100;
    this.sliceOfLimit = options.sliceOfLimit ?? 50;
    this.sliceOfRemaining = options.sliceOfRemaining ?? 8;
    this.sweepEveryMs = options.sweepEveryMs ?? MINUTE_MS;
  }

  /** Round trips made to claim (sweeps and give-backs excluded): for tests and benchmarks. */
  get claims(): number {
    return this.claimsMade;
  }

  async consume(subject: string, limit: number, windowMs = MINUTE_MS): Promise<RateDecision> {
    const now = this.clock.now().getTime();
    const { window, resetSeconds } = windowAt(now, windowMs);
    const lease = this.leaseFor(subject, windowMs, window, now);
    if (this.hasUnused(lease, limit)) return this.take(lease, limit, resetSeconds);
    if (lease.refill) {
      await lease.refill;
      if (this.hasUnused(lease, limit)) return this.take(lease, limit, resetSeconds);
    }
    // The counter only grows within a window: once it reached the limit, refuse without asking.
    if (lease.counted >= limit) return refused(limit, resetSeconds);
    const claim = await this.track(this.claim(lease, limit));
    this.apply(lease, claim);
    return this.hasUnused(lease, limit) ? this.take(lease, limit, resetSeconds) : refused(limit, resetSeconds);
  }

  /** From what this process knows, without I/O: it is only asked to save a database lookup. */
  async exhausted(subject: string, limit: number, windowMs = MINUTE_MS): Promise<boolean> {
    const lease = this.leases.get(slotOf(subject, windowMs));
    const { window } = windowAt(this.clock.now().getTime(), windowMs);
    return lease !== undefined && lease.window === window && !this.hasUnused(lease, limit) && lease.counted >= limit;
  }

  /** Gives unused slices of current windows back to the shared counters (shutdown), then waits for pending writes. */
  async close(): Promise<void> {
    await Promise.allSettled([...this.inFlight]);
    const now = this.clock.now().getTime();
    const unused = [...this.leases.values()].filter((l) => l.granted > l.used && l.window === windowAt(now, l.windowMs).window);
    this.leases.clear();
    if (unused.length === 0) return;
    await this.db
      .raw(
        `update rate_limit_counters c set count = greatest(0, c.count - r.unused)
           from unnest(?::text[], ?::int[], ?::bigint[], ?::int[]) as r(subject, window_ms, window_start, unused)
          where c.subject = r.subject and c.window_ms = r.window_ms and c.window_start = r.window_start`,
        [
          unused.map((l) => l.storedSubject),
          unused.map((l) => l.windowMs),
          unused.map((l) => l.window * l.windowMs),
          unused.map((l) => l.granted - l.used),
        ],
      )
      .catch((err: unknown) => this.options.log?.warn({ err }, 'unused rate-limit slices not given back'));
  }

  private leaseFor(subject: string, windowMs: number, window: number, now: number): Lease {
    const slot = slotOf(subject, windowMs);
    const current = this.leases.get(slot);
    if (current && current.window === window) return current;
    // A new window: whatever was left of the last one expires with it.
    const lease: Lease = { window, windowMs, storedSubject: stored(subject), granted: 0, used: 0, counted: 0, lastGrant: 0, refill: undefined };
    this.leases.set(slot, lease);
    if (this.leases.size > MAX_LOCAL_LEASES) this.dropEnded(now);
    return lease;
  }

  private hasUnused(lease: Lease, limit: number): boolean {
    // `used < limit` too: a limit lowered mid-window applies to slices already held.
    return lease.used < lease.granted && lease.used < limit;
  }

  private take(lease: Lease, limit: number, resetSeconds: number): RateDecision {
    lease.used += 1;
    const held = lease.granted - lease.used;
    if (!lease.refill && lease.lastGrant > 1 && held <= lease.lastGrant / 4 && lease.counted < limit) this.refill(lease, limit);
    // The pool left after every process's claims, plus what this process still holds.
    const remaining = Math.max(0, Math.min(limit - lease.used, limit - lease.counted + held));
    return { allowed: true, limit, remaining, resetSeconds };
  }

  /** Claims the next slice before this one runs out, so the requests that follow need no round trip. */
  private refill(lease: Lease, limit: number): void {
    lease.refill = this.track(this.claim(lease, limit)).then((claim) => {
      lease.refill = undefined;
      this.apply(lease, claim);
    });
  }

  private apply(lease: Lease, claim: Claim): void {
    lease.granted += claim.granted;
    lease.counted = Math.max(lease.counted, claim.counted);
    lease.lastGrant = claim.granted;
  }

  /** The largest slice one claim may take of `limit`. */
  private maxSlice(limit: number): number {
    return limit < this.exactBelow ? 1 : Math.max(1, Math.floor(limit / this.sliceOfLimit));
  }

  /**
   * One atomic statement: grants min(slice, what is left, an eighth of what is left but at least 1), never
   * past the limit, and says how much it granted and what the counter now holds.
   */
  private async claim(lease: Lease, requested: number): Promise<Claim> {
    this.claimsMade += 1;
    // The counter is an integer column; no limit a caller can set comes near its ceiling.
    const limit = Math.min(Math.floor(requested), MAX_COUNT);
    const now = this.clock.now().getTime();
    this.sweepIfDue(now);
    const slice = this.maxSlice(limit);
    const windowStart = lease.window * lease.windowMs;
    const first = grantFor(0, limit, slice, this.sliceOfRemaining);
    try {
      const result = await this.db.raw(
        `insert into rate_limit_counters as c (subject, window_ms, window_start, window_end, count, last_grant)
         values (?, ?::int, ?::bigint, ?::bigint, ?::int, ?::int)
         on conflict (subject, window_ms, window_start) do update set
           last_grant = least(?::int, greatest(0, ?::int - c.count), greatest(1, (?::int - c.count) / ?::int)),
           count = c.count + least(?::int, greatest(0, ?::int - c.count), greatest(1, (?::int - c.count) / ?::int))
         returning count, last_grant`,
        [
          lease.storedSubject, lease.windowMs, windowStart, windowStart + lease.windowMs, first, first,
          slice, limit, limit, this.sliceOfRemaining,
          slice, limit, limit, this.sliceOfRemaining,
        ],
      );
      const row = (result as { rows: Array<{ count: number; last_grant: number }> }).rows[0]!;
      return { granted: row.last_grant, counted: row.count };
    } catch (err) {
      // Granted by this process alone: `used < limit` still holds each process to the limit.
      if (now - this.lastFailureLoggedAt >= MINUTE_MS) {
        this.lastFailureLoggedAt = now;
        this.options.log?.error({ err }, 'shared rate-limit counters unreachable: each process counts on its own');
      }
      return { granted: 1, counted: lease.counted };
    }
  }

  /** Deletes the counters of windows that ended a while ago; one cheap indexed delete a minute per process. */
  private sweepIfDue(now: number): void {
    if (now < this.nextSweepAt) return;
    this.nextSweepAt = now + this.sweepEveryMs;
    void this.track(
      this.db
        .raw('delete from rate_limit_counters where window_end < ?::bigint', [now - SWEEP_GRACE_MS])
        .catch((err: unknown) => this.options.log?.warn({ err }, 'rate-limit counters not swept')),
    );
  }

  private dropEnded(now: number): void {
    for (const [slot, lease] of this.leases) {
      if (lease.window !== windowAt(now, lease.windowMs).window) this.leases.delete(slot);
    }
  }

  private track<R>(promise: Promise<R>): Promise<R> {
    this.inFlight.add(promise);
    void promise.finally(() => this.inFlight.delete(promise)).catch(() => {});
    return promise;
  }
}

/** Subjects come from callers (addresses from proxies, names): a btree key must stay well under its ~2.7 kB limit. */
function stored(subject: string): string {
  return subject.length <= 200 ? subject : `sha256:${createHash('sha256').update(subject).digest('hex')}`;
}

function slotOf(subject: string, windowMs: number): string {
  return `${windowMs}:${subject}`;
}

function refused(limit: number, resetSeconds: number): RateDecision {
  return { allowed: false, limit, remaining: 0, resetSeconds };
}

/** The SQL's grant, for a counter that does not exist yet. */
function grantFor(counted: number, limit: number, slice: number, sliceOfRemaining: number): number {
  const left = limit - counted;
  return Math.min(slice, Math.max(0, left), Math.max(1, Math.trunc(left / sliceOfRemaining)));
}
