/**
 * GET /v1/health (every backing component, 503 when a required one is down) and GET /v1/openapi.json.
 *
 * Health is public (load balancers call it without a key), so a caller without the operator's key sees each
 * component's state only: process ids, memory, worker addresses and hosts, and error texts (which may name
 * internal addresses) are for an admin key of the deployment's first organization.
 */
import type { Request } from 'express';
import type { ComponentReport as ComponentHealth, HealthReport } from '../../../kernel/health.js';
import { defineResource } from '../../../kernel/plugins.js';
import { ApiDocument, Authenticator, HealthRegistry, TenantStore } from '../../../kernel/tokens.js';
import type { Services } from '../../../kernel/tokens.js';

/**
 * True when the request carries an active admin key of the first organization. Anything else, a refused key
 * included, is a public caller: health is never refused. A refused key still counts against its address's
 * limit on failed keys (the authenticator's), so this answer is no unlimited way to try keys.
 */
async function isOperator(req: Request, services: Services): Promise<boolean> {
  const authorization = req.get('authorization');
  if (!authorization) return false;
  const auth = await services
    .get(Authenticator)
    .authenticate(authorization, { origin: undefined, socketAddress: req.socket.remoteAddress, forwardedFor: req.get('x-forwarded-for') })
    .catch(() => null);
  if (!auth?.permissions.includes('admin')) return false;
  return auth.organizationId === (await services.get(TenantStore).firstOrganizationId());
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
      // The database may be what is down: then the caller gets the public view, never an error.
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
