/**
 * Batch progress counts are kept while the batch row says nothing changed (ProgressCountCache): polling a
 * running batch does not read and count every chunk again, and any change the row records — a finished
 * chunk (updated_at, progress_at), a new run (generation), a cancel (status) — counts afresh.
 */
import { describe, expect, it } from 'vitest';
import { ChunkCounts, countProgress, ProgressCountCache } from '../../../../plugins/resources/batches/aggregate.js';
import type { BatchRow, ChunkRow } from '../../../../plugins/resources/batches/store.js';

const at = (ms: number) => new Date(Date.UTC(2026, 0, 1) + ms);

function chunk(index: number, status: ChunkRow['status'], records: string[]): ChunkRow {
  return {
    batch_id: 'bat_1', generation: 0, tier: 0, collection_id: 'col_1', chunk_index: index, record_ids: records, status, task_id: null,
    outcome: status === 'COMPLETED'
      ? ({ records: Object.fromEntries(records.map((id) => [id, { result: 'written', documents: 1, submitted: true }])), errors: [] } as unknown as ChunkRow['outcome'])
      : null,
    started_at: null, completed_at: null,
  };
}

const batch = (changes: Partial<BatchRow> = {}): BatchRow =>
  ({ batch_id: 'bat_1', generation: 0, status: 'IN_PROGRESS', updated_at: at(1), progress_at: at(1), ...changes }) as BatchRow;

describe('batch progress counts', () => {
  it('reads the chunks once while the row is unchanged, and again after any change the row records', async () => {
    const cache = new ProgressCountCache();
    let chunks = [chunk(0, 'COMPLETED', ['a', 'b']), chunk(1, 'PENDING', ['c'])];
    let reads = 0;
    const load = async () => {
      reads += 1;
      return chunks;
    };
    expect(await cache.counts(batch(), load)).toMatchObject({ total: 3, done: 2, written: 2 });
    expect(await cache.counts(batch(), load)).toMatchObject({ total: 3, done: 2 });
    expect(reads).toBe(1);

    chunks = [chunk(0, 'COMPLETED', ['a', 'b']), chunk(1, 'COMPLETED', ['c'])];
    const finished = await cache.counts(batch({ updated_at: at(2), progress_at: at(2) }), load);
    expect(finished).toEqual(countProgress(batch(), chunks));
    expect(finished).toMatchObject({ total: 3, done: 3, written: 3 });
    expect(reads).toBe(2);

    await cache.counts(batch({ updated_at: at(2), progress_at: at(2), status: 'COMPLETED' }), load);
    await cache.counts(batch({ updated_at: at(2), progress_at: at(2), status: 'COMPLETED', generation: 1 }), load);
    expect(reads).toBe(4);
  });
});

describe('batch progress counted chunk by chunk', () => {
  const withResults = (index: number, results: Record<string, { result: string; documents?: number }>, generation = 0, collection = 'col_1'): ChunkRow => ({
    ...chunk(index, 'COMPLETED', Object.keys(results)),
    generation,
    collection_id: collection,
    outcome: {
      records: Object.fromEntries(Object.entries(results).map(([id, r]) => [id, { result: r.result, documents: r.documents ?? 0, submitted: true }])),
      errors: [],
    } as unknown as ChunkRow['outcome'],
  });

  it('counts every state of a one-collection, one-run tier as the ledger does', () => {
    const chunks: ChunkRow[] = [
      withResults(0, { a: { result: 'written', documents: 3 }, b: { result: 'skipped' }, c: { result: 'failed' }, d: { result: 'gone' } }),
      withResults(1, { e: { result: 'filtered' }, f: { result: 'canceled' }, g: { result: 'written', documents: 1 } }),
      // A chunk that failed on its last attempt: every record failed.
      { ...chunk(2, 'FAILED', ['h', 'i']), outcome: { records: {}, errors: [] } as unknown as ChunkRow['outcome'] },
      chunk(3, 'PENDING', ['j']),
      { ...chunk(4, 'SKIPPED', ['k']), outcome: null },
      // An outcome from before the ledger: its failures from the errors, the documents on the first success.
      {
        ...chunk(5, 'COMPLETED', ['l', 'm', 'n']),
        outcome: { records: {}, documents_written: 4, errors: [{ affected_document_ids: ['m'] }] } as unknown as ChunkRow['outcome'],
      },
    ];
    expect(countProgress(batch(), chunks)).toEqual({ total: 14, done: 11, doneThisRun: 11, failed: 5, skipped: 1, written: 8 });
    // The same records as seen from a later run: done, but none of them by it.
    expect(countProgress(batch({ generation: 1 }), chunks)).toMatchObject({ done: 11, doneThisRun: 0 });
  });

  it('lets a later run replace a record once, and counts a record read by two collections once', () => {
    const retried = [
      withResults(0, { a: { result: 'failed' }, b: { result: 'written', documents: 1 } }),
      withResults(0, { a: { result: 'written', documents: 2 } }, 1),
    ];
    expect(countProgress(batch({ generation: 1 }), retried)).toEqual({ total: 2, done: 2, doneThisRun: 1, failed: 0, skipped: 0, written: 3 });
    const twoCollections = [
      withResults(0, { a: { result: 'written', documents: 1 }, b: { result: 'written', documents: 1 } }),
      withResults(0, { a: { result: 'failed' }, b: { result: 'skipped' } }, 0, 'col_2'),
    ];
    expect(countProgress(batch(), twoCollections)).toEqual({ total: 2, done: 2, doneThisRun: 2, failed: 1, skipped: 0, written: 2 });
  });
});

describe('chunk counts kept between polls', () => {
  it('counts a chunk again only when its status or outcome changed, and adds up as counting afresh does', () => {
    const kept = new ChunkCounts();
    const records = ['a', 'b', 'c'];
    const pending = chunk(0, 'PENDING', records);
    const first = kept.of(pending);
    expect(first).toEqual({ total: 3, done: 0, failed: 0, skipped: 0, written: 0 });
    // The store hands out the same record list and outcome for a chunk it already read: nothing is counted again.
    expect(kept.of({ ...pending })).toBe(first);

    const finished = { ...chunk(0, 'COMPLETED', records), record_ids: records };
    const counted = kept.of(finished);
    expect(counted).not.toBe(first);
    expect(counted).toEqual({ total: 3, done: 3, failed: 0, skipped: 0, written: 3 });
    expect(kept.of({ ...finished })).toBe(counted);
    // The same records and status with another outcome (a run that ended again): counted afresh.
    const rerun = { ...finished, outcome: { records: { a: { result: 'failed', documents: 0, submitted: true } }, errors: [] } as unknown as ChunkRow['outcome'] };
    expect(kept.of(rerun)).toMatchObject({ total: 3, done: 1, failed: 1 });

    const chunks = [finished, chunk(1, 'PENDING', ['d']), { ...chunk(2, 'COMPLETED', ['e']), generation: 0 }];
    expect(countProgress(batch(), chunks, kept)).toEqual(countProgress(batch(), chunks));
    expect(countProgress(batch({ generation: 1 }), chunks, kept)).toEqual(countProgress(batch({ generation: 1 }), chunks));
  });
});
