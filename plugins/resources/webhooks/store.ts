/**
 * The webhooks and webhook_deliveries tables. Every statement names the organization: a webhook of another
 * organization is not found, whatever its id.
 */
import type { Knex } from 'knex';
import { cursorFields, decodeCursor, encodeCursor } from '../../../kernel/http/cursor.js';
import type { SecretBox } from '../../../kernel/secret-box.js';
import type { WebhookEventType } from './event-types.js';

export interface WebhookRow {
  webhook_id: string;
  organization_id: string;
  url: string;
  description: string | null;
  event_types: WebhookEventType[];
  enabled: boolean;
  secret: string;
  previous_secret: string | null;
  previous_secret_until: Date | null;
  slow_query_threshold_ms: number;
  low_hit_rate_threshold: number;
  created_by: string | null;
  created_at: Date;
  updated_at: Date;
}

/** A stored secret this deployment's signing secret cannot open. */
export const UNREADABLE_SECRET = '';

export type DeliveryStatus = 'pending' | 'succeeded' | 'failed' | 'canceled';

export interface DeliveryRow {
  delivery_id: string;
  organization_id: string;
  webhook_id: string;
  event_id: string;
  event_type: string;
  payload: string;
  status: DeliveryStatus;
  attempts: number;
  max_attempts: number;
  response_status: number | null;
  response_body: string | null;
  error: string | null;
  duration_ms: number | null;
  created_at: Date;
  last_attempt_at: Date | null;
  next_attempt_at: Date | null;
}

export type WebhookChanges = Partial<Pick<WebhookRow,
  'url' | 'description' | 'event_types' | 'enabled' | 'secret' | 'previous_secret' | 'previous_secret_until' | 'slow_query_threshold_ms' | 'low_hit_rate_threshold'>>;

export interface Page<T> {
  rows: T[];
  nextCursor: string | null;
}

const WEBHOOK_CURSOR = { created_at: cursorFields.timestamp(), webhook_id: cursorFields.id('whk') };
const DELIVERY_CURSOR = { created_at: cursorFields.timestamp(), delivery_id: cursorFields.id('whd') };

export class WebhookStore {
  /** `secrets` seals the signing secrets at rest (kernel/secret-box.ts): HMAC needs them back, so they cannot be hashed. */
  constructor(
    private readonly db: Knex,
    private readonly secrets: SecretBox,
  ) {}

  /**
   * Rows as the driver returns them (jsonb parsed, doubles possibly as text), secrets opened. A secret sealed
   * under another signing secret (TESSERA_SIGNING_SECRET changed) opens as UNREADABLE_SECRET: the webhook still
   * lists, its deliveries fail saying so, and rotating its secret mends it.
   */
  private webhookOf = (row: WebhookRow): WebhookRow => ({
    ...row,
    secret: this.openOrUnreadable(row.secret),
    previous_secret: row.previous_secret === null ? null : this.openOrUnreadable(row.previous_secret) || null,
    low_hit_rate_threshold: Number(row.low_hit_rate_threshold),
    slow_query_threshold_ms: Number(row.slow_query_threshold_ms),
  });

  private openOrUnreadable(sealed: string): string {
    try {
      return this.secrets.open(sealed);
    } catch {
      return UNREADABLE_SECRET;
    }
  }

  private sealed<T extends Partial<Pick<WebhookRow, 'secret' | 'previous_secret'>>>(values: T): T {
    const out = { ...values };
    if (typeof out.secret === 'string') out.secret = this.secrets.seal(out.secret);
    if (typeof out.previous_secret === 'string') out.previous_secret = this.secrets.seal(out.previous_secret);
    return out;
  }

  async insert(row: WebhookRow): Promise<WebhookRow> {
    const [created] = (await this.db('webhooks').insert({ ...this.sealed(row), event_types: JSON.stringify(row.event_types) }).returning('*')) as WebhookRow[];
    return this.webhookOf(created!);
  }

  async find(organizationId: string, webhookId: string): Promise<WebhookRow | undefined> {
    const row = (await this.db('webhooks').where({ organization_id: organizationId, webhook_id: webhookId }).first()) as WebhookRow | undefined;
    return row && this.webhookOf(row);
  }

  async list(organizationId: string, limit: number, cursor?: string): Promise<Page<WebhookRow>> {
    const q = this.db('webhooks').where({ organization_id: organizationId });
    if (cursor) {
      const at = decodeCursor(cursor, WEBHOOK_CURSOR);
      q.whereRaw('(created_at, webhook_id) > (?, ?)', [new Date(at.created_at), at.webhook_id]);
    }
    const rows = ((await q.orderBy([{ column: 'created_at', order: 'asc' }, { column: 'webhook_id', order: 'asc' }]).limit(limit + 1)) as WebhookRow[]).map(this.webhookOf);
    const page = rows.slice(0, limit);
    const last = page.at(-1);
    return {
      rows: page,
      nextCursor: rows.length > limit && last ? encodeCursor({ created_at: last.created_at.toISOString(), webhook_id: last.webhook_id }) : null,
    };
  }

  /** Enabled webhooks of the organization: what events fan out to. */
  async enabled(organizationId: string): Promise<WebhookRow[]> {
    return ((await this.db('webhooks').where({ organization_id: organizationId, enabled: true })) as WebhookRow[]).map(this.webhookOf);
  }

  async update(organizationId: string, webhookId: string, changes: WebhookChanges, now: Date): Promise<WebhookRow | undefined> {
    const values: Record<string, unknown> = { ...this.sealed(changes), updated_at: now };
    if (changes.event_types) values.event_types = JSON.stringify(changes.event_types);
    const [row] = (await this.db('webhooks').where({ organization_id: organizationId, webhook_id: webhookId }).update(values).returning('*')) as WebhookRow[];
    return row && this.webhookOf(row);
  }

  async delete(organizationId: string, webhookId: string): Promise<boolean> {
    const rows = (await this.db('webhooks').where({ organization_id: organizationId, webhook_id: webhookId }).delete().returning('webhook_id')) as unknown[];
    return rows.length > 0;
  }

  /** True when nobody claimed `key` within the window: the claim is taken in the same statement (race-free). */
  async claimAlert(organizationId: string, key: string, now: Date, windowMs: number): Promise<boolean> {
    const result = (await this.db.raw(
      `insert into webhook_alert_marks (organization_id, alert_key, fired_at) values (?, ?, ?)
       on conflict (organization_id, alert_key) do update set fired_at = excluded.fired_at
       where webhook_alert_marks.fired_at <= ?
       returning alert_key`,
      [organizationId, key, now, new Date(now.getTime() - windowMs)],
    )) as { rows: unknown[] };
    return result.rows.length > 0;
  }
}

export class DeliveryStore {
  constructor(private readonly db: Knex) {}

  /** The new delivery, or undefined when this event already has one for this webhook. */
  async insert(row: DeliveryRow, trx: Knex = this.db): Promise<DeliveryRow | undefined> {
    const insert = trx('webhook_deliveries').insert(row).toSQL();
    const result = (await trx.raw(`${insert.sql} on conflict (webhook_id, event_id) do nothing returning *`, insert.bindings)) as { rows: DeliveryRow[] };
    return result.rows[0];
  }

  async find(organizationId: string, deliveryId: string): Promise<DeliveryRow | undefined> {
    return (await this.db('webhook_deliveries').where({ organization_id: organizationId, delivery_id: deliveryId }).first()) as DeliveryRow | undefined;
  }

  async list(organizationId: string, webhookId: string, limit: number, options: { cursor?: string; status?: DeliveryStatus }): Promise<Page<DeliveryRow>> {
    const q = this.db('webhook_deliveries').where({ organization_id: organizationId, webhook_id: webhookId });
    if (options.status) q.where({ status: options.status });
    if (options.cursor) {
      const at = decodeCursor(options.cursor, DELIVERY_CURSOR);
      q.whereRaw('(created_at, delivery_id) < (?, ?)', [new Date(at.created_at), at.delivery_id]);
    }
    const rows = (await q.orderBy([{ column: 'created_at', order: 'desc' }, { column: 'delivery_id', order: 'desc' }]).limit(limit + 1)) as DeliveryRow[];
    const page = rows.slice(0, limit);
    const last = page.at(-1);
    return {
      rows: page,
      nextCursor: rows.length > limit && last ? encodeCursor({ created_at: last.created_at.toISOString(), delivery_id: last.delivery_id }) : null,
    };
  }

  async update(organizationId: string, deliveryId: string, changes: Partial<DeliveryRow>, trx: Knex = this.db): Promise<void> {
    await trx('webhook_deliveries').where({ organization_id: organizationId, delivery_id: deliveryId }).update(changes);
  }

  /** Deletes deliveries created before `before` (the retention sweep); how many went. */
  async deleteOlderThan(before: Date): Promise<number> {
    const rows = (await this.db('webhook_deliveries').where('created_at', '<', before).delete().returning('delivery_id')) as unknown[];
    return rows.length;
  }
}
