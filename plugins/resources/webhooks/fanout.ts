/**
 * From events to deliveries: one delivery (and its first task, in the same transaction) per enabled webhook
 * of the event's organization that subscribes to its type and whose thresholds it passes. Every process
 * (and thread) that hears an event may run this; the unique (webhook, event) pair keeps it to one delivery.
 */
import type { Knex } from 'knex';
import type { Clock } from '../../../kernel/clock.js';
import type { TesseraEvent } from '../../../kernel/events/event-bus.js';
import { newId } from '../../../kernel/ids.js';
import { MAX_DELIVERY_ATTEMPTS, type DeliveryRunner } from './delivery.js';
import type { WebhookDirectory } from './directory.js';
import { isWebhookEventType } from './event-types.js';
import type { DeliveryRow, DeliveryStore, WebhookRow } from './store.js';

export class EventFanout {
  constructor(
    private readonly db: Knex,
    private readonly directory: WebhookDirectory,
    private readonly deliveries: DeliveryStore,
    private readonly runner: DeliveryRunner,
    private readonly clock: Clock,
  ) {}

  async handle(event: TesseraEvent): Promise<number> {
    if (!isWebhookEventType(event.type)) return 0;
    const type = event.type;
    const targets = (await this.directory.enabled(event.organization_id)).filter((w) => w.event_types.includes(type) && passesThresholds(w, event));
    let created = 0;
    for (const webhook of targets) if (await this.deliver(webhook, event)) created += 1;
    return created;
  }

  /** Creates the delivery of `event` to `webhook` and queues its first attempt; undefined when it exists already. */
  async deliver(webhook: Pick<WebhookRow, 'webhook_id' | 'organization_id'>, event: TesseraEvent): Promise<DeliveryRow | undefined> {
    const row: DeliveryRow = {
      delivery_id: newId('whd'),
      organization_id: webhook.organization_id,
      webhook_id: webhook.webhook_id,
      event_id: event.id,
      event_type: event.type,
      payload: JSON.stringify({ id: event.id, type: event.type, timestamp: event.occurred_at, organization_id: event.organization_id, data: event.data }),
      status: 'pending',
      attempts: 0,
      max_attempts: MAX_DELIVERY_ATTEMPTS,
      response_status: null,
      response_body: null,
      error: null,
      duration_ms: null,
      created_at: this.clock.now(),
      last_attempt_at: null,
      next_attempt_at: null,
    };
    return this.db.transaction(async (trx) => {
      const inserted = await this.deliveries.insert(row, trx);
      if (inserted) await this.runner.schedule(inserted, 1, 0, trx);
      return inserted;
    });
  }
}

/** A webhook's own thresholds on the alert events (the event is published for the loosest of them). */
function passesThresholds(webhook: WebhookRow, event: TesseraEvent): boolean {
  if (event.type === 'retriever.slow_query') return Number(event.data.duration_ms) >= webhook.slow_query_threshold_ms;
  if (event.type === 'cache.low_hit_rate') return Number(event.data.hit_rate) < webhook.low_hit_rate_threshold;
  return true;
}
