/** The embedded bus: events reach subscribers in this thread and, through the database's notices, in the others. */
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import type { DatabaseNotices } from '../../../kernel/db/database.js';
import type { TesseraEvent } from '../../../kernel/events/event-bus.js';
import { InProcessEventBus } from '../../../kernel/events/in-process.js';

/** Two threads' notices, joined: what one notifies the other hears (as the database thread forwards them). */
function linkedNotices(): { a: DatabaseNotices; b: DatabaseNotices; sent: () => number } {
  const listeners = { a: new Set<(topic: string, payload: unknown) => void>(), b: new Set<(topic: string, payload: unknown) => void>() };
  let sent = 0;
  const side = (self: 'a' | 'b', other: 'a' | 'b'): DatabaseNotices => ({
    notify: (topic, payload) => {
      sent += 1;
      const copy = structuredClone(payload);
      queueMicrotask(() => listeners[other].forEach((l) => l(topic, copy)));
    },
    onNotice: (listener) => {
      listeners[self].add(listener);
      return () => listeners[self].delete(listener);
    },
  });
  return { a: side('a', 'b'), b: side('b', 'a'), sent: () => sent };
}

const settle = () => new Promise((resolve) => setTimeout(resolve, 10));

/** A bus in this thread and one in another, sharing the database's notices. */
function twoThreads(): { here: InProcessEventBus; there: InProcessEventBus; noticesSent: () => number } {
  const log = pino({ level: 'silent' });
  const notices = linkedNotices();
  return { here: new InProcessEventBus(log, notices.a), there: new InProcessEventBus(log, notices.b), noticesSent: notices.sent };
}

describe('in-process event bus', () => {
  it('delivers publishMany\'s events in order, here and in the other thread, as one notice', async () => {
    const { here, there, noticesSent } = twoThreads();
    const seenHere: TesseraEvent[] = [];
    const seenThere: TesseraEvent[] = [];
    const otherTypes: TesseraEvent[] = [];
    here.subscribe('object.*', (e) => void seenHere.push(e));
    there.subscribe('object.created', (e) => void seenThere.push(e));
    there.subscribe('batch.*', (e) => void otherTypes.push(e));

    const events = Array.from({ length: 500 }, (_, i) => ({ type: 'object.created', organization_id: 'org_1', data: { n: i } }));
    await here.publishMany(events);
    await here.publishMany([]);
    await settle();

    expect(noticesSent()).toBe(1);
    expect(seenHere.map((e) => e.data.n)).toEqual(events.map((e) => e.data.n));
    expect(seenThere.map((e) => e.data.n)).toEqual(events.map((e) => e.data.n));
    // Each event has its own id, the same in every thread.
    expect(new Set(seenThere.map((e) => e.id)).size).toBe(500);
    expect(seenThere.map((e) => e.id)).toEqual(seenHere.map((e) => e.id));
    expect(otherTypes).toEqual([]);
  });

  it('delivers a single publish in the other thread too', async () => {
    const { here, there } = twoThreads();
    const seen: TesseraEvent[] = [];
    there.subscribe('>', (e) => void seen.push(e));
    await here.publish({ type: 'api_key.rotated', organization_id: 'org_1', data: { key_id: 'k' } });
    await settle();
    expect(seen.map((e) => [e.type, e.data.key_id])).toEqual([['api_key.rotated', 'k']]);
  });
});
