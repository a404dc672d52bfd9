/**
 * The execution history, written behind the answer: a saved execute queues its record and answers; the
 * queue is written in batches (one insert for many executions) a moment later, and before anything in this
 * process reads the history (list, get, interactions, cursor pages, hit rate, retriever delete) and at
 * shutdown, so a reader here always sees every execution answered before it. An execution whose answer
 * depends on its record (a `cursor` page reads it back) is written before answering instead.
 */
import type { Logger } from 'pino';
import type { ExecutionRow, RetrieverStore } from './store.js';

/** How long a record waits for others to share its insert. */
const FLUSH_DELAY_MS = 25;
/** Records per insert statement. */
const MAX_BATCH = 200;
/** Records kept for a retry while the database refuses them (oldest dropped beyond this, and logged). */
const MAX_PENDING = 10_000;

export class ExecutionHistory {
  private pending: ExecutionRow[] = [];
  private timer: NodeJS.Timeout | undefined;
  private writing: Promise<void> = Promise.resolve();

  constructor(
    private readonly store: RetrieverStore,
    private readonly log: Logger,
  ) {}

  /** Queues the record; it is written within a few milliseconds (or by the next flush). */
  record(row: ExecutionRow): void {
    this.pending.push(row);
    if (this.pending.length > MAX_PENDING) {
      const dropped = this.pending.splice(0, this.pending.length - MAX_PENDING);
      this.log.error({ dropped: dropped.length }, 'retriever execution history: records dropped (the database refused them for too long)');
    }
    if (this.pending.length >= MAX_BATCH) void this.flush();
    else if (!this.timer) {
      this.timer = setTimeout(() => void this.flush(), FLUSH_DELAY_MS);
      this.timer.unref();
    }
  }

  /** Writes the record now, with everything queued before it. */
  async recordNow(row: ExecutionRow): Promise<void> {
    this.pending.push(row);
    await this.flush();
    // A record the database refused stays queued for a retry; an answer that depends on it must fail.
    if (this.pending.includes(row)) throw new Error(`could not record execution ${row.execution_id}`);
  }

  /**
   * Writes everything queued so far (readers call this first). Records queued while that write runs wait
   * for their own flush: draining them in the same write made every other insert a single row (a record
   * that arrived during the insert before it), at about three times a batched row's cost to the database.
   */
  flush(): Promise<void> {
    clearTimeout(this.timer);
    this.timer = undefined;
    const queued = this.pending;
    this.pending = [];
    this.writing = this.writing.then(() => this.write(queued));
    return this.writing;
  }

  private async write(queued: ExecutionRow[]): Promise<void> {
    for (let at = 0; at < queued.length; at += MAX_BATCH) {
      const batch = queued.slice(at, at + MAX_BATCH);
      try {
        await this.store.insertExecutions(batch);
      } catch (err) {
        // One bad record (its retriever deleted meanwhile) must not cost the others: write them one by one.
        const failed = await this.writeEach(batch);
        if (failed.length > 0) {
          this.log.error({ err, records: failed.length }, 'retriever execution history write failed; records kept for the next flush');
          this.pending = failed.concat(queued.slice(at + MAX_BATCH), this.pending);
          return;
        }
      }
    }
  }

  /** The records that could not be written for a reason other than their retriever being gone. */
  private async writeEach(batch: readonly ExecutionRow[]): Promise<ExecutionRow[]> {
    const failed: ExecutionRow[] = [];
    for (const row of batch) {
      try {
        await this.store.insertExecutions([row]);
      } catch (err) {
        if (isForeignKeyViolation(err)) continue; // the retriever was deleted: its history went with it
        failed.push(row);
      }
    }
    return failed;
  }
}

function isForeignKeyViolation(err: unknown): boolean {
  return typeof err === 'object' && err !== null && (err as { code?: unknown }).code === '23503';
}
