/**
 * Full-text search: the analyzer, the query language, BM25 and the TextIndex (bound as `TextIndex` in the
 * container). `bm25Search` is the one call a stage needs to run a BM25 search, alone (`text_search`) or
 * as one of the searches `feature_search` fuses with vector results.
 */
import type { Container } from 'inversify';
import { TextIndex as TextIndexToken, resolve } from '../tokens.js';
import type { TextHit, TextSearchRequest } from './text-index.js';

export { analyzeField, normalize, terms, tokenize, MAX_TERM_LENGTH, MAX_TERMS_PER_FIELD } from './analyzer.js';
export { DEFAULT_BM25, idf, termScore, type Bm25Parameters } from './bm25.js';
export { parseQuery, MAX_CLAUSES, MAX_PHRASE_TERMS, MAX_QUERY_CHARS, type Clause, type Occur } from './query.js';
export { documentFieldResolver, textFieldsOf } from './documents.js';
export {
  SqlTextIndex,
  textIndexMigrations,
  MAX_PHRASE_CANDIDATES,
  MAX_PREFIX_EXPANSIONS,
  MAX_PREFIX_SCAN,
  MAX_SEARCH_LIMIT,
  type FieldStatistics,
  type TextDocument,
  type TextHit,
  type TextIndex,
  type TextWriteInStatement,
  type TextSearchRequest,
} from './text-index.js';

/**
 * A BM25 search over the given collections, best first: `{document_id, collection_id, score}` with
 * scores ≥ 0 (not normalized; fuse by rank (rrf) or normalize (dbsf) before mixing with vector scores).
 * `ctx` is the StageContext (only its container is used). For a user-scoped key pass
 * `principalId: ctx.principalId`; `filter` (pre_filters) and `documentIds` narrow it further, all
 * applied before `limit` is cut.
 */
export function bm25Search(ctx: { container: Container }, request: TextSearchRequest): Promise<TextHit[]> {
  return resolve(ctx.container, TextIndexToken).search(request);
}
