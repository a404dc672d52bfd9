/** Health checks of backing components. Each part registers its own; GET /v1/health runs them all. */
export interface ComponentReport {
  status: 'up' | 'degraded' | 'down';
  required: boolean;
  latency_ms: number | null;
  kind?: string;
  error?: string;
  details?: Record<string, unknown>;
}

/** What a probe may say beyond "it answered": that the component works but not as it should, and figures. */
export interface ProbeResult {
  degraded?: string;
  details?: Record<string, unknown>;
}

export interface HealthCheck {
  name: string;
  kind: string;
  required: boolean;
  /** Resolves when the component answers (optionally saying it is degraded); throws when it does not. */
  probe(): Promise<void | ProbeResult>;
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
          const result = await Promise.race([
            check.probe(),
            new Promise<never>((_, reject) => {
              timer = setTimeout(() => reject(new Error(`no answer within ${PROBE_TIMEOUT_MS} ms`)), PROBE_TIMEOUT_MS);
            }),
          ]);
          components[check.name] = {
            status: result?.degraded ? 'degraded' : 'up',
            required: check.required,
            kind: check.kind,
            latency_ms: Math.round((performance.now() - started) * 100) / 100,
            ...(result?.degraded ? { error: result.degraded } : {}),
            ...(result?.details ? { details: result.details } : {}),
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
    const degraded = Object.values(components).some((c) => c.status === 'degraded');
    const status = down.some((c) => c.required) ? 'down' : down.length > 0 || degraded ? 'degraded' : 'ok';
    return { status, components };
  }
}
