/**
 * Public execution ceilings: per published retriever (all visitors together) per minute, hour and day, from a
 * named tier or explicit numbers, and optionally per visitor address. Counted through the kernel's RateLimiter
 * (shared by every API process when its store is), answered with a 429 and `Retry-After`.
 */
import { DAY_MS, HOUR_MS, MINUTE_MS, type RateLimiter } from '../../../kernel/auth/rate-limiter.js';
import { RateLimitError } from '../../../kernel/errors.js';
import type { PublishedRateLimits, PublishedRetrieverRecord } from '../../../kernel/retrieval/published.js';

export const RATE_TIERS = {
  free: { per_minute: 30, per_hour: 500, per_day: 2000 },
  standard: { per_minute: 120, per_hour: 3000, per_day: 20000 },
  pro: { per_minute: 600, per_hour: 20000, per_day: 200000 },
} as const;

export type NamedTier = keyof typeof RATE_TIERS;

export interface RateLimitsRequest {
  tier?: NamedTier;
  per_minute?: number;
  per_hour?: number;
  per_day?: number;
  per_ip_per_minute?: number | null;
  per_ip_per_hour?: number | null;
}

/** The limits a request asks for, on top of the current ones (a new tier resets the numbers to the tier's). */
export function resolveRateLimits(request: RateLimitsRequest | undefined, current?: PublishedRateLimits): PublishedRateLimits {
  const tierName: NamedTier = request?.tier ?? (current && current.tier !== 'custom' ? current.tier : 'standard');
  const base = request?.tier || !current ? { ...RATE_TIERS[tierName] } : { per_minute: current.per_minute, per_hour: current.per_hour, per_day: current.per_day };
  const explicit = request?.per_minute !== undefined || request?.per_hour !== undefined || request?.per_day !== undefined;
  const limits: PublishedRateLimits = {
    tier: explicit ? 'custom' : request?.tier ? tierName : (current?.tier ?? tierName),
    per_minute: request?.per_minute ?? base.per_minute,
    per_hour: request?.per_hour ?? base.per_hour,
    per_day: request?.per_day ?? base.per_day,
    per_ip_per_minute: request?.per_ip_per_minute !== undefined ? request.per_ip_per_minute : (current?.per_ip_per_minute ?? null),
    per_ip_per_hour: request?.per_ip_per_hour !== undefined ? request.per_ip_per_hour : (current?.per_ip_per_hour ?? null),
  };
  return limits;
}

/** Counts one public execution; a 429 naming the limit when one is used up. */
export async function enforcePublicRateLimits(limiter: RateLimiter, record: PublishedRetrieverRecord, visitor: string): Promise<void> {
  const limits = record.rateLimits;
  const checks: Array<{ subject: string; limit: number | null; windowMs: number; what: string }> = [
    { subject: `ip:${visitor}`, limit: limits.per_ip_per_minute, windowMs: MINUTE_MS, what: 'requests per minute from one address' },
    { subject: `ip:${visitor}`, limit: limits.per_ip_per_hour, windowMs: HOUR_MS, what: 'requests per hour from one address' },
    { subject: 'all', limit: limits.per_minute, windowMs: MINUTE_MS, what: 'requests per minute' },
    { subject: 'all', limit: limits.per_hour, windowMs: HOUR_MS, what: 'requests per hour' },
    { subject: 'all', limit: limits.per_day, windowMs: DAY_MS, what: 'requests per day' },
  ];
  for (const check of checks) {
    if (check.limit === null) continue;
    const decision = await limiter.consume(`published:${record.publicationId}:${check.subject}`, check.limit, check.windowMs);
    if (!decision.allowed) {
      throw new RateLimitError(
        `This published retriever allows ${check.limit} ${check.what}; retry in ${decision.resetSeconds} s`,
        decision.resetSeconds,
        { limit: check.limit, window_seconds: check.windowMs / 1000, retry_after_seconds: decision.resetSeconds },
      );
    }
  }
}
