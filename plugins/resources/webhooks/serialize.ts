import type { components } from '../../../generated/openapi.js';
import { iso, isoOrNull } from '../../../kernel/http/values.js';
import { secretHint } from './secrets.js';
import type { DeliveryRow, WebhookRow } from './store.js';

type Schemas = components['schemas'];

export function toWebhook(row: WebhookRow): Schemas['Webhook'] {
  return {
    webhook_id: row.webhook_id,
    url: row.url,
    description: row.description,
    event_types: row.event_types,
    enabled: row.enabled,
    secret_hint: secretHint(row.secret),
    slow_query_threshold_ms: row.slow_query_threshold_ms,
    low_hit_rate_threshold: row.low_hit_rate_threshold,
    created_at: iso(row.created_at),
    updated_at: iso(row.updated_at),
    created_by: row.created_by,
  };
}

export function toDelivery(row: DeliveryRow): Schemas['WebhookDelivery'] {
  return {
    delivery_id: row.delivery_id,
    webhook_id: row.webhook_id,
    event_id: row.event_id,
    event_type: row.event_type,
    status: row.status,
    attempts: Number(row.attempts),
    max_attempts: Number(row.max_attempts),
    response_status: row.response_status,
    response_body: row.response_body,
    error: row.error,
    duration_ms: row.duration_ms,
    payload: JSON.parse(row.payload) as Schemas['WebhookEventPayload'],
    created_at: iso(row.created_at),
    last_attempt_at: isoOrNull(row.last_attempt_at),
    next_attempt_at: isoOrNull(row.next_attempt_at),
  };
}
