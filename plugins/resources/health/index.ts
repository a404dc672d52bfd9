/**
 * GET /v1/health (every backing component, 503 when a required one is down) and GET /v1/openapi.json.
 *
 * Health is public (load balancers call it without a key), so a caller without the operator's key sees each
 * component's state only: process ids, memory, worker addresses and hosts, and error texts (which may name
 * internal addresses) are for an admin key of the deployment's first organization.
 */
import type { Request } from 'express';
import { keyStatus } from '../../../kernel/auth/key-store.js';
import { isAcceptableOperatorKey } from '../../../kernel/auth/keys.js';
import type { ComponentReport as ComponentHealth, HealthReport } from '../../../kernel/health.js';
import { defineResource } from '../../../kernel/plugins.js';
import { ApiDocument, Clock, HealthRegistry, KeyStore, TenantStore } from '../../../kernel/tokens.js';
import type { Services } from '../../../kernel/tokens.js';

const BEARER = /^Bearer\s+(\S+)$/i;

/** True when the request carries an active admin key of the first organization. Anything else is a public caller. */
async function isOperator(req: Request, services: Services): Promise<boolean> {
  const secret = BEARER.exec(req.headers.authorization ?? '')?.[1];
  if (!secret || !isAcceptableOperatorKey(secret)) return false;
  const key = await services.get(KeyStore).findByPlaintext(secret);
  if (!key || keyStatus(key, services.get(Clock).now()) !== 'active' || !key.permissions.includes('admin')) return false;
  return key.organization_id === (await services.get(TenantStore).firstOrganizationId());
}

/** What a public caller sees of a component: its state, never its figures or error text. */
function publicView(component: ComponentHealth): ComponentHealth {
  const { details: _details, error: _error, ...state } = component;
  return state;
}

function publicComponents(report: HealthReport): HealthReport['components'] {
  return Object.fromEntries(Object.entries(report.components).map(([name, component]) => [name, publicView(component)]));
}

export default defineResource({
  name: 'health',
  handlers: {
    getHealth: async ({ services, req }) => {
      const [report, operator] = await Promise.all([services.get(HealthRegistry).report(), isOperator(req, services).catch(() => false)]);
      const info = services.get(ApiDocument).info as { version?: string } | undefined;
      const body = {
        status: report.status,
        version: info?.version ?? 'unknown',
        uptime_seconds: Math.round(process.uptime()),
        view: operator ? ('operator' as const) : ('public' as const),
        components: operator ? report.components : publicComponents(report),
        ...(operator ? { memory: report.memory } : {}),
      };
      return report.status === 'down' ? { status: 503, body } : { status: 200, body };
    },
    getOpenApiDocument: async ({ services }) => ({ status: 200, body: services.get(ApiDocument) }),
  },
});
