import type { Logger } from 'pino';
import { newId } from '../ids.js';
import { matchesPattern, type EventBus, type EventHandler, type TesseraEvent } from './event-bus.js';

/** The embedded bus: delivery in this process, after the publisher's current tick. */
export class InProcessEventBus implements EventBus {
  readonly kind = 'in-process' as const;
  private readonly subscriptions = new Set<{ pattern: string; handler: EventHandler }>();

  constructor(private readonly log: Logger) {}

  async publish(input: Omit<TesseraEvent, 'id' | 'occurred_at'> & { occurred_at?: string }): Promise<void> {
    const event: TesseraEvent = { id: newId('evt'), occurred_at: new Date().toISOString(), ...input };
    for (const sub of this.subscriptions) {
      if (!matchesPattern(sub.pattern, event.type)) continue;
      queueMicrotask(() => {
        Promise.resolve()
          .then(() => sub.handler(event))
          .catch((err: unknown) => this.log.error({ err, event: event.type }, 'event handler failed'));
      });
    }
  }

  subscribe(pattern: string, handler: EventHandler): () => void {
    const sub = { pattern, handler };
    this.subscriptions.add(sub);
    return () => this.subscriptions.delete(sub);
  }

  async ping(): Promise<number> {
    return 0;
  }

  async close(): Promise<void> {
    this.subscriptions.clear();
  }
}
