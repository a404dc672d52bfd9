/** GET /v1/organizations/audit-log: who changed which key, user or namespace, newest first. */
import type { components } from '../../../generated/openapi.js';
import type { AuditRow } from '../../../kernel/auth/audit-log.js';
import { parseTimestamp } from '../../../kernel/dates.js';
import { cursorFields, decodeCursor, encodeCursor } from '../../../kernel/http/cursor.js';
import { callerOf } from '../../../kernel/http/handlers.js';
import { iso } from '../../../kernel/http/values.js';
import { defineResource } from '../../../kernel/plugins.js';
import { AuditLog } from '../../../kernel/tokens.js';

function toEvent(row: AuditRow): components['schemas']['AuditEvent'] {
  return {
    event_id: row.event_id,
    action: row.action,
    actor: { key_id: row.actor_key_id, user_email: row.actor_email },
    resource_type: row.resource_type,
    resource_id: row.resource_id,
    resource_name: row.resource_name,
    changes: row.changes,
    request_id: row.request_id,
    created_at: iso(row.created_at),
  };
}

export default defineResource({
  name: 'audit-log',
  handlers: {
    listAuditEvents: async ({ query, ctx, services }) => {
      const { rows, hasNext } = await services.get(AuditLog).list({
        organizationId: callerOf(ctx).organizationId,
        limit: query.limit ?? 100,
        ...(query.action ? { action: query.action } : {}),
        ...(query.resource_id ? { resourceId: query.resource_id } : {}),
        ...(query.start ? { start: parseTimestamp(query.start, ['query', 'start']) } : {}),
        ...(query.end ? { end: parseTimestamp(query.end, ['query', 'end']) } : {}),
        ...(query.cursor ? { beforeSeq: decodeCursor(query.cursor, { seq: cursorFields.integer(1) }).seq } : {}),
      });
      const last = rows.at(-1);
      return {
        status: 200,
        body: { results: rows.map(toEvent), has_next: hasNext, next_cursor: hasNext && last ? encodeCursor({ seq: Number(last.seq) }) : null },
      };
    },
  },
});
