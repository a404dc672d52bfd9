/**
 * Publishes the events of changes already committed. The change stands whether or not the bus takes its
 * events, so a refusal (NATS unreachable) is logged, never thrown: thrown, it would reach a caller whose
 * clean-up undoes part of the change (blobs of stored objects), or a client told "500" about a change that
 * happened (an organization's admin key, shown once, lost). What the missed events would have done elsewhere
 * still happens late: other API processes drop cached keys within their cache TTL.
 */
import type { Logger } from '../logger.js';
import type { EventBus, EventInput } from './event-bus.js';

export class Announcer {
  constructor(
    private readonly bus: EventBus,
    private readonly log: Logger,
  ) {}

  announce(event: EventInput): Promise<void> {
    return this.announceAll([event]);
  }

  /** Several events in order, as one hand-off where the bus allows it (EventBus.publishMany). */
  async announceAll(events: readonly EventInput[]): Promise<void> {
    if (events.length === 0) return;
    try {
      await (events.length === 1 ? this.bus.publish(events[0]!) : this.bus.publishMany(events));
    } catch (err) {
      this.log.warn(
        { err, types: [...new Set(events.map((e) => e.type))], count: events.length, first: events[0]!.data },
        'a committed change stands, but its events could not be published (other processes miss them)',
      );
    }
  }
}
