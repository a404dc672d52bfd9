/**
 * An in-process copy of one collection's postings, for scoring. The database stays the source of truth:
 * a copy is loaded on a collection's first search, and before every search it catches up with the
 * collection's change log (`text_changes`: which documents each write touched), so a write committed by
 * any process is seen by the next search of every process. Scoring a common word over 100,000 documents
 * is a loop over an array here, where the same aggregate in SQL costs tens of milliseconds on PGlite.
 *
 * Documents get increasing internal numbers: a re-indexed document gets a new one and its old number
 * is marked dead (skipped when scoring, its statistics subtracted at once). Posting lists therefore stay
 * sorted by internal number, which phrase matching uses to look documents up by binary search.
 */

import { analyzeField } from './analyzer.js';

/** One term of one field of a document, with where it occurs (tf = positions.length). */
export interface PostingRow {
  field: string;
  term: string;
  positions: number[];
}

/** Separators of the compact form (never in terms, document ids or the field names we index). */
const UNIT = '\u001f';
const RECORD = '\u001e';
export const DOCUMENT_ID = '\u001d';
export const DOCUMENT = '\u001c';

/**
 * A document's postings as stored (`text_documents.postings`): `field UNIT term UNIT p1,p2,…` records
 * joined by RECORD. Empty when the document has no text to index.
 */
export function encodePostings(fields: Record<string, string>): string {
  const records: string[] = [];
  for (const [field, text] of Object.entries(fields)) {
    // Control characters in a field name would collide with the separators.
    if (typeof text !== 'string' || /[\u0000-\u001f]/u.test(field)) continue;
    for (const [term, positions] of analyzeField(text).terms) records.push(`${field}${UNIT}${term}${UNIT}${positions.join(',')}`);
  }
  return records.join(RECORD);
}

export function decodePostings(encoded: string): PostingRow[] {
  if (!encoded) return [];
  return encoded.split(RECORD).map((record) => {
    const [field, term, positions] = record.split(UNIT);
    return { field: field!, term: term!, positions: positions!.split(',').map(Number) };
  });
}

export class TermPostings {
  /** Internal document numbers, increasing. */
  readonly docs: number[] = [];
  readonly tfs: number[] = [];
  /** positions of entry i: positions[starts[i] .. starts[i] + tfs[i]) */
  readonly starts: number[] = [];
  readonly positions: number[] = [];
  /** Live documents containing the term. */
  df = 0;

  /** Entry index of an internal document number, or -1. */
  find(doc: number): number {
    let lo = 0;
    let hi = this.docs.length - 1;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      const value = this.docs[mid]!;
      if (value === doc) return mid;
      if (value < doc) lo = mid + 1;
      else hi = mid - 1;
    }
    return -1;
  }
}

export class FieldPostings {
  readonly terms = new Map<string, TermPostings>();
  /** Field length by internal document number (0 where the document has no such field). */
  lengths = new Int32Array(1024);
  documentCount = 0;
  totalLength = 0;
  private sorted: string[] | null = null;

  get averageLength(): number {
    return this.documentCount > 0 ? this.totalLength / this.documentCount : 0;
  }

  setLength(doc: number, length: number): void {
    if (doc >= this.lengths.length) {
      const grown = new Int32Array(Math.max(doc + 1, this.lengths.length * 2));
      grown.set(this.lengths);
      this.lengths = grown;
    }
    this.lengths[doc] = length;
  }

  list(term: string, create: boolean): TermPostings | undefined {
    let list = this.terms.get(term);
    if (!list && create) {
      list = new TermPostings();
      this.terms.set(term, list);
      this.sorted = null;
    }
    return list;
  }

  /** Terms in code point order (prefix expansion), rebuilt after new terms arrive. */
  sortedTerms(): string[] {
    if (!this.sorted) this.sorted = [...this.terms.keys()].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
    return this.sorted;
  }
}

interface DocumentEntry {
  documentId: string;
  alive: boolean;
  /** What the document added, so removing it can subtract its statistics. */
  fields: Array<{ field: FieldPostings; length: number; lists: TermPostings[] }>;
}

export class CollectionPostings {
  readonly fields = new Map<string, FieldPostings>();
  readonly documents: DocumentEntry[] = [];
  /** 1 for a live internal document number (scoring reads this, not the entries). */
  alive = new Uint8Array(1024);
  private readonly byId = new Map<string, number>();
  dead = 0;
  /** Scratch space scoring reuses (scoring runs synchronously, one query at a time per process). */
  scratch = { scores: new Float64Array(0), masks: new Uint32Array(0), seen: new Uint8Array(0), excluded: new Uint8Array(0), touched: new Int32Array(0) };

  constructor(
    readonly collectionId: string,
    /** The change-log version this copy reflects. */
    public version: number,
  ) {}

  get size(): number {
    return this.byId.size;
  }

  isAlive(doc: number): boolean {
    return this.alive[doc] === 1;
  }

  /** Zeroed scratch arrays at least as long as the document numbers (callers re-zero what they touched). */
  scratchFor(size: number) {
    if (this.scratch.scores.length < size) {
      const n = Math.max(size, this.scratch.scores.length * 2, 1024);
      this.scratch = {
        scores: new Float64Array(n),
        masks: new Uint32Array(n),
        seen: new Uint8Array(n),
        excluded: new Uint8Array(n),
        touched: new Int32Array(n),
      };
    }
    return this.scratch;
  }

  documentId(doc: number): string {
    return this.documents[doc]!.documentId;
  }

  internalId(documentId: string): number | undefined {
    return this.byId.get(documentId);
  }

  /** Replaces a document's postings (rows of one document; none removes it). */
  put(documentId: string, rows: readonly PostingRow[]): void {
    this.remove(documentId);
    if (rows.length === 0) return;
    const doc = this.documents.length;
    const entry: DocumentEntry = { documentId, alive: true, fields: [] };
    this.documents.push(entry);
    this.byId.set(documentId, doc);
    if (doc >= this.alive.length) {
      const grown = new Uint8Array(this.alive.length * 2);
      grown.set(this.alive);
      this.alive = grown;
    }
    this.alive[doc] = 1;
    const lengths = new Map<string, number>();
    for (const row of rows) lengths.set(row.field, (lengths.get(row.field) ?? 0) + row.positions.length);
    const byField = new Map<string, { field: FieldPostings; length: number; lists: TermPostings[] }>();
    for (const row of rows) {
      let slot = byField.get(row.field);
      if (!slot) {
        let field = this.fields.get(row.field);
        if (!field) {
          field = new FieldPostings();
          this.fields.set(row.field, field);
        }
        slot = { field, length: lengths.get(row.field)!, lists: [] };
        byField.set(row.field, slot);
        field.setLength(doc, slot.length);
        field.documentCount += 1;
        field.totalLength += slot.length;
      }
      const list = slot.field.list(row.term, true)!;
      const positions = row.positions;
      list.docs.push(doc);
      list.tfs.push(positions.length);
      list.starts.push(list.positions.length);
      for (const p of positions) list.positions.push(p);
      list.df += 1;
      slot.lists.push(list);
    }
    entry.fields = [...byField.values()];
  }

  remove(documentId: string): void {
    const doc = this.byId.get(documentId);
    if (doc === undefined) return;
    this.byId.delete(documentId);
    const entry = this.documents[doc]!;
    entry.alive = false;
    this.alive[doc] = 0;
    this.dead += 1;
    for (const { field, length, lists } of entry.fields) {
      field.documentCount -= 1;
      field.totalLength -= length;
      for (const list of lists) list.df -= 1;
    }
    entry.fields = [];
  }

  /** Dead entries outnumber live ones: time to load a fresh copy. */
  get wasteful(): boolean {
    return this.dead > 10_000 && this.dead > this.byId.size;
  }
}
