/**
 * `retriever.slow_query` and `cache.low_hit_rate`: after a saved execution is recorded, checked against
 * what listeners ask for (kernel/retrieval/alerts.ts; nobody listening, nothing is read). Runs behind the
 * answer and never fails an execution. The hit rate is that of the retriever's last HIT_RATE_WINDOW
 * executions that used its cache, judged once there are HIT_RATE_MIN_EXECUTIONS of them; a low rate is
 * announced at most once per LOW_HIT_RATE_EVERY_MS per retriever across processes.
 */
import type { Knex } from 'knex';
import type { Logger } from 'pino';
import type { Announcer } from '../../../kernel/events/announcer.js';
import type { RetrieverAlertPolicy } from '../../../kernel/retrieval/alerts.js';
import type { ExecutionHistory } from './execution-history.js';
import type { ExecutionRow, RetrieverRow } from './store.js';

export const HIT_RATE_WINDOW = 20;
export const HIT_RATE_MIN_EXECUTIONS = 10;
export const LOW_HIT_RATE_EVERY_MS = 3_600_000;
/** A retriever whose window was judged is judged again in this process only after this long (a read per execution otherwise). */
const HIT_RATE_RECHECK_MS = 60_000;
/** Retrievers whose last check is remembered at most. */
const MAX_REMEMBERED = 10_000;

type RetrieverRef = Pick<RetrieverRow, 'retriever_id' | 'retriever_name' | 'namespace_id' | 'organization_id'>;

export class ExecutionAlerts {
  private readonly judgedAt = new Map<string, number>();

  constructor(
    private readonly db: Knex,
    private readonly policy: () => RetrieverAlertPolicy | undefined,
    private readonly history: ExecutionHistory,
    private readonly announcer: Announcer,
    private readonly log: Logger,
  ) {}

  observe(retriever: RetrieverRef, record: ExecutionRow): void {
    const policy = this.policy();
    if (!policy) return;
    this.check(policy, retriever, record).catch((err: unknown) => this.log.warn({ err, retriever_id: retriever.retriever_id }, 'could not check the execution for alerts'));
  }

  private async check(policy: RetrieverAlertPolicy, retriever: RetrieverRef, record: ExecutionRow): Promise<void> {
    const thresholds = await policy.thresholds(retriever.organization_id);
    if (thresholds.slowQueryMs !== null && record.duration_ms >= thresholds.slowQueryMs) {
      await this.announcer.announce({
        type: 'retriever.slow_query',
        organization_id: retriever.organization_id,
        data: {
          ...idsOf(retriever),
          execution_id: record.execution_id,
          duration_ms: record.duration_ms,
          status: record.status,
          total_results: record.total_results,
        },
      });
    }
    if (thresholds.lowHitRate !== null && record.cache_hit !== null) await this.checkHitRate(policy, thresholds.lowHitRate, retriever);
  }

  private async checkHitRate(policy: RetrieverAlertPolicy, threshold: number, retriever: RetrieverRef): Promise<void> {
    const judged = this.judgedAt.get(retriever.retriever_id);
    if (judged !== undefined && Date.now() - judged < HIT_RATE_RECHECK_MS) return;
    await this.history.flush();
    const rows = (await this.db('retriever_executions')
      .where({ organization_id: retriever.organization_id, retriever_id: retriever.retriever_id })
      .whereNotNull('cache_hit')
      .orderBy('started_at', 'desc')
      .limit(HIT_RATE_WINDOW)
      .select('cache_hit')) as Array<{ cache_hit: boolean }>;
    // Too few to judge: asked again at the next execution.
    if (rows.length < HIT_RATE_MIN_EXECUTIONS) return;
    this.judgedAt.delete(retriever.retriever_id);
    this.judgedAt.set(retriever.retriever_id, Date.now());
    if (this.judgedAt.size > MAX_REMEMBERED) this.judgedAt.delete(this.judgedAt.keys().next().value!);
    const hits = rows.filter((r) => r.cache_hit).length;
    const hitRate = hits / rows.length;
    if (hitRate >= threshold) return;
    if (!(await policy.claim(retriever.organization_id, `cache.low_hit_rate:${retriever.retriever_id}`, LOW_HIT_RATE_EVERY_MS))) return;
    await this.announcer.announce({
      type: 'cache.low_hit_rate',
      organization_id: retriever.organization_id,
      data: { ...idsOf(retriever), hit_rate: hitRate, executions: rows.length, hits },
    });
  }
}

function idsOf(retriever: RetrieverRef) {
  return { retriever_id: retriever.retriever_id, retriever_name: retriever.retriever_name, namespace_id: retriever.namespace_id };
}
