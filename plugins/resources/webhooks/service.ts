/**
 * Webhook rules: the URL passes url-policy.ts, the secret is a Standard Webhooks secret, event types come
 * from the documented list (the schema's enum), and every change is seen at once by this process's
 * fan-out (the directory forgets the organization).
 */
import type { components } from '../../../generated/openapi.js';
import type { Clock } from '../../../kernel/clock.js';
import { InputError, NotFoundError } from '../../../kernel/errors.js';
import { newId } from '../../../kernel/ids.js';
import { ROTATION_OVERLAP_MS } from './delivery.js';
import type { WebhookDirectory } from './directory.js';
import { TEST_EVENT_TYPE } from './event-types.js';
import type { EventFanout } from './fanout.js';
import { generateSecret, secretKey } from './secrets.js';
import { UNREADABLE_SECRET, type DeliveryRow, type Page, type WebhookChanges, type WebhookRow, type WebhookStore } from './store.js';
import { checkWebhookUrl } from './url-policy.js';

type Schemas = components['schemas'];

const DEFAULT_SLOW_QUERY_MS = 1000;
const DEFAULT_LOW_HIT_RATE = 0.5;

export class WebhookService {
  constructor(
    private readonly store: WebhookStore,
    private readonly directory: WebhookDirectory,
    private readonly fanout: EventFanout,
    private readonly clock: Clock,
    private readonly allowPrivateUrls: boolean,
  ) {}

  async get(organizationId: string, webhookId: string): Promise<WebhookRow> {
    const row = await this.store.find(organizationId, webhookId);
    if (!row) throw new NotFoundError(`Webhook '${webhookId}' not found`, { webhook_id: webhookId });
    return row;
  }

  list(organizationId: string, limit: number, cursor: string | undefined): Promise<Page<WebhookRow>> {
    return this.store.list(organizationId, limit, cursor);
  }

  async create(organizationId: string, createdBy: string | null, input: Schemas['WebhookCreateRequest']): Promise<WebhookRow> {
    const url = checkWebhookUrl(input.url, this.allowPrivateUrls);
    secretKey(input.secret);
    const now = this.clock.now();
    const row = await this.store.insert({
      webhook_id: newId('whk'),
      organization_id: organizationId,
      url,
      description: input.description ?? null,
      event_types: [...new Set(input.event_types)],
      enabled: input.enabled ?? true,
      secret: input.secret,
      previous_secret: null,
      previous_secret_until: null,
      slow_query_threshold_ms: input.slow_query_threshold_ms ?? DEFAULT_SLOW_QUERY_MS,
      low_hit_rate_threshold: input.low_hit_rate_threshold ?? DEFAULT_LOW_HIT_RATE,
      created_by: createdBy,
      created_at: now,
      updated_at: now,
    });
    this.directory.forget(organizationId);
    return row;
  }

  async update(organizationId: string, webhookId: string, input: Schemas['WebhookUpdateRequest']): Promise<WebhookRow> {
    if (Object.keys(input).length === 0) throw new InputError('Nothing to change: give at least one of url, event_types, description, enabled, slow_query_threshold_ms, low_hit_rate_threshold');
    const changes: WebhookChanges = {};
    if (input.url !== undefined) changes.url = checkWebhookUrl(input.url, this.allowPrivateUrls);
    if (input.event_types !== undefined) changes.event_types = [...new Set(input.event_types)];
    if (input.description !== undefined) changes.description = input.description;
    if (input.enabled !== undefined) changes.enabled = input.enabled;
    if (input.slow_query_threshold_ms !== undefined) changes.slow_query_threshold_ms = input.slow_query_threshold_ms;
    if (input.low_hit_rate_threshold !== undefined) changes.low_hit_rate_threshold = input.low_hit_rate_threshold;
    return this.change(organizationId, webhookId, changes);
  }

  /** The new secret (given or generated) signs from now on; the old one signs beside it for ROTATION_OVERLAP_MS. */
  async rotateSecret(organizationId: string, webhookId: string, secret: string | undefined): Promise<{ row: WebhookRow; secret: string }> {
    if (secret !== undefined) secretKey(secret);
    const current = await this.get(organizationId, webhookId);
    const next = secret ?? generateSecret();
    const row = await this.change(organizationId, webhookId, {
      secret: next,
      previous_secret: current.secret === UNREADABLE_SECRET ? null : current.secret,
      previous_secret_until: new Date(this.clock.now().getTime() + ROTATION_OVERLAP_MS),
    });
    return { row, secret: next };
  }

  async delete(organizationId: string, webhookId: string): Promise<void> {
    if (!(await this.store.delete(organizationId, webhookId))) throw new NotFoundError(`Webhook '${webhookId}' not found`, { webhook_id: webhookId });
    this.directory.forget(organizationId);
  }

  /** Queues a `webhook.test` delivery to this one webhook. */
  async sendTest(organizationId: string, webhookId: string, requestedBy: string | null): Promise<DeliveryRow> {
    const webhook = await this.get(organizationId, webhookId);
    const event = {
      id: newId('evt'),
      type: TEST_EVENT_TYPE,
      organization_id: organizationId,
      occurred_at: this.clock.now().toISOString(),
      data: { webhook_id: webhook.webhook_id, url: webhook.url, requested_by: requestedBy, message: 'A test event from Tessera: this endpoint receives webhooks.' },
    };
    const delivery = await this.fanout.deliver(webhook, event);
    return delivery!;
  }

  private async change(organizationId: string, webhookId: string, changes: WebhookChanges): Promise<WebhookRow> {
    const row = await this.store.update(organizationId, webhookId, changes, this.clock.now());
    if (!row) throw new NotFoundError(`Webhook '${webhookId}' not found`, { webhook_id: webhookId });
    this.directory.forget(organizationId);
    return row;
  }
}
