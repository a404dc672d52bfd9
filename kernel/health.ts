/** Health checks of backing components. Each part registers its own; GET /v1/health runs them all. */
export interface ComponentReport {
  status: 'up' | 'down';
  required: boolean;
  latency_ms: number | null;
  kind?: string;
  error?: string;
}

export interface HealthCheck {
  name: string;
  kind: string;
  required: boolean;
  /** Resolves when the component answers; throws when it does not. */
  probe(): Promise<void>;
}

export interface HealthReport {
  status: 'ok' | 'degraded' | 'down';
  components: Record<string, ComponentReport>;
}

const PROBE_TIMEOUT_MS = 2_000;

export class HealthRegistry {
  private readonly checks: HealthCheck[] = [];

  register(check: HealthCheck): void {
    this.checks.push(check);
  }

  async report(): Promise<HealthReport> {
    const components: Record<string, ComponentReport> = {};
    await Promise.all(
      this.checks.map(async (check) => {
        const started = performance.now();
        let timer: NodeJS.Timeout | undefined;
        try {
          await Promise.race([
            check.probe(),
            new Promise((_, reject) => {
              timer = setTimeout(() => reject(new Error(`no answer within ${PROBE_TIMEOUT_MS} ms`)), PROBE_TIMEOUT_MS);
            }),
          ]);
          components[check.name] = {
            status: 'up',
            required: check.required,
            kind: check.kind,
            latency_ms: Math.round((performance.now() - started) * 100) / 100,
          };
        } catch (err) {
          components[check.name] = {
            status: 'down',
            required: check.required,
            kind: check.kind,
            latency_ms: null,
            error: err instanceof Error ? err.message : String(err),
          };
        } finally {
          clearTimeout(timer);
        }
      }),
    );
    const down = Object.values(components).filter((c) => c.status === 'down');
    const status = down.some((c) => c.required) ? 'down' : down.length > 0 ? 'degraded' : 'ok';
    return { status, components };
  }
}
