/**
 * The `tasks` table: the record of every task (status, attempts, result, last error, dedupe), whichever
 * transport delivers it. Both task queues claim, finish and fail tasks through these statements, so a
 * task means the same thing whether the database runner or NATS JetStream brought it to a worker.
 */
import type { Knex } from 'knex';
import type { Clock } from '../clock.js';
import { newId } from '../ids.js';
import type { EnqueueOptions, TaskRow } from './task-queue.js';

/** Bookkeeping of the NATS transport (migration 0002); the database runner leaves it untouched. */
export interface TaskDelivery {
  /** When JetStream stored this task's current message; null while it still has to be published. */
  published_at: Date | null;
  /** Bumped each time the task is published afresh, so the new message escapes duplicate suppression. */
  publication: number;
  /** When the dead letter of a DEAD task was published. */
  dead_lettered_at: Date | null;
}

export type TaskRecord = TaskRow & TaskDelivery;

export const DEFAULT_MAX_ATTEMPTS = 5;

/** Retry delay after a failed attempt: 1 s, 2 s, 4 s ... at most a minute. */
export function defaultRetryDelayMs(attempt: number): number {
  return Math.min(60_000, 1000 * 2 ** Math.max(0, attempt - 1));
}

const DEDUPE_CONFLICT = "(dedupe_key) where dedupe_key is not null and status in ('PENDING', 'RUNNING')";
const CLAIMABLE = "((status = 'PENDING' and run_at <= ?) or (status = 'RUNNING' and locked_until < ?))";

export class TaskStore {
  constructor(
    private readonly db: Knex,
    private readonly clock: Clock,
  ) {}

  /**
   * Inserts a task, or returns the live task holding the same dedupe key (`created` false). Inside a
   * transaction when the options carry one. A concurrent enqueue with the same key cannot fail on the
   * unique index: the conflict is skipped and the winner returned.
   */
  async insert(type: string, payload: Record<string, unknown>, options: EnqueueOptions = {}): Promise<{ task: TaskRecord; created: boolean }> {
    const db = options.transaction ?? this.db;
    const dedupeKey = options.dedupeKey ?? null;
    for (let round = 0; round < 3; round++) {
      if (dedupeKey) {
        const live = await db<TaskRecord>('tasks').where({ dedupe_key: dedupeKey }).whereIn('status', ['PENDING', 'RUNNING']).first();
        if (live) return { task: live, created: false };
      }
      const now = this.clock.now();
      const row = {
        task_id: newId('task'),
        organization_id: options.organizationId ?? null,
        type,
        payload: JSON.stringify(payload),
        status: 'PENDING',
        attempts: 0,
        max_attempts: options.maxAttempts ?? DEFAULT_MAX_ATTEMPTS,
        run_at: new Date(now.getTime() + (options.delayMs ?? 0)),
        locked_until: null,
        last_error: null,
        result: null,
        dedupe_key: dedupeKey,
        created_at: now,
        updated_at: now,
      };
      if (!dedupeKey) {
        const [task] = (await db('tasks').insert(row).returning('*')) as TaskRecord[];
        return { task: task!, created: true };
      }
      const insert = db('tasks').insert(row).toSQL();
      const result = (await db.raw(`${insert.sql} on conflict ${DEDUPE_CONFLICT} do nothing returning *`, insert.bindings)) as { rows: TaskRecord[] };
      if (result.rows[0]) return { task: result.rows[0], created: true };
      // Another enqueue holds the key: read it on the next round (or insert, if it finished meanwhile).
    }
    throw new Error(`could not enqueue '${type}': dedupe key '${dedupeKey}' keeps changing hands`);
  }

  get(taskId: string): Promise<TaskRecord | undefined> {
    return this.db<TaskRecord>('tasks').where({ task_id: taskId }).first();
  }

  /** Takes one due task (pending, or running with an expired lease) of the given types. */
  async claimDue(types: readonly string[], leaseMs: number): Promise<TaskRecord | undefined> {
    if (types.length === 0) return undefined;
    const now = this.clock.now();
    const rows = (await this.db.raw(
      `update tasks set status = 'RUNNING', attempts = attempts + 1, locked_until = ?, updated_at = ?, started_at = ?
       where task_id = (
         select task_id from tasks
         where type = any(?) and ${CLAIMABLE}
         order by run_at
         for update skip locked
         limit 1)
       returning *`,
      [new Date(now.getTime() + leaseMs), now, now, [...types], now, now],
    )) as { rows: TaskRecord[] };
    return rows.rows[0];
  }

  /** Takes this task if it is due; undefined when it is finished, not due yet, or leased to a live worker. */
  async claim(taskId: string, leaseMs: number): Promise<TaskRecord | undefined> {
    const now = this.clock.now();
    const rows = (await this.db.raw(
      `update tasks set status = 'RUNNING', attempts = attempts + 1, locked_until = ?, updated_at = ?, started_at = ?
       where task_id = ? and ${CLAIMABLE}
       returning *`,
      [new Date(now.getTime() + leaseMs), now, now, taskId, now, now],
    )) as { rows: TaskRecord[] };
    return rows.rows[0];
  }

  /**
   * Hands every running task back (PENDING, due now). Only for a runner that knows it is the sole one —
   * the embedded database serves one process, so at its start any RUNNING task belonged to a dead process.
   */
  async releaseRunning(): Promise<number> {
    const now = this.clock.now();
    const rows = (await this.db('tasks')
      .where({ status: 'RUNNING' })
      .update({ status: 'PENDING', locked_until: null, run_at: now, updated_at: now })
      .returning('task_id')) as unknown[];
    return rows.length;
  }

  /** Keeps a running attempt's lease; false once the attempt no longer holds the task. */
  async extendLease(task: TaskRow, leaseMs: number): Promise<boolean> {
    const updated = await this.db('tasks')
      .where({ task_id: task.task_id, status: 'RUNNING', attempts: task.attempts })
      .update({ locked_until: new Date(this.clock.now().getTime() + leaseMs) });
    return updated > 0;
  }

  async complete(task: TaskRow, result: Record<string, unknown>): Promise<void> {
    const now = this.clock.now();
    await this.db('tasks')
      .where({ task_id: task.task_id })
      .update({ status: 'COMPLETED', result: JSON.stringify(result), locked_until: null, last_error: null, updated_at: now, ...this.attemptEnded(now) });
  }

  /** The columns an attempt's end sets: when, and its run time added to the task's (engine analytics). */
  private attemptEnded(now: Date) {
    return {
      finished_at: now,
      busy_ms: this.db.raw('busy_ms + greatest(coalesce(extract(epoch from (?::timestamptz - started_at)) * 1000, 0), 0)', [now]),
    };
  }

  /** Records a failed attempt: back to PENDING after `retryDelayMs`, or DEAD when it was the last one. */
  async fail(task: TaskRow, message: string, retryDelayMs: number): Promise<TaskRecord> {
    const now = this.clock.now();
    const dead = task.attempts >= task.max_attempts;
    const [row] = (await this.db('tasks')
      .where({ task_id: task.task_id })
      .update({
        status: dead ? 'DEAD' : 'PENDING',
        last_error: message.slice(0, 2000),
        locked_until: null,
        run_at: new Date(now.getTime() + retryDelayMs),
        updated_at: now,
        ...this.attemptEnded(now),
      })
      .returning('*')) as TaskRecord[];
    return row!;
  }

  // --- the NATS transport's outbox -------------------------------------------------------------------

  /** Due tasks of these types whose current message has not been stored by JetStream yet. */
  unpublished(types: readonly string[], limit: number): Promise<TaskRecord[]> {
    const now = this.clock.now();
    return this.db<TaskRecord>('tasks')
      .whereNull('published_at')
      .whereIn('status', ['PENDING', 'RUNNING'])
      .whereRaw(`type = any(?) and ${CLAIMABLE}`, [[...types], now, now])
      .orderBy('run_at')
      .limit(limit);
  }

  /** Notes that JetStream stored the message of this publication (a later republication wins). */
  async markPublished(taskId: string, publication: number): Promise<void> {
    await this.db('tasks').where({ task_id: taskId, publication }).update({ published_at: this.clock.now() });
  }

  /** Hands the task back to the outbox: it is published again, under a new message id, once due. */
  async republish(taskId: string): Promise<void> {
    await this.db('tasks')
      .where({ task_id: taskId })
      .update({ published_at: null, publication: this.db.raw('publication + 1') });
  }

  /**
   * Due tasks of a type, published before `before` and still waiting, while the consumer of that type holds
   * no message at all: their messages are gone (stream purged, deliveries exhausted). They go back to the
   * outbox; returns how many.
   */
  requeueLost(type: string, before: Date): Promise<number> {
    return this.db('tasks')
      .where({ type })
      .whereNotNull('published_at')
      .where('published_at', '<', before)
      .whereRaw(CLAIMABLE, [before, before])
      .update({ published_at: null, publication: this.db.raw('publication + 1') });
  }

  /** DEAD tasks that went through NATS and whose dead letter is not out yet. */
  undeadLettered(types: readonly string[], limit: number): Promise<TaskRecord[]> {
    return this.db<TaskRecord>('tasks')
      .where({ status: 'DEAD' })
      .whereNull('dead_lettered_at')
      .whereNotNull('published_at')
      .whereRaw('type = any(?)', [[...types]])
      .limit(limit);
  }

  async markDeadLettered(taskId: string): Promise<void> {
    await this.db('tasks').where({ task_id: taskId }).update({ dead_lettered_at: this.clock.now() });
  }

  /** Ends a task without running it again (its worker died during the last attempt). */
  async bury(task: TaskRow, message: string): Promise<TaskRecord> {
    const [row] = (await this.db('tasks')
      .where({ task_id: task.task_id })
      // The claim that found it counted an attempt that never ran.
      .update({ status: 'DEAD', attempts: this.db.raw('attempts - 1'), last_error: message.slice(0, 2000), locked_until: null, updated_at: this.clock.now() })
      .returning('*')) as TaskRecord[];
    return row!;
  }
}
