/**
 * The NATS bus. Events are published through JetStream into one stream (`<PREFIX>_EVENTS`), so they are
 * durable and replayable; live subscribers receive them through plain subject subscriptions.
 */
import { connect, JSONCodec, type NatsConnection, type JetStreamClient } from 'nats';
import type { Logger } from 'pino';
import { stampEvent, type EventBus, type EventHandler, type EventInput, type TesseraEvent } from './event-bus.js';

const codec = JSONCodec<TesseraEvent>();

export class NatsEventBus implements EventBus {
  readonly kind = 'nats' as const;

  private constructor(
    private readonly nc: NatsConnection,
    private readonly js: JetStreamClient,
    private readonly subjectRoot: string,
    private readonly log: Logger,
  ) {}

  static async connect(url: string, prefix: string, log: Logger): Promise<NatsEventBus> {
    const nc = await connect({ servers: url, name: `tessera-${process.pid}`, maxReconnectAttempts: -1 });
    const subjectRoot = `${prefix}.events`;
    const jsm = await nc.jetstreamManager();
    const stream = `${prefix.replace(/[^A-Za-z0-9_-]/g, '_').toUpperCase()}_EVENTS`;
    try {
      await jsm.streams.info(stream);
    } catch {
      await jsm.streams.add({ name: stream, subjects: [`${subjectRoot}.>`], max_age: 7 * 24 * 3600 * 1e9 });
    }
    return new NatsEventBus(nc, nc.jetstream(), subjectRoot, log);
  }

  /** Removes this deployment's stream (tests clean up after themselves). */
  static async deleteStream(url: string, prefix: string): Promise<void> {
    const nc = await connect({ servers: url });
    try {
      const jsm = await nc.jetstreamManager();
      await jsm.streams.delete(`${prefix.replace(/[^A-Za-z0-9_-]/g, '_').toUpperCase()}_EVENTS`).catch(() => false);
    } finally {
      await nc.close();
    }
  }

  async publish(input: EventInput): Promise<void> {
    const event = stampEvent(input);
    await this.js.publish(`${this.subjectRoot}.${event.type}`, codec.encode(event), { msgID: event.id });
  }

  /**
   * In flight together: one connection sends them in the order given (so the stream holds them in that
   * order), and their acknowledgements are awaited together instead of one round trip each.
   */
  async publishMany(inputs: readonly EventInput[]): Promise<void> {
    const sent = await Promise.allSettled(inputs.map((input) => this.publish(input)));
    const failed = sent.find((s): s is PromiseRejectedResult => s.status === 'rejected');
    if (failed) throw failed.reason;
  }

  subscribe(pattern: string, handler: EventHandler): () => void {
    const sub = this.nc.subscribe(`${this.subjectRoot}.${pattern}`);
    void (async () => {
      for await (const msg of sub) {
        try {
          await handler(codec.decode(msg.data));
        } catch (err) {
          this.log.error({ err, subject: msg.subject }, 'event handler failed');
        }
      }
    })();
    return () => sub.unsubscribe();
  }

  async ping(): Promise<number> {
    return this.nc.rtt();
  }

  async close(): Promise<void> {
    await this.nc.drain();
  }
}
