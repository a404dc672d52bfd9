/**
 * Domain events (`object.created`, `api_key.rotated`, ...). Published after the change is committed;
 * delivered to every subscriber in every process (NATS) or in this process (embedded).
 */
export interface TesseraEvent<T = Record<string, unknown>> {
  id: string;
  type: string;
  organization_id: string;
  occurred_at: string;
  data: T;
}

export type EventHandler = (event: TesseraEvent) => void | Promise<void>;

export interface EventBus {
  readonly kind: 'nats' | 'in-process';
  publish(event: Omit<TesseraEvent, 'id' | 'occurred_at'> & { occurred_at?: string }): Promise<void>;
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
