/**
 * The batch's record ledger: for every (tier, collection, source record), the result of its latest run.
 * A retry runs again only the records whose latest result is not final, in a new generation; a later
 * generation's result replaces an earlier one. Counters, errors, statuses and progress are all read from
 * the ledger, so they describe the batch as a whole (every run), and never count a record twice.
 */
import type { RecordResult } from '../../../kernel/processing.js';
import type { ChunkRow } from './store.js';

/** A record's state in one collection: its last run's result, or where its chunk is. */
export type LedgerState = RecordResult['result'] | 'pending' | 'unrun';

export interface LedgerEntry {
  state: LedgerState;
  documents: number;
  submitted: boolean;
  skip_reason?: RecordResult['skip_reason'];
  /** The chunk that gave this entry (its errors explain a failure). */
  chunk: ChunkRow;
}

/** Results that are final: a retry does not run such a record again. */
export const SETTLED: ReadonlySet<LedgerState> = new Set(['written', 'skipped', 'filtered']);

/** collection id → record id → latest entry, for the chunks of one tier (any generation). */
export type TierLedger = Map<string, Map<string, LedgerEntry>>;

export function tierLedger(chunks: readonly ChunkRow[]): TierLedger {
  const ledger: TierLedger = new Map();
  const ordered = [...chunks].sort((a, b) => a.generation - b.generation || a.chunk_index - b.chunk_index);
  for (const chunk of ordered) {
    let records = ledger.get(chunk.collection_id);
    if (!records) ledger.set(chunk.collection_id, (records = new Map()));
    for (const [id, entry] of resultsOf(chunk)) records.set(id, entry);
  }
  return ledger;
}

/** The records of one collection whose latest result is final. */
export function settledRecords(ledger: TierLedger, collectionId: string): Set<string> {
  const settled = new Set<string>();
  for (const [id, entry] of ledger.get(collectionId) ?? []) if (SETTLED.has(entry.state)) settled.add(id);
  return settled;
}

export function* entriesOf(ledger: TierLedger): Iterable<[string, string, LedgerEntry]> {
  for (const [collectionId, records] of ledger) for (const [id, entry] of records) yield [collectionId, id, entry];
}

function resultsOf(chunk: ChunkRow): Array<[string, LedgerEntry]> {
  const entry = (state: LedgerState, extra: Partial<LedgerEntry> = {}): LedgerEntry => ({ state, documents: 0, submitted: false, chunk, ...extra });
  if (chunk.status === 'PENDING') return chunk.record_ids.map((id) => [id, entry('pending')]);
  if (chunk.status === 'SKIPPED' || !chunk.outcome) return chunk.record_ids.map((id) => [id, entry('unrun')]);
  if (chunk.status === 'FAILED') return chunk.record_ids.map((id) => [id, entry('failed', { submitted: true })]);
  const outcome = chunk.outcome;
  if (outcome.records && Object.keys(outcome.records).length > 0) {
    return chunk.record_ids.map((id) => {
      const r = outcome.records[id];
      return [id, r ? entry(r.result, { documents: r.documents, submitted: r.submitted, ...(r.skip_reason ? { skip_reason: r.skip_reason } : {}) }) : entry('unrun')];
    });
  }
  // Outcomes stored before the ledger existed: failures from the errors, the documents on the first success.
  const failed = new Set(outcome.errors.flatMap((e) => e.affected_document_ids));
  let documents = outcome.documents_written;
  return chunk.record_ids.map((id) => {
    if (failed.has(id)) return [id, entry('failed', { submitted: true })];
    const e = entry('written', { documents, submitted: true });
    documents = 0;
    return [id, e];
  });
}
