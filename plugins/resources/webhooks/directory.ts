/**
 * Each organization's enabled webhooks, kept in memory for a few seconds: every domain event (a bulk write
 * announces thousands) and every retriever execution asks, and most organizations have none. A change made
 * in this process is seen at once; other processes see it within CACHE_TTL_MS.
 */
import type { Clock } from '../../../kernel/clock.js';
import type { RetrieverAlertPolicy, RetrieverAlertThresholds } from '../../../kernel/retrieval/alerts.js';
import type { WebhookRow, WebhookStore } from './store.js';

export const CACHE_TTL_MS = 10_000;
/** Organizations remembered at most (the oldest entry goes first). */
const MAX_ORGANIZATIONS = 10_000;

export class WebhookDirectory implements RetrieverAlertPolicy {
  private readonly cached = new Map<string, { at: number; rows: Promise<WebhookRow[]> }>();

  constructor(
    private readonly store: WebhookStore,
    private readonly clock: Clock,
  ) {}

  enabled(organizationId: string): Promise<WebhookRow[]> {
    const now = Date.now();
    const hit = this.cached.get(organizationId);
    if (hit && now - hit.at < CACHE_TTL_MS) return hit.rows;
    const rows = this.store.enabled(organizationId);
    // A failed read is not remembered: the next caller asks again.
    rows.catch(() => this.cached.delete(organizationId));
    this.cached.delete(organizationId);
    this.cached.set(organizationId, { at: now, rows });
    if (this.cached.size > MAX_ORGANIZATIONS) this.cached.delete(this.cached.keys().next().value!);
    return rows;
  }

  forget(organizationId: string): void {
    this.cached.delete(organizationId);
  }

  async thresholds(organizationId: string): Promise<RetrieverAlertThresholds> {
    const rows = await this.enabled(organizationId);
    const slow = rows.filter((w) => w.event_types.includes('retriever.slow_query')).map((w) => w.slow_query_threshold_ms);
    const hitRate = rows.filter((w) => w.event_types.includes('cache.low_hit_rate')).map((w) => w.low_hit_rate_threshold);
    return {
      slowQueryMs: slow.length > 0 ? Math.min(...slow) : null,
      lowHitRate: hitRate.length > 0 ? Math.max(...hitRate) : null,
    };
  }

  claim(organizationId: string, key: string, windowMs: number): Promise<boolean> {
    return this.store.claimAlert(organizationId, key, this.clock.now(), windowMs);
  }
}
