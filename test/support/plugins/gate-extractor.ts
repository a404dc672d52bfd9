/**
 * A test extractor whose records wait at a gate the test opens: the test decides when each record's
 * extraction ends, so it can cancel a batch or read its progress while records are in flight. The kernel
 * runs in the test's process, so the test and the extractor share `gate`.
 */
import { defineExtractor } from '../../../kernel/plugins.js';

class Gate {
  entered = 0;
  private allowed = Number.POSITIVE_INFINITY;
  private waiters: Array<() => void> = [];

  /** From now on, at most `n` more records get through until the gate is opened again. */
  hold(n = 0): void {
    this.allowed = n;
  }

  /** Lets `n` more records through (waiting ones first). */
  allow(n: number): void {
    this.allowed += n;
    this.flush();
  }

  open(): void {
    this.allowed = Number.POSITIVE_INFINITY;
    this.flush();
  }

  reset(): void {
    this.entered = 0;
    this.open();
  }

  async pass(): Promise<void> {
    this.entered += 1;
    if (this.allowed > 0) {
      this.allowed -= 1;
      return;
    }
    await new Promise<void>((resolve) => this.waiters.push(resolve));
  }

  private flush(): void {
    while (this.allowed > 0 && this.waiters.length > 0) {
      this.allowed -= 1;
      this.waiters.shift()!();
    }
  }
}

export const gate = new Gate();

export default defineExtractor({
  name: 'gate_extractor',
  version: '1.0',
  description: 'Test only: waits at the test-controlled gate, then writes one document with the record text.',
  accepts: ['text/*'],
  inputs: [{ name: 'text', type: 'text', required: true }],
  parameters: { type: 'object', additionalProperties: false, properties: {} },
  features: [],
  fields: { type: 'object', additionalProperties: false, required: ['text'], properties: { text: { type: 'string' } } },
  async *extract(_ctx, input) {
    await gate.pass();
    const value = input.fields.text;
    yield { key: 'copy', fields: { text: typeof value === 'string' ? value : `blob of ${input.objectId}` } };
  },
});
