/**
 * Test stages for streamed executions. `test_gate` passes its documents on once the test opens the gate,
 * or gives up when the execution is aborted (the streaming client hung up); `test_counter` counts its runs.
 * The kernel runs in the test's process, so the test and the stages share `stageGate`.
 */
import { defineStage } from '../../../kernel/plugins.js';

class StageGate {
  /** Runs of `test_counter` so far. */
  counted = 0;
  private opened!: () => void;
  private openedPromise!: Promise<void>;
  private enteredResolve!: () => void;
  /** Resolves when a `test_gate` run starts waiting. */
  entered!: Promise<void>;
  /** Resolves with how the last `test_gate` run ended. */
  ended!: Promise<'opened' | 'aborted'>;
  private endedResolve!: (how: 'opened' | 'aborted') => void;

  constructor() {
    this.reset();
  }

  reset(): void {
    this.counted = 0;
    this.openedPromise = new Promise((resolve) => (this.opened = resolve));
    this.entered = new Promise((resolve) => (this.enteredResolve = resolve));
    this.ended = new Promise((resolve) => (this.endedResolve = resolve));
  }

  open(): void {
    this.opened();
  }

  async wait(signal: AbortSignal | undefined): Promise<'opened' | 'aborted'> {
    this.enteredResolve();
    const aborted = new Promise<'aborted'>((resolve) => {
      if (signal?.aborted) resolve('aborted');
      signal?.addEventListener('abort', () => resolve('aborted'), { once: true });
    });
    const how = await Promise.race([this.openedPromise.then(() => 'opened' as const), aborted]);
    this.endedResolve(how);
    return how;
  }
}

export const stageGate = new StageGate();

export const gateStage = defineStage({
  id: 'test_gate',
  version: '1.0',
  type: 'apply',
  description: 'Test stage: waits for the test to open it (or for the execution to be aborted), then passes documents on.',
  parameters: { type: 'object', additionalProperties: false, properties: {} },
  async run(ctx, docs) {
    await stageGate.wait(ctx.signal);
    return docs;
  },
});

export const counterStage = defineStage({
  id: 'test_counter',
  version: '1.0',
  type: 'apply',
  description: 'Test stage: counts its runs and passes documents on.',
  parameters: { type: 'object', additionalProperties: false, properties: {} },
  async run(_ctx, docs) {
    stageGate.counted += 1;
    return docs;
  },
});
