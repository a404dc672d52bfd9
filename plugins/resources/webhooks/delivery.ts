/**
 * Deliveries run as tasks, one task per attempt, so a crash loses nothing: the delivery row and its first
 * task are written in one transaction, and each attempt records its outcome and queues the next attempt in
 * another. A task whose attempt was already made (a redelivered task) finds the row moved on and stops.
 * Retries: network errors, timeouts, 408, 429 and 5xx, `retryBaseMs` × 10^(n-1) after attempt n (10 s,
 * 100 s, ~17 min, ~2.8 h by default; a longer `Retry-After` wins, up to an hour), 5 attempts in all.
 * Other answers (4xx, redirects) are final. Receivers drop duplicates by `webhook-id` (at-least-once).
 */
import type { Knex } from 'knex';
import type { Logger } from 'pino';
import type { Clock } from '../../../kernel/clock.js';
import type { TaskQueue } from '../../../kernel/tasks/task-queue.js';
import { TEST_EVENT_TYPE } from './event-types.js';
import { signatureHeader } from './secrets.js';
import { sendWebhook, type SendResult } from './sender.js';
import { UNREADABLE_SECRET, type DeliveryRow, type DeliveryStatus, type DeliveryStore, type WebhookRow, type WebhookStore } from './store.js';

export const DELIVERY_TASK = 'webhooks.deliver';
export const MAX_DELIVERY_ATTEMPTS = 5;
/** The longest a `Retry-After` may push a retry out. */
const MAX_RETRY_AFTER_MS = 3_600_000;
/** A task that fails for its own reasons (the database) is retried by the queue this often; HTTP failures are not task failures. */
const TASK_ATTEMPTS = 3;
/** How long after a rotation the old secret still signs beside the new one. */
export const ROTATION_OVERLAP_MS = 24 * 3_600_000;

export interface DeliveryTaskPayload extends Record<string, unknown> {
  organization_id: string;
  delivery_id: string;
  /** The attempt this task makes (1 for the first). */
  attempt: number;
}

export interface DeliveryOptions {
  timeoutMs: number;
  retryBaseMs: number;
  allowPrivate: boolean;
}

/** The delay before the retry that follows attempt `attemptsMade` (1-based). */
export function retryDelayMs(baseMs: number, attemptsMade: number): number {
  return baseMs * 10 ** Math.max(0, attemptsMade - 1);
}

/** Answers a later attempt may get past: the receiver is overloaded, down or slow. */
export function isRetryableStatus(status: number): boolean {
  return status >= 500 || status === 429 || status === 408;
}

export class DeliveryRunner {
  constructor(
    private readonly db: Knex,
    private readonly webhooks: WebhookStore,
    private readonly deliveries: DeliveryStore,
    private readonly tasks: TaskQueue,
    private readonly clock: Clock,
    private readonly log: Logger,
    private readonly options: DeliveryOptions,
  ) {}

  register(): void {
    this.tasks.register(DELIVERY_TASK, async ({ task }) => this.attempt(task.payload as DeliveryTaskPayload));
  }

  /** Queues an attempt of a delivery, inside `trx` when given (the task exists only if it commits). */
  async schedule(delivery: Pick<DeliveryRow, 'organization_id' | 'delivery_id'>, attempt: number, delayMs: number, trx?: Knex): Promise<void> {
    const payload: DeliveryTaskPayload = { organization_id: delivery.organization_id, delivery_id: delivery.delivery_id, attempt };
    await this.tasks.enqueue(DELIVERY_TASK, payload, {
      organizationId: delivery.organization_id,
      dedupeKey: `webhook:${delivery.delivery_id}:${attempt}`,
      maxAttempts: TASK_ATTEMPTS,
      ...(delayMs > 0 ? { delayMs } : {}),
      ...(trx ? { transaction: trx } : {}),
    });
  }

  private async attempt(payload: DeliveryTaskPayload): Promise<Record<string, unknown>> {
    const delivery = await this.deliveries.find(payload.organization_id, payload.delivery_id);
    // Gone (its webhook was deleted), finished, or this attempt was made already by an earlier run of the task.
    if (!delivery || delivery.status !== 'pending' || delivery.attempts !== payload.attempt - 1) return { skipped: true };
    const webhook = await this.webhooks.find(delivery.organization_id, delivery.webhook_id);
    if (!webhook) return { skipped: true };
    if (!webhook.enabled && delivery.event_type !== TEST_EVENT_TYPE) {
      await this.deliveries.update(delivery.organization_id, delivery.delivery_id, { status: 'canceled', next_attempt_at: null, error: 'the webhook was disabled' });
      return { canceled: true };
    }
    const now = this.clock.now();
    if (webhook.secret === UNREADABLE_SECRET) {
      return this.record(delivery, {
        status: null, body: null, durationMs: 0, retryable: false, retryAfterMs: null,
        error: `the webhook's secret cannot be opened (TESSERA_SIGNING_SECRET changed since it was set): rotate it with POST /v1/organizations/webhooks/${webhook.webhook_id}/rotate-secret`,
      }, now);
    }
    const timestamp = Math.floor(now.getTime() / 1000);
    const result = await sendWebhook({
      url: webhook.url,
      body: delivery.payload,
      timeoutMs: this.options.timeoutMs,
      allowPrivate: this.options.allowPrivate,
      headers: {
        'webhook-id': delivery.delivery_id,
        'webhook-timestamp': String(timestamp),
        'webhook-signature': signatureHeader(signingSecrets(webhook, now), delivery.delivery_id, timestamp, delivery.payload),
      },
    });
    return this.record(delivery, result, now);
  }

  private async record(delivery: DeliveryRow, result: SendResult, at: Date): Promise<Record<string, unknown>> {
    const attempts = delivery.attempts + 1;
    const succeeded = result.status !== null && result.status >= 200 && result.status < 300;
    const retry = !succeeded && result.retryable && (result.status === null || isRetryableStatus(result.status)) && attempts < delivery.max_attempts;
    const delayMs = retry ? Math.max(retryDelayMs(this.options.retryBaseMs, attempts), Math.min(result.retryAfterMs ?? 0, MAX_RETRY_AFTER_MS)) : 0;
    const status: DeliveryStatus = succeeded ? 'succeeded' : retry ? 'pending' : 'failed';
    const changes: Partial<DeliveryRow> = {
      status,
      attempts,
      response_status: result.status,
      response_body: result.body,
      error: succeeded ? null : (result.error ?? `answered HTTP ${result.status}`),
      duration_ms: result.durationMs,
      last_attempt_at: at,
      next_attempt_at: retry ? new Date(at.getTime() + delayMs) : null,
    };
    await this.db.transaction(async (trx) => {
      await this.deliveries.update(delivery.organization_id, delivery.delivery_id, changes, trx);
      if (retry) await this.schedule(delivery, attempts + 1, delayMs, trx);
    });
    if (!succeeded) this.log.info({ delivery_id: delivery.delivery_id, attempts, status: result.status, error: changes.error, retry }, 'webhook delivery attempt failed');
    return { status, attempts, response_status: result.status };
  }
}

/** The secrets that sign now: the current one, and the one before it during the rotation overlap. */
export function signingSecrets(webhook: Pick<WebhookRow, 'secret' | 'previous_secret' | 'previous_secret_until'>, now: Date): string[] {
  const previousValid = webhook.previous_secret && webhook.previous_secret_until && new Date(webhook.previous_secret_until).getTime() > now.getTime();
  return previousValid ? [webhook.secret, webhook.previous_secret!] : [webhook.secret];
}
