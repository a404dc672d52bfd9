/**
 * The audit log: who did what to which resource, and what changed. Written in the same transaction as
 * the change it records, so the log and the data never disagree.
 */
import type { Knex } from 'knex';
import { newId } from '../ids.js';
import type { Clock } from '../clock.js';

export type AuditAction =
  | 'api_key_created' | 'api_key_rotated' | 'api_key_revoked' | 'api_key_scope_updated' | 'api_key_updated'
  | 'user_created' | 'user_deleted' | 'namespace_created' | 'namespace_updated' | 'namespace_deleted';

export interface AuditActor {
  keyId: string | null;
  userEmail: string | null;
  requestId?: string | null;
}

export interface AuditEntry {
  organizationId: string;
  action: AuditAction;
  actor: AuditActor;
  resourceType: string;
  resourceId: string;
  resourceName?: string | null;
  /** For each changed field, `{from, to}`; for creations, the initial settings. */
  changes: Record<string, unknown>;
}

export interface AuditRow {
  seq: number;
  event_id: string;
  organization_id: string;
  action: AuditAction;
  actor_key_id: string | null;
  actor_email: string | null;
  resource_type: string;
  resource_id: string;
  resource_name: string | null;
  changes: Record<string, unknown>;
  request_id: string | null;
  created_at: Date;
}

export interface AuditQuery {
  organizationId: string;
  action?: AuditAction;
  resourceId?: string;
  start?: Date;
  end?: Date;
  limit: number;
  /** Return events older than this sequence number. */
  beforeSeq?: number;
}

export class AuditLog {
  constructor(
    private readonly db: Knex,
    private readonly clock: Clock,
  ) {}

  async record(db: Knex, entry: AuditEntry): Promise<void> {
    await db('audit_log').insert({
      event_id: newId('aud'),
      organization_id: entry.organizationId,
      action: entry.action,
      actor_key_id: entry.actor.keyId,
      actor_email: entry.actor.userEmail,
      resource_type: entry.resourceType,
      resource_id: entry.resourceId,
      resource_name: entry.resourceName ?? null,
      changes: JSON.stringify(entry.changes),
      request_id: entry.actor.requestId ?? null,
      created_at: this.clock.now(),
    });
  }

  /** Newest first; fetches one extra row to tell whether another page exists. */
  async list(query: AuditQuery): Promise<{ rows: AuditRow[]; hasNext: boolean }> {
    const q = this.db<AuditRow>('audit_log')
      .where({ organization_id: query.organizationId })
      .orderBy('seq', 'desc')
      .limit(query.limit + 1);
    if (query.action) q.where({ action: query.action });
    if (query.resourceId) q.where({ resource_id: query.resourceId });
    if (query.start) q.where('created_at', '>=', query.start);
    if (query.end) q.where('created_at', '<', query.end);
    if (query.beforeSeq !== undefined) q.where('seq', '<', query.beforeSeq);
    const rows = await q;
    return { rows: rows.slice(0, query.limit), hasNext: rows.length > query.limit };
  }
}

/** `{field: {from, to}}` for every field whose JSON value differs. */
export function diffFields(
  before: Record<string, unknown>,
  after: Record<string, unknown>,
  fields: readonly string[],
): Record<string, { from: unknown; to: unknown }> {
  const changes: Record<string, { from: unknown; to: unknown }> = {};
  for (const field of fields) {
    const from = normalize(before[field]);
    const to = normalize(after[field]);
    if (JSON.stringify(from) !== JSON.stringify(to)) changes[field] = { from, to };
  }
  return changes;
}

function normalize(value: unknown): unknown {
  if (value instanceof Date) return value.toISOString();
  return value ?? null;
}
