/**
 * Domain events (`object.created`, `api_key.rotated`, ...). Published after the change is committed;
 * delivered to every subscriber in every process (NATS) or in this process (embedded).
 */
import { newId } from '../ids.js';

export interface TesseraEvent<T = Record<string, unknown>> {
  id: string;
  type: string;
  organization_id: string;
  occurred_at: string;
  data: T;
}

export type EventHandler = (event: TesseraEvent) => void | Promise<void>;

/** An event as a publisher gives it: the bus adds its id (and its time, unless given). */
export type EventInput = Omit<TesseraEvent, 'id' | 'occurred_at'> & { occurred_at?: string };

/** The event a bus sends for an input: a new id, and the time now unless the input has one. */
export function stampEvent(input: EventInput): TesseraEvent {
  return { id: newId('evt'), occurred_at: new Date().toISOString(), ...input };
}

export interface EventBus {
  readonly kind: 'nats' | 'in-process';
  publish(event: EventInput): Promise<void>;
  /**
   * Several events, delivered in the order given, as one hand-off where the bus allows it (one notice to
   * the other threads, JetStream publishes in flight together): a bulk write announces its objects at once.
   */
  publishMany(events: readonly EventInput[]): Promise<void>;
  /** `pattern` is an event type, or a prefix ending in `.*` / `>` (`api_key.*`, `>`). */
  subscribe(pattern: string, handler: EventHandler): () => void;
  /** Round trip to the broker in ms; throws when it is unreachable. */
  ping(): Promise<number>;
  close(): Promise<void>;
}

/** NATS-style subject matching: `*` is one token, `>` is one or more trailing tokens. */
export function matchesPattern(pattern: string, type: string): boolean {
  if (pattern === '>' || pattern === type) return true;
  const p = pattern.split('.');
  const t = type.split('.');
  for (let i = 0; i < p.length; i++) {
    if (p[i] === '>') return t.length > i;
    if (i >= t.length) return false;
    if (p[i] !== '*' && p[i] !== t[i]) return false;
  }
  return p.length === t.length;
}
