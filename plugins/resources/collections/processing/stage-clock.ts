/**
 * Times named stages of processing: summed over records (where the time went) and when each stage was
 * first and last busy (so overlapping work — records extracted side by side, chunks run in parallel —
 * also gives the stage's wall time).
 */
import type { StageSample } from '../../../../kernel/processing.js';

export class StageClock {
  private readonly stages = new Map<string, StageSample>();

  async time<T>(stage: string, work: () => Promise<T>): Promise<T> {
    const started = performance.now();
    const startedAt = Date.now();
    try {
      return await work();
    } finally {
      this.record(stage, performance.now() - started, startedAt);
    }
  }

  timeSync<T>(stage: string, work: () => T): T {
    const started = performance.now();
    const startedAt = Date.now();
    try {
      return work();
    } finally {
      this.record(stage, performance.now() - started, startedAt);
    }
  }

  samples(): Record<string, StageSample> {
    return Object.fromEntries(this.stages);
  }

  private record(stage: string, ms: number, startedAt: number): void {
    const sample = this.stages.get(stage) ?? { total_ms: 0, max_ms: 0, count: 0, first_started_ms: startedAt, last_ended_ms: startedAt };
    sample.total_ms += ms;
    sample.max_ms = Math.max(sample.max_ms, ms);
    sample.count += 1;
    sample.first_started_ms = Math.min(sample.first_started_ms ?? startedAt, startedAt);
    sample.last_ended_ms = Math.max(sample.last_ended_ms ?? 0, startedAt + Math.round(ms));
    this.stages.set(stage, sample);
  }
}
