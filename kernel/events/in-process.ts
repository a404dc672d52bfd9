import type { Logger } from 'pino';
import type { DatabaseNotices } from '../db/database.js';
import { newId } from '../ids.js';
import { matchesPattern, type EventBus, type EventHandler, type TesseraEvent } from './event-bus.js';

const EVENT_NOTICE = 'event';

/**
 * The embedded bus: delivery in this process, after the publisher's current tick. With `notices` (the
 * embedded database shared by this process's threads), events cross to the other threads too.
 */
export class InProcessEventBus implements EventBus {
  readonly kind = 'in-process' as const;
  private readonly subscriptions = new Set<{ pattern: string; handler: EventHandler }>();
  private readonly stopListening: (() => void) | undefined;

  constructor(
    private readonly log: Logger,
    private readonly notices?: DatabaseNotices,
  ) {
    this.stopListening = notices?.onNotice((topic, payload) => {
      if (topic === EVENT_NOTICE) this.deliver(payload as TesseraEvent);
    });
  }

  async publish(input: Omit<TesseraEvent, 'id' | 'occurred_at'> & { occurred_at?: string }): Promise<void> {
    const event: TesseraEvent = { id: newId('evt'), occurred_at: new Date().toISOString(), ...input };
    this.notices?.notify(EVENT_NOTICE, event);
    this.deliver(event);
  }

  private deliver(event: TesseraEvent): void {
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
    this.stopListening?.();
    this.subscriptions.clear();
  }
}
