/**
 * Usage endpoints: per key, per endpoint, per organization. All read the request log the HTTP layer
 * writes; pending rows are flushed first so a figure always includes every finished request.
 */
import { InputError, NotFoundError } from '../../../kernel/errors.js';
import { parseTimestamp } from '../../../kernel/dates.js';
import type { KeyRecord } from '../../../kernel/auth/key-store.js';
import { callerOf } from '../../../kernel/http/handlers.js';
import { iso, isoOrNull } from '../../../kernel/http/values.js';
import { defineResource } from '../../../kernel/plugins.js';
import { Clock, DatabaseHandle, KeyStore, RequestLog, createToken, type Services } from '../../../kernel/tokens.js';
import { UsageQueries, type Totals, type Window } from './queries.js';

const Usage = createToken<UsageQueries>('usage.UsageQueries');
const DAY_MS = 24 * 3600 * 1000;
const DEFAULT_WINDOW_MS = 7 * DAY_MS;
/** Figures are aggregated over every request-log row in the window: bound the work one request can ask for. */
const MAX_WINDOW_DAYS = 366;

function windowOf(services: Services, query: { start?: string; end?: string }): Window {
  const end = query.end ? parseTimestamp(query.end, ['query', 'end']) : services.get(Clock).now();
  const start = query.start ? parseTimestamp(query.start, ['query', 'start']) : new Date(end.getTime() - DEFAULT_WINDOW_MS);
  if (start.getTime() >= end.getTime()) throw new InputError('start must be before end', { start: iso(start), end: iso(end) });
  if (end.getTime() - start.getTime() > MAX_WINDOW_DAYS * DAY_MS) {
    throw new InputError(`a usage window spans at most ${MAX_WINDOW_DAYS} days: ask for a shorter one, or several`, {
      start: iso(start),
      end: iso(end),
      max_days: MAX_WINDOW_DAYS,
    });
  }
  return { start, end };
}

async function keyOf(services: Services, organizationId: string, keyId: string): Promise<KeyRecord> {
  const key = await services.get(KeyStore).findById(organizationId, keyId);
  if (!key) throw new NotFoundError(`API key '${keyId}' not found`, { key_id: keyId });
  return key;
}

async function prepare(services: Services): Promise<UsageQueries> {
  await services.get(RequestLog).flush();
  return services.get(Usage);
}

const round = (n: number) => Math.round(Number(n) * 1000) / 1000;

function daily(rows: Array<Totals & { date: string }>) {
  return rows.map((r) => ({ date: r.date, requests: Number(r.requests), credits: Number(r.credits), errors: Number(r.errors) }));
}

export default defineResource({
  name: 'usage',
  services: (container, services) => {
    container.bind(Usage).toConstantValue(new UsageQueries(services.get(DatabaseHandle).db));
  },
  handlers: {
    getApiKeyUsage: async ({ params, query, ctx, services }) => {
      const org = callerOf(ctx).organizationId;
      const window = windowOf(services, query);
      await keyOf(services, org, params.key_id);
      const t = await (await prepare(services)).totals(org, window, params.key_id);
      return {
        status: 200,
        body: {
          key_id: params.key_id,
          start: iso(window.start),
          end: iso(window.end),
          total_requests: Number(t.requests),
          total_credits: Number(t.credits),
          unique_endpoints: Number(t.endpoints),
          avg_latency_ms: round(t.avg_latency_ms),
          p95_latency_ms: round(t.p95_latency_ms),
          error_count: Number(t.errors),
        },
      };
    },

    getApiKeyEndpointUsage: async ({ params, query, ctx, services }) => {
      const org = callerOf(ctx).organizationId;
      const window = windowOf(services, query);
      await keyOf(services, org, params.key_id);
      const rows = await (await prepare(services)).byEndpoint(org, window, params.key_id);
      return {
        status: 200,
        body: {
          key_id: params.key_id,
          start: iso(window.start),
          end: iso(window.end),
          endpoints: rows.map((r) => ({
            operation_id: r.operation_id ?? 'unknown',
            method: r.method,
            path: r.path,
            requests: Number(r.requests),
            errors: Number(r.errors),
            credits: Number(r.credits),
            avg_latency_ms: round(r.avg_latency_ms),
            p95_latency_ms: round(r.p95_latency_ms),
          })),
        },
      };
    },

    getOrganizationUsage: async ({ query, ctx, services }) => {
      const org = callerOf(ctx).organizationId;
      const window = windowOf(services, query);
      const usage = await prepare(services);
      const [t, keys, days] = [await usage.totals(org, window), await usage.byKey(org, window), await usage.byDay(org, window)];
      return {
        status: 200,
        body: {
          organization_id: org,
          start: iso(window.start),
          end: iso(window.end),
          total_requests: Number(t.requests),
          total_credits: Number(t.credits),
          error_count: Number(t.errors),
          avg_latency_ms: round(t.avg_latency_ms),
          p95_latency_ms: round(t.p95_latency_ms),
          by_key: keys.map((k) => ({
            key_id: k.key_id,
            key_name: k.key_name,
            requests: Number(k.requests),
            credits: Number(k.credits),
            errors: Number(k.errors),
          })),
          by_day: daily(days),
        },
      };
    },

    getOrganizationKeyUsage: async ({ params, query, ctx, services }) => {
      const org = callerOf(ctx).organizationId;
      const window = windowOf(services, query);
      const key = await keyOf(services, org, params.key_id);
      const usage = await prepare(services);
      await services.get(KeyStore).flushLastUsed();
      const refreshed = (await keyOf(services, org, params.key_id)).last_used_at;
      const [t, days, classes] = [
        await usage.totals(org, window, key.key_id),
        await usage.byDay(org, window, key.key_id),
        await usage.byStatusClass(org, window, key.key_id),
      ];
      return {
        status: 200,
        body: {
          key_id: key.key_id,
          key_name: key.name,
          user_email: key.user_email,
          start: iso(window.start),
          end: iso(window.end),
          total_requests: Number(t.requests),
          total_credits: Number(t.credits),
          last_used_at: isoOrNull(refreshed),
          by_day: daily(days),
          by_status_class: classes,
        },
      };
    },
  },
});
