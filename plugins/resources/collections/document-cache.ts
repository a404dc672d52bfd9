/**
 * Documents retrieval has read, kept in memory while this process is the database's only writer (the
 * embedded default; kernel/db/local-read-cache.ts): a search's hits are then served without a database
 * round trip. Every committed change to documents goes through `DocumentChanges.changed`, which forgets
 * the documents it names before the writer answers.
 */
import type { DatabaseNotices } from '../../../kernel/db/database.js';
import { deepFreeze, LocalReadCache } from '../../../kernel/db/local-read-cache.js';
import type { DocumentRow } from './document-store.js';

/** Documents kept at most: the hits of recent searches, not the collection. */
const MAX_DOCUMENTS = 20_000;

export class DocumentReadCache {
  private readonly rows: LocalReadCache<DocumentRow>;

  constructor(onlyWriter: boolean, notices?: DatabaseNotices) {
    this.rows = new LocalReadCache({ enabled: onlyWriter, maxEntries: MAX_DOCUMENTS, shared: { name: 'documents', notices } });
  }

  get enabled(): boolean {
    return this.rows.enabled;
  }

  /** The cached row, or undefined. The row is shared: never change it. */
  get(documentId: string): DocumentRow | undefined {
    return this.rows.get(documentId);
  }

  /** The generation to pass to `keep` for rows read from the database from now on. */
  mark(): number {
    return this.rows.mark();
  }

  keep(generation: number, row: DocumentRow): void {
    this.rows.keep(generation, row.document_id, deepFreeze(row));
  }

  forget(documentIds: readonly string[]): void {
    this.rows.forget(documentIds);
  }

  forgetAll(): void {
    this.rows.forgetAll();
  }
}
