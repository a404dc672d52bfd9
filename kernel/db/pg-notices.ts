/**
 * Notices between the processes sharing one PostgreSQL database (API processes, `tessera worker`s), over
 * LISTEN/NOTIFY: what one process's read caches forget, the others forget too. Used for rows that change
 * rarely and are read on every request (a retriever's definition, its collections), so a process can answer
 * them from memory although other processes write the same tables. Not for what must end everywhere at
 * once (a publication: unpublishing stops public access in every process before it answers).
 *
 * A notice reaches the other processes a moment after the write (PostgreSQL delivers it to each listening
 * connection), so a cache fed by these is current within that moment, not at once; each entry is also kept
 * for at most a bounded time (LocalReadCache's `crossProcess.ttlMs`), so a notice lost in a race is never
 * lost for long. While the listening connection is down, `listening` is false (caches read the database) and
 * every cache forgets everything when it is back (`onReset`): notices sent meanwhile were missed.
 */
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import type { Logger } from 'pino';
import { CrossProcessNotices as CrossProcessNoticesToken, type Services } from '../tokens.js';

/** The channel every Tessera process of a database listens on. */
export const NOTICE_CHANNEL = 'tessera_cache_notices';
/** PostgreSQL refuses NOTIFY payloads of 8,000 bytes or more: past this, a notice forgets everything of its topic. */
const MAX_PAYLOAD_BYTES = 7_500;
const RECONNECT_MS = { first: 200, max: 5_000 };
/** How long a cache fed by these notices keeps an entry at most: the bound on a notice lost in a race. */
export const CROSS_PROCESS_TTL_MS = 10_000;

/** Notices between processes: sent to every other process, never back to the sender. */
export interface CrossProcessNotices {
  notify(topic: string, keys: readonly string[] | null): void;
  onNotice(listener: (topic: string, keys: readonly string[] | null) => void): () => void;
  /** True while notices from other processes are being received: a cache may answer from memory. */
  readonly listening: boolean;
  /** Called when listening starts or stops: whatever was missed meanwhile must be forgotten. */
  onReset(listener: () => void): () => void;
}

interface Wire {
  from: string;
  topic: string;
  keys: readonly string[] | null;
}

export class PostgresNotices implements CrossProcessNotices {
  private readonly sender = randomUUID();
  private readonly listeners = new Set<(topic: string, keys: readonly string[] | null) => void>();
  private readonly resetListeners = new Set<() => void>();
  private client: pg.Client | undefined;
  private connected = false;
  private closed = false;
  private retryMs = RECONNECT_MS.first;
  private retryTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly url: string,
    /** Sends NOTIFY through the service's own pool (a statement like any other). */
    private readonly send: (channel: string, payload: string) => Promise<unknown>,
    private readonly log?: Pick<Logger, 'warn' | 'info'>,
  ) {}

  get listening(): boolean {
    return this.connected;
  }

  /** Connects the listening connection; when the database refuses, tries again in the background (not listening meanwhile). */
  async start(): Promise<void> {
    try {
      await this.connect();
    } catch (err) {
      this.log?.warn({ err }, `cannot listen for other processes' cache notices; caches read the database until it works (retry in ${this.retryMs} ms)`);
      this.scheduleReconnect();
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.retryTimer);
    const client = this.client;
    this.client = undefined;
    this.setConnected(false);
    await client?.end().catch(() => undefined);
  }

  notify(topic: string, keys: readonly string[] | null): void {
    let payload = JSON.stringify({ from: this.sender, topic, keys } satisfies Wire);
    if (Buffer.byteLength(payload) > MAX_PAYLOAD_BYTES) payload = JSON.stringify({ from: this.sender, topic, keys: null } satisfies Wire);
    this.send(NOTICE_CHANNEL, payload).catch((err: unknown) => {
      // Not sent: the other processes' entries expire by their time limit instead.
      this.log?.warn({ err, topic }, 'a cache notice could not be sent to the other processes');
    });
  }

  onNotice(listener: (topic: string, keys: readonly string[] | null) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  onReset(listener: () => void): () => void {
    this.resetListeners.add(listener);
    return () => this.resetListeners.delete(listener);
  }

  private async connect(): Promise<void> {
    const client = new pg.Client({ connectionString: this.url });
    client.on('notification', (message) => this.received(message.payload));
    client.on('error', (err) => this.lost(client, err));
    client.on('end', () => this.lost(client));
    await client.connect();
    try {
      await client.query(`listen ${NOTICE_CHANNEL}`);
    } catch (err) {
      await client.end().catch(() => undefined);
      throw err;
    }
    if (this.closed) {
      await client.end().catch(() => undefined);
      return;
    }
    this.client = client;
    this.retryMs = RECONNECT_MS.first;
    this.setConnected(true);
  }

  private received(payload: string | undefined): void {
    if (!payload) return;
    let wire: Wire;
    try {
      wire = JSON.parse(payload) as Wire;
    } catch {
      return;
    }
    if (wire.from === this.sender || typeof wire.topic !== 'string') return;
    const keys = Array.isArray(wire.keys) ? wire.keys.filter((k): k is string => typeof k === 'string') : null;
    for (const listener of this.listeners) listener(wire.topic, keys);
  }

  private lost(client: pg.Client, err?: Error): void {
    if (this.client !== client) return;
    this.client = undefined;
    this.setConnected(false);
    client.end().catch(() => undefined);
    if (this.closed) return;
    this.log?.warn({ err }, `the connection listening for other processes' cache notices was lost; caches read the database until it is back (retry in ${this.retryMs} ms)`);
    this.scheduleReconnect();
  }

  private scheduleReconnect(): void {
    clearTimeout(this.retryTimer);
    this.retryTimer = setTimeout(() => {
      this.connect().then(
        () => this.log?.info('listening for cache notices again'),
        () => {
          this.retryMs = Math.min(RECONNECT_MS.max, this.retryMs * 2);
          if (!this.closed) this.scheduleReconnect();
        },
      );
    }, this.retryMs);
    this.retryTimer.unref();
  }

  private setConnected(connected: boolean): void {
    if (this.connected === connected) return;
    this.connected = connected;
    for (const listener of this.resetListeners) listener();
  }
}

/** A definition store's `crossProcess` option: the notices when this process has them (PostgreSQL), else nothing. */
export function crossProcessOf(services: Services): { crossProcess?: CrossProcessNotices } {
  const notices = services.tryGet(CrossProcessNoticesToken);
  return notices ? { crossProcess: notices } : {};
}
