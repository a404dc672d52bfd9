/**
 * Where tasks live on NATS: one JetStream stream per deployment prefix with WorkQueue retention (a message
 * leaves the stream when a worker acknowledges it), subjects `<prefix>.tasks.<type>`, one durable pull
 * consumer per task type, and dead letters on `<prefix>.tasks.dead`.
 */
import { createHash } from 'node:crypto';
import {
  AckPolicy,
  connect,
  DeliverPolicy,
  nanos,
  RetentionPolicy,
  StorageType,
  type ConsumerConfig,
  type JetStreamManager,
} from 'nats';

/** The subject under `<prefix>.tasks.` that carries dead letters; no task type may take it. */
export const DEAD_LETTER_TOKEN = 'dead';

/** Dead letters (and stray work) are dropped after this long if nobody consumed them. */
const RETENTION_MS = 30 * 24 * 3600 * 1000;
/** Publications with the same message id inside this window are stored once. */
const DUPLICATE_WINDOW_MS = 2 * 60 * 1000;

export interface TaskSubjects {
  stream: string;
  /** The subject of one task type's messages. */
  work(type: string): string;
  dead: string;
  /** The durable consumer that delivers one task type. */
  consumer(type: string): string;
}

export function taskSubjects(prefix: string): TaskSubjects {
  const root = `${prefix}.tasks`;
  return {
    stream: `${prefix.replace(/[^A-Za-z0-9_-]/g, '_').toUpperCase()}_TASKS`,
    work: (type) => `${root}.${type}`,
    dead: `${root}.${DEAD_LETTER_TOKEN}`,
    consumer: (type) => {
      // Consumer names allow no dots; the hash keeps `a.b` and `a_b` apart.
      const hash = createHash('sha256').update(type).digest('hex').slice(0, 8);
      return `tasks_${type.replace(/[^A-Za-z0-9_-]/g, '_')}_${hash}`;
    },
  };
}

/** A task type becomes subject tokens: letters, digits, `_`, `-`, separated by single dots. */
export function assertTaskType(type: string): void {
  if (!/^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$/.test(type)) {
    throw new Error(`task type '${type}' must be dot-separated words of letters, digits, '_' or '-'`);
  }
  if (type === DEAD_LETTER_TOKEN) throw new Error(`task type '${DEAD_LETTER_TOKEN}' is reserved for dead letters`);
}

export async function ensureTaskStream(jsm: JetStreamManager, prefix: string): Promise<void> {
  const subjects = taskSubjects(prefix);
  try {
    await jsm.streams.info(subjects.stream);
  } catch {
    try {
      await jsm.streams.add({
        name: subjects.stream,
        subjects: [`${prefix}.tasks.>`],
        retention: RetentionPolicy.Workqueue,
        storage: StorageType.File,
        max_age: nanos(RETENTION_MS),
        duplicate_window: nanos(DUPLICATE_WINDOW_MS),
      });
    } catch (err) {
      // Another process may have created it a moment ago.
      await jsm.streams.info(subjects.stream).catch(() => {
        throw err;
      });
    }
  }
}

export interface ConsumerSettings {
  ackWaitMs: number;
  maxDeliver: number;
}

/** Creates the durable consumer of a task type, or brings its ack wait and max deliveries up to date. */
export async function ensureTaskConsumer(jsm: JetStreamManager, prefix: string, type: string, settings: ConsumerSettings): Promise<string> {
  const subjects = taskSubjects(prefix);
  const name = subjects.consumer(type);
  const wanted: Partial<ConsumerConfig> = { ack_wait: nanos(settings.ackWaitMs), max_deliver: settings.maxDeliver };
  const existing = await jsm.consumers.info(subjects.stream, name).catch(() => undefined);
  if (existing) {
    if (existing.config.ack_wait !== wanted.ack_wait || existing.config.max_deliver !== wanted.max_deliver) {
      await jsm.consumers.update(subjects.stream, name, wanted);
    }
    return name;
  }
  try {
    await jsm.consumers.add(subjects.stream, {
      durable_name: name,
      filter_subject: subjects.work(type),
      ack_policy: AckPolicy.Explicit,
      deliver_policy: DeliverPolicy.All,
      ...wanted,
    });
  } catch (err) {
    await jsm.consumers.info(subjects.stream, name).catch(() => {
      throw err;
    });
  }
  return name;
}

/** Removes a deployment's task stream with its consumers (tests clean up after themselves). */
export async function deleteTaskStream(url: string, prefix: string): Promise<void> {
  const nc = await connect({ servers: url });
  try {
    const jsm = await nc.jetstreamManager();
    await jsm.streams.delete(taskSubjects(prefix).stream).catch(() => false);
  } finally {
    await nc.close();
  }
}
