/**
 * The events a webhook may subscribe to: the domain events other plugins publish on the bus, plus the
 * retriever alerts. The OpenAPI enum `WebhookEventType` lists the same names (a test checks they agree).
 */
import type { components } from '../../../generated/openapi.js';

export type WebhookEventType = components['schemas']['WebhookEventType'];

export const WEBHOOK_EVENT_TYPES: readonly WebhookEventType[] = [
  'api_key.created', 'api_key.updated', 'api_key.rotated', 'api_key.revoked',
  'user.created', 'user.deleted',
  'namespace.created', 'namespace.updated', 'namespace.deleted',
  'bucket.created', 'bucket.updated', 'bucket.deleted',
  'object.created', 'object.updated', 'object.deleted',
  'upload.completed',
  'collection.created', 'collection.updated', 'collection.deleted',
  'batch.completed', 'batch.failed', 'batch.canceled',
  'extractor.failure',
  'retriever.slow_query',
  'cache.low_hit_rate',
];

/** Sent only by POST .../test, to one webhook, whatever it subscribes to. */
export const TEST_EVENT_TYPE = 'webhook.test';

const subscribable = new Set<string>(WEBHOOK_EVENT_TYPES);

export function isWebhookEventType(type: string): type is WebhookEventType {
  return subscribable.has(type);
}
