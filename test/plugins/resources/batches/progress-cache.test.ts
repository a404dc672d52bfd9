/**
 * Batch progress counts are kept while the batch row says nothing changed (ProgressCountCache): polling a
 * running batch does not read and count every chunk again, and any change the row records — a finished
 * chunk (updated_at, progress_at), a new run (generation), a cancel (status) — counts afresh.
 */
import { describe, expect, it } from 'vitest';
import { countProgress, ProgressCountCache } from '../../../../plugins/resources/batches/aggregate.js';
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
