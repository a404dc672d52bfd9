/**
 * Alerts about saved retrievers' executions (`retriever.slow_query`, `cache.low_hit_rate`). The retrievers
 * plugin checks each recorded execution against what listeners (the webhooks plugin) ask for, and publishes
 * the event itself; without a bound policy, or with nobody listening in an organization, nothing is checked.
 */

export interface RetrieverAlertThresholds {
  /** Executions taking at least this long (ms) are announced; null: nobody in the organization listens. */
  slowQueryMs: number | null;
  /** A retriever whose recent cache hit rate (0..1) falls below this is announced; null: nobody listens. */
  lowHitRate: number | null;
}

export interface RetrieverAlertPolicy {
  /** The organization's loosest thresholds over its listeners (cached: cheap on every execution). */
  thresholds(organizationId: string): Promise<RetrieverAlertThresholds>;
  /**
   * True for one caller per `key` within `windowMs`, across every process sharing the database: what keeps
   * a repeating condition (a retriever whose hit rate stays low) from firing on every execution.
   */
  claim(organizationId: string, key: string, windowMs: number): Promise<boolean>;
}
