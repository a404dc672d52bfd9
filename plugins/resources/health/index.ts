/** GET /v1/health (every backing component, 503 when a required one is down) and GET /v1/openapi.json. */
import { defineResource } from '../../../kernel/plugins.js';
import { ApiDocument, HealthRegistry } from '../../../kernel/tokens.js';

export default defineResource({
  name: 'health',
  handlers: {
    getHealth: async ({ services }) => {
      const report = await services.get(HealthRegistry).report();
      const info = services.get(ApiDocument).info as { version?: string } | undefined;
      const body = {
        status: report.status,
        version: info?.version ?? 'unknown',
        uptime_seconds: Math.round(process.uptime()),
        components: report.components,
        memory: report.memory,
      };
      return report.status === 'down' ? { status: 503, body } : { status: 200, body };
    },
    getOpenApiDocument: async ({ services }) => ({ status: 200, body: services.get(ApiDocument) }),
  },
});
