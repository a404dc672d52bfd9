/** Times named stages of processing (summed over records) for the batch's performance and bottlenecks. */
import type { StageSample } from '../../../../kernel/processing.js';

export class StageClock {
  private readonly stages = new Map<string, StageSample>();

  async time<T>(stage: string, work: () => Promise<T>): Promise<T> {
    const started = performance.now();
    try {
      return await work();
    } finally {
      this.record(stage, performance.now() - started);
    }
  }

  timeSync<T>(stage: string, work: () => T): T {
    const started = performance.now();
    try {
      return work();
    } finally {
      this.record(stage, performance.now() - started);
    }
  }

  samples(): Record<string, StageSample> {
    return Object.fromEntries(this.stages);
  }

  private record(stage: string, ms: number): void {
    const sample = this.stages.get(stage) ?? { total_ms: 0, max_ms: 0, count: 0 };
    sample.total_ms += ms;
    sample.max_ms = Math.max(sample.max_ms, ms);
    sample.count += 1;
    this.stages.set(stage, sample);
  }
}
