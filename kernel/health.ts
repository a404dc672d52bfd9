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
  /** Resident memory of the processes this component stands for (bytes), counted in the report's memory total. */
  rssBytes?: number;
}

export interface HealthCheck {
  name: string;
  kind: string;
  required: boolean;
  /** Resolves when the component answers (optionally saying it is degraded); throws when it does not. */
  probe(): Promise<void | ProbeResult>;
}

/** Resident memory of the deployment's processes as far as health can see them. */
export interface MemoryReport {
  /** Sum of `by_component` (bytes). */
  total_rss_bytes: number;
  /** Resident memory per component that runs processes of its own (or is this process). */
  by_component: Record<string, number>;
}

export interface HealthReport {
  status: 'ok' | 'degraded' | 'down';
  components: Record<string, ComponentReport>;
  memory: MemoryReport;
}

/** This API process: always up while it answers; its memory and heap. */
export const API_PROCESS_CHECK: HealthCheck = {
  name: 'api',
  kind: 'process',
  required: false,
  probe: async () => {
    const usage = process.memoryUsage();
    return {
      rssBytes: usage.rss,
      details: {
        pid: process.pid,
        rss_bytes: usage.rss,
        heap_used_bytes: usage.heapUsed,
        heap_total_bytes: usage.heapTotal,
        // Buffers and native allocations V8 knows of (e.g. PGlite's wasm memory when the database is embedded).
        external_bytes: usage.external,
        array_buffers_bytes: usage.arrayBuffers,
      },
    };
  },
};

const PROBE_TIMEOUT_MS = 2_000;

export class HealthRegistry {
  private readonly checks: HealthCheck[] = [API_PROCESS_CHECK];

  register(check: HealthCheck): void {
    this.checks.push(check);
  }

  /** The report being made: callers arriving meanwhile share it instead of probing every component again. */
  private running: Promise<HealthReport> | undefined;

  /**
   * Probes every component. Concurrent callers share one run: a burst of health requests (load balancers,
   * or anyone, since the endpoint needs no key) must not queue probes behind each other on the embedded
   * database until they time out and report it down.
   */
  report(): Promise<HealthReport> {
    this.running ??= this.probeAll().finally(() => {
      this.running = undefined;
    });
    return this.running;
  }

  private async probeAll(): Promise<HealthReport> {
    const reports = new Map<string, ComponentReport>();
    const byComponent: Record<string, number> = {};
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
          reports.set(check.name, {
            status: result?.degraded ? 'degraded' : 'up',
            required: check.required,
            kind: check.kind,
            latency_ms: Math.round((performance.now() - started) * 100) / 100,
            ...(result?.degraded ? { error: result.degraded } : {}),
            ...(result?.details ? { details: result.details } : {}),
          });
          if (result?.rssBytes !== undefined) byComponent[check.name] = result.rssBytes;
        } catch (err) {
          reports.set(check.name, {
            status: 'down',
            required: check.required,
            kind: check.kind,
            latency_ms: null,
            error: err instanceof Error ? err.message : String(err),
          });
        } finally {
          clearTimeout(timer);
        }
      }),
    );
    // In registration order, whichever answered first.
    const components: Record<string, ComponentReport> = {};
    for (const check of this.checks) components[check.name] = reports.get(check.name)!;
    const down = Object.values(components).filter((c) => c.status === 'down');
    const degraded = Object.values(components).some((c) => c.status === 'degraded');
    const status = down.some((c) => c.required) ? 'down' : down.length > 0 || degraded ? 'degraded' : 'ok';
    const total = Object.values(byComponent).reduce((sum, n) => sum + n, 0);
    return { status, components, memory: { total_rss_bytes: total, by_component: byComponent } };
  }
}
