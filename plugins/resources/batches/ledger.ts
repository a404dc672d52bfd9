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

/** One record's result in a chunk, as `visitResults` reports it. */
export interface RecordVisit {
  state: LedgerState;
  documents: number;
  submitted: boolean;
  skip_reason?: RecordResult['skip_reason'];
}

/**
 * Calls `visit` with each of the chunk's records and its result in that chunk, in record order; the
 * result object is reused from call to call (read it, do not keep it), so counting a batch of 10,000
 * records allocates nothing per record.
 */
export function visitResults(chunk: ChunkRow, visit: (id: string, result: Readonly<RecordVisit>) => void): void {
  const result: RecordVisit = { state: 'unrun', documents: 0, submitted: false };
  const each = (state: LedgerState, submitted: boolean) => {
    result.state = state;
    result.submitted = submitted;
    result.documents = 0;
    delete result.skip_reason;
    for (const id of chunk.record_ids) visit(id, result);
  };
  if (chunk.status === 'PENDING') return each('pending', false);
  if (chunk.status === 'SKIPPED' || !chunk.outcome) return each('unrun', false);
  if (chunk.status === 'FAILED') return each('failed', true);
  const outcome = chunk.outcome;
  if (outcome.records && Object.keys(outcome.records).length > 0) {
    for (const id of chunk.record_ids) {
      const r = outcome.records[id];
      result.state = r ? r.result : 'unrun';
      result.documents = r ? r.documents : 0;
      result.submitted = r ? r.submitted : false;
      if (r?.skip_reason) result.skip_reason = r.skip_reason;
      else delete result.skip_reason;
      visit(id, result);
    }
    return;
  }
  // Outcomes stored before the ledger existed: failures from the errors, the documents on the first success.
  const failed = new Set(outcome.errors.flatMap((e) => e.affected_document_ids));
  let documents = outcome.documents_written;
  delete result.skip_reason;
  for (const id of chunk.record_ids) {
    result.submitted = true;
    if (failed.has(id)) {
      result.state = 'failed';
      result.documents = 0;
    } else {
      result.state = 'written';
      result.documents = documents;
      documents = 0;
    }
    visit(id, result);
  }
}

function resultsOf(chunk: ChunkRow): Array<[string, LedgerEntry]> {
  const out: Array<[string, LedgerEntry]> = [];
  visitResults(chunk, (id, r) => out.push([id, { ...r, chunk }]));
  return out;
}
