/** Health reports: concurrent callers share one probe of each component, and components keep their registration order. */
import { describe, expect, it } from 'vitest';
import { HealthRegistry } from '../../kernel/health.js';

describe('health registry', () => {
  it('callers arriving while a report is made share it; a later call probes again', async () => {
    const registry = new HealthRegistry();
    let probes = 0;
    let release!: () => void;
    registry.register({
      name: 'database', kind: 'test', required: true,
      probe: async () => {
        probes += 1;
        await new Promise<void>((resolve) => (release = resolve));
      },
    });
    const burst = Array.from({ length: 40 }, () => registry.report());
    await new Promise((r) => setTimeout(r, 10));
    release();
    const reports = await Promise.all(burst);
    expect(probes).toBe(1);
    expect(new Set(reports).size).toBe(1);
    expect(reports[0]!.components.database!.status).toBe('up');
    const later = registry.report();
    await new Promise((r) => setTimeout(r, 10));
    release();
    await later;
    expect(probes).toBe(2);
  });

  it('lists components in the order they were registered, whichever answers first', async () => {
    const registry = new HealthRegistry();
    registry.register({ name: 'slow', kind: 'test', required: false, probe: () => new Promise((r) => setTimeout(r, 30)) });
    registry.register({ name: 'fast', kind: 'test', required: false, probe: async () => undefined });
    registry.register({ name: 'broken', kind: 'test', required: false, probe: async () => Promise.reject(new Error('no')) });
    const report = await registry.report();
    expect(Object.keys(report.components)).toEqual(['api', 'slow', 'fast', 'broken']);
    expect(report.status).toBe('degraded');
  });
});
