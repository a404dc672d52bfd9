/**
 * A tier's aggregation (counters, status, standing errors, extractor jobs) over chunks of one run is counted
 * chunk by chunk, without the tier's ledger: it must say exactly what the ledger says. The reference here is
 * the same chunks plus an empty chunk of another run, which sends aggregateTier down the ledger path and
 * changes nothing else.
 */
import { describe, expect, it } from 'vitest';
import type { ProcessingError, ProcessingOutcome, RecordResult } from '../../../../kernel/processing.js';
import { aggregateTier, ChunkTallies, emptyTier } from '../../../../plugins/resources/batches/aggregate.js';
import type { ChunkRow } from '../../../../plugins/resources/batches/store.js';

const NOW = new Date(Date.UTC(2026, 0, 1, 0, 1));

function error(ids: string[], message = 'extractor broke'): ProcessingError {
  return {
    error_type: 'extraction', message, component: 'text_extractor', collection_id: null, collection_name: null, stage: 'extract',
    traceback: null, timestamp: NOW.toISOString(), affected_document_ids: ids, affected_count: ids.length, recovery_suggestion: null, metadata: {},
  };
}

function outcome(records: Record<string, RecordResult>, errors: ProcessingError[] = []): ProcessingOutcome {
  const written = Object.values(records).reduce((n, r) => n + r.documents, 0);
  return {
    source_documents_fetched: 0, documents_after_source_filter: 0, documents_missing_input_fields: 0, documents_submitted_to_engine: 0,
    documents_written: written, documents_skipped: 0, skipped_reasons: {}, records_failed: 0, records_canceled: 0, records,
    extractors: [{ extractor_type: 'text_extractor', documents_written: written, documents_skipped: 0, duration_ms: 12, errors } as unknown as ProcessingOutcome['extractors'][number]],
    errors,
    stages: { extract: { total_ms: 10, count: Object.keys(records).length, max_ms: 4, first_started_ms: 0, last_ended_ms: 10 } as unknown as ProcessingOutcome['stages'][string] },
  };
}

function chunk(collection: string, index: number, status: ChunkRow['status'], ids: string[], out: ProcessingOutcome | null, generation = 0): ChunkRow {
  return {
    batch_id: 'bat_1', generation, tier: 0, collection_id: collection, chunk_index: index, record_ids: ids, status, task_id: null, outcome: out,
    started_at: new Date(Date.UTC(2026, 0, 1)), completed_at: status === 'PENDING' ? null : NOW,
  };
}

const r = (result: RecordResult['result'], documents = 0, extra: Partial<RecordResult> = {}): RecordResult =>
  ({ result, documents, submitted: result !== 'filtered' && result !== 'gone', ...extra }) as RecordResult;

/** aggregateTier down the ledger path: an empty chunk of another run holds no record and no outcome. */
const byLedger = (chunks: ChunkRow[]) => aggregateTier(emptyTier(0, ['col_a', 'col_b'], [], null), [...chunks, chunk('col_a', 99, 'PENDING', [], null, 7)], NOW);
const chunkByChunk = (chunks: ChunkRow[]) => aggregateTier(emptyTier(0, ['col_a', 'col_b'], [], null), chunks, NOW);

describe('tier aggregation over one run', () => {
  it('counts every state, skip reason and standing error as the ledger does, in two collections', () => {
    const chunks = [
      chunk('col_a', 0, 'COMPLETED', ['a', 'b', 'c', 'd'], outcome(
        { a: r('written', 3), b: r('skipped', 0, { skip_reason: 'unsupported_type' } as Partial<RecordResult>), c: r('failed'), d: r('gone') },
        // 'x' is not this chunk's record: not a standing failure of it.
        [error(['c', 'x'])],
      )),
      chunk('col_a', 1, 'COMPLETED', ['e', 'f', 'g'], outcome({ e: r('filtered'), f: r('skipped'), g: r('written', 1) })),
      chunk('col_b', 0, 'COMPLETED', ['a', 'b'], outcome({ a: r('written', 2), b: r('failed') }, [error(['b'], 'model missing')])),
      chunk('col_b', 1, 'FAILED', ['e', 'f'], outcome({}, [error(['e', 'f'], 'gave up after 5 attempts')])),
    ];
    const fast = chunkByChunk(chunks);
    expect(fast).toEqual(byLedger(chunks));
    expect(fast).toMatchObject({
      status: 'COMPLETED_WITH_ERRORS', source_documents_fetched: 10, documents_after_source_filter: 9, documents_written: 6,
      documents_skipped: 2, skipped_reasons: { unsupported_type: 1, no_input_field: 1 }, documents_missing_input_fields: 1,
    });
    expect(fast.errors.flatMap((e) => e.affected_document_ids).sort()).toEqual(['b', 'c', 'e', 'f']);
  });

  it('gives the same status while records wait, after a cancel, and when nothing was written', () => {
    const running = [
      chunk('col_a', 0, 'COMPLETED', ['a'], outcome({ a: r('written', 1) })),
      chunk('col_a', 1, 'PENDING', ['b', 'c'], null),
    ];
    expect(chunkByChunk(running)).toEqual(byLedger(running));
    expect(chunkByChunk(running).status).toBe('IN_PROGRESS');

    const canceled = [
      chunk('col_a', 0, 'CANCELED', ['a', 'b'], outcome({ a: r('written', 1), b: r('canceled') })),
      chunk('col_a', 1, 'SKIPPED', ['c'], null),
    ];
    expect(chunkByChunk(canceled)).toEqual(byLedger(canceled));
    expect(chunkByChunk(canceled).status).toBe('CANCELED');

    const failed = [chunk('col_a', 0, 'FAILED', ['a', 'b'], outcome({}, [error(['a', 'b'])]))];
    expect(chunkByChunk(failed)).toEqual(byLedger(failed));
    expect(chunkByChunk(failed).status).toBe('FAILED');
  });

  it('reads outcomes stored before the per-record results the same way', () => {
    const legacy = [
      chunk('col_a', 0, 'COMPLETED', ['l', 'm', 'n'], { ...outcome({}, [error(['m'])]), documents_written: 4 }),
      chunk('col_a', 1, 'COMPLETED', ['o'], outcome({ o: r('written', 2) })),
    ];
    expect(chunkByChunk(legacy)).toEqual(byLedger(legacy));
    expect(chunkByChunk(legacy)).toMatchObject({ documents_written: 6, status: 'COMPLETED_WITH_ERRORS' });
  });

  it('still lets a later run replace a record once (the ledger path)', () => {
    const retried = [
      chunk('col_a', 0, 'COMPLETED', ['a', 'b'], outcome({ a: r('failed'), b: r('written', 1) }, [error(['a'])])),
      chunk('col_a', 0, 'COMPLETED', ['a'], outcome({ a: r('written', 2) }), 1),
    ];
    expect(chunkByChunk(retried)).toMatchObject({ status: 'COMPLETED', documents_written: 3, source_documents_fetched: 2, errors: [] });
  });
});

describe('chunk tallies kept between chunk ends', () => {
  it('aggregates as counting afresh does while chunks end one by one, counting each chunk again only when it changed', () => {
    const tallies = new ChunkTallies();
    const ids = [['a', 'b'], ['c', 'd'], ['e']];
    const ended = [
      outcome({ a: r('written', 2), b: r('skipped', 0, { skip_reason: 'unsupported_type' } as Partial<RecordResult>) }),
      outcome({ c: r('failed'), d: r('written', 1) }, [error(['c'])]),
      outcome({ e: r('filtered') }),
    ];
    // The store hands out the same record lists while a chunk is known: the chunks below share them.
    let chunks = ids.map((records, i) => chunk('col_a', i, 'PENDING', records, null));
    const pending = tallies.of(chunks[0]!);
    for (let i = 0; i < ids.length; i++) {
      chunks = chunks.map((c, k) => (k === i ? chunk('col_a', k, 'COMPLETED', ids[k]!, ended[k]!) : { ...c }));
      expect(aggregateTier(emptyTier(0, ['col_a', 'col_b'], [], null), chunks, NOW, tallies)).toEqual(chunkByChunk(chunks));
    }
    expect(tallies.of(chunks[0]!)).not.toBe(pending);
    expect(tallies.of({ ...chunks[0]! })).toBe(tallies.of(chunks[0]!));
    expect(aggregateTier(emptyTier(0, ['col_a'], [], null), chunks, NOW, tallies)).toMatchObject({
      documents_written: 3, documents_skipped: 1, skipped_reasons: { unsupported_type: 1 },
    });
  });
});
