/**
 * Pages over an execution's final documents: `offset` (`limit`, `offset`) or `page_number` (`page_size`,
 * `page_number` from 1). Both answer `{total, limit, offset, has_next, has_previous}`; page numbers also
 * say which page this is and how many there are.
 */
import type { StageDocument } from '../plugins.js';

export interface PaginationRequest {
  method?: 'offset' | 'page_number';
  limit?: number;
  offset?: number;
  page_number?: number;
  page_size?: number;
}

export interface PaginationResult {
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

export const DEFAULT_PAGE_SIZE = 10;

export function paginate(docs: readonly StageDocument[], request: PaginationRequest = {}): { page: StageDocument[]; pagination: PaginationResult } {
  const method = request.method ?? (request.page_number !== undefined ? 'page_number' : 'offset');
  const limit = (method === 'page_number' ? (request.page_size ?? request.limit) : (request.limit ?? request.page_size)) ?? DEFAULT_PAGE_SIZE;
  const offset = method === 'page_number' ? ((request.page_number ?? 1) - 1) * limit : (request.offset ?? 0);
  const total = docs.length;
  const pagination: PaginationResult = { method, total, limit, offset, has_next: offset + limit < total, has_previous: offset > 0 };
  if (method === 'page_number') {
    pagination.page_number = request.page_number ?? 1;
    pagination.page_size = limit;
    pagination.total_pages = Math.ceil(total / limit);
  }
  return { page: docs.slice(offset, offset + limit), pagination };
}
