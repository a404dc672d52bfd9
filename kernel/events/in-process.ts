import type { Logger } from 'pino';
import type { DatabaseNotices } from '../db/database.js';
import { matchesPattern, stampEvent, type EventBus, type EventHandler, type EventInput, type TesseraEvent } from './event-bus.js';

const EVENT_NOTICE = 'event';
/** Several events in one notice (publishMany): one hop between threads instead of one per event. */
const EVENTS_NOTICE = 'events';

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
      else if (topic === EVENTS_NOTICE) for (const event of payload as TesseraEvent[]) this.deliver(event);
    });
  }

  async publish(input: EventInput): Promise<void> {
    const event = stampEvent(input);
    this.notices?.notify(EVENT_NOTICE, event);
    this.deliver(event);
  }

  async publishMany(inputs: readonly EventInput[]): Promise<void> {
    if (inputs.length === 0) return;
    const events = inputs.map(stampEvent);
    this.notices?.notify(EVENTS_NOTICE, events);
    for (const event of events) this.deliver(event);
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
