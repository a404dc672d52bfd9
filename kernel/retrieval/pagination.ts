/**
 * Pages over an execution's final documents, four ways:
 * - `offset` (`limit`, `offset`) and `page_number` (`page_size`, `page_number` from 1) answer
 *   `{total, limit, offset, has_next, has_previous}`; page numbers also say which page this is and how many.
 * - `cursor` answers `{cursor, has_next, page_size}`. The first page's execution records its whole ranking;
 *   later pages are read from that recorded ranking (a snapshot), so documents written or deleted between
 *   requests never duplicate or skip one that stays.
 * - `keyset` answers `{next_cursor, has_next}`. Every page re-runs the pipeline (live results) and continues
 *   after the previous page's last documents (their ids, then their (score, document_id) key when they are
 *   all gone). Stable while a document's place in the order does not depend on the others (a sort on a field,
 *   a vector distance); corpus-relative scores (BM25 idf, rank fusion) can move documents across the key.
 * The cursor strings themselves are made and checked by the caller (they bind the execution to its caller);
 * this file only says where the next page starts.
 */
import type { StageDocument } from '../plugins.js';

export type PaginationMethod = 'offset' | 'page_number' | 'cursor' | 'keyset';

export interface PaginationRequest {
  method?: PaginationMethod;
  limit?: number;
  offset?: number;
  page_number?: number;
  page_size?: number;
  /** `cursor` / `keyset`: the cursor a previous page returned (absent for the first page). */
  cursor?: string;
}

export interface OffsetPagination {
  method: 'offset' | 'page_number';
  total: number;
  limit: number;
  offset: number;
  has_next: boolean;
  has_previous: boolean;
  page_number?: number;
  page_size?: number;
  total_pages?: number;
}

export interface CursorPagination {
  method: 'cursor';
  /** Pass it back (with the same inputs) for the next page; null on the last page. */
  cursor: string | null;
  has_next: boolean;
  page_size: number;
}

export interface KeysetPagination {
  method: 'keyset';
  next_cursor: string | null;
  has_next: boolean;
}

export type PaginationResult = OffsetPagination | CursorPagination | KeysetPagination;

/** Where a keyset page ended: its last documents' ids (newest last) and the very last one's ranking key. */
export interface KeysetPosition {
  ids: string[];
  document_id: string;
  score: number | null;
  /** How many documents the pages so far served (the fallback when neither ids nor scores place the key). */
  served: number;
}

/** What the caller needs to make the next page's cursor. */
export type PageContinuation = { method: 'cursor'; offset: number; page_size: number } | { method: 'keyset'; after: KeysetPosition; page_size: number };

export const DEFAULT_PAGE_SIZE = 10;
/** Ids a keyset cursor remembers from the end of its page (so deleting the last one does not lose the place). */
export const KEYSET_MEMORY = 20;

export function pageSizeOf(request: PaginationRequest): number {
  const method = methodOf(request);
  return (method === 'page_number' ? (request.page_size ?? request.limit) : (request.limit ?? request.page_size)) ?? DEFAULT_PAGE_SIZE;
}

function methodOf(request: PaginationRequest): PaginationMethod {
  return request.method ?? (request.page_number !== undefined ? 'page_number' : 'offset');
}

export function paginate(
  docs: readonly StageDocument[],
  request: PaginationRequest = {},
  keysetAfter?: KeysetPosition,
): { page: StageDocument[]; pagination: PaginationResult; continuation: PageContinuation | null } {
  const method = methodOf(request);
  const limit = pageSizeOf(request);
  if (method === 'cursor') {
    // The first page of a snapshot: later ones are served from the recorded ranking, not by running again.
    const page = docs.slice(0, limit);
    const hasNext = limit < docs.length;
    return {
      page,
      pagination: { method, cursor: null, has_next: hasNext, page_size: limit },
      continuation: hasNext ? { method, offset: limit, page_size: limit } : null,
    };
  }
  if (method === 'keyset') {
    const start = keysetAfter ? keysetStart(docs, keysetAfter) : 0;
    const page = docs.slice(start, start + limit);
    const hasNext = start + limit < docs.length;
    const last = page.at(-1);
    const served = (keysetAfter?.served ?? 0) + page.length;
    return {
      page,
      pagination: { method, next_cursor: null, has_next: hasNext },
      continuation:
        hasNext && last
          ? {
              method,
              page_size: limit,
              after: { ids: page.slice(-KEYSET_MEMORY).map((d) => d.document_id), document_id: last.document_id, score: scoreOf(last), served },
            }
          : null,
    };
  }
  const offset = method === 'page_number' ? ((request.page_number ?? 1) - 1) * limit : (request.offset ?? 0);
  const total = docs.length;
  const pagination: OffsetPagination = { method, total, limit, offset, has_next: offset + limit < total, has_previous: offset > 0 };
  if (method === 'page_number') {
    pagination.page_number = request.page_number ?? 1;
    pagination.page_size = limit;
    pagination.total_pages = Math.ceil(total / limit);
  }
  return { page: docs.slice(offset, offset + limit), pagination, continuation: null };
}

function scoreOf(doc: StageDocument): number | null {
  return typeof doc.score === 'number' && Number.isFinite(doc.score) ? doc.score : null;
}

/**
 * Where the page after `after` starts in a fresh ranking: right after the latest of the previous page's
 * documents still there; when all of them are gone, at the first document ranked after the last key by
 * (score descending, document_id ascending); without a score, after as many documents as were served.
 */
export function keysetStart(docs: readonly StageDocument[], after: KeysetPosition): number {
  const position = new Map<string, number>();
  docs.forEach((d, i) => {
    if (!position.has(d.document_id)) position.set(d.document_id, i);
  });
  for (let i = after.ids.length - 1; i >= 0; i--) {
    const at = position.get(after.ids[i]!);
    if (at !== undefined) return at + 1;
  }
  if (after.score !== null) {
    const key = after.score;
    const next = docs.findIndex((d) => {
      const score = scoreOf(d);
      return score !== null && (score < key || (score === key && d.document_id > after.document_id));
    });
    return next < 0 ? docs.length : next;
  }
  return Math.min(after.served, docs.length);
}
