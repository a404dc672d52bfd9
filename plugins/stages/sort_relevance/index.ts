/**
 * sort_relevance: orders documents by their score. Documents without a finite score come last whatever the
 * direction; equal scores are ordered by document_id, so the order never depends on how the input arrived
 * (pages stay stable across executions).
 */
import { defineStage, type StageDocument } from '../../../kernel/plugins.js';

export interface SortRelevanceParameters {
  direction?: 'asc' | 'desc';
}

const scored = (doc: StageDocument): boolean => typeof doc.score === 'number' && Number.isFinite(doc.score);

export default defineStage<SortRelevanceParameters>({
  id: 'sort_relevance',
  version: '1.0',
  type: 'sort',
  description:
    'Sorts documents by score (`direction` desc by default). Documents without a score come last; equal scores are ordered by document_id.',
  parameters: {
    type: 'object',
    additionalProperties: false,
    properties: {
      direction: { enum: ['asc', 'desc'], default: 'desc' },
    },
  },
  // Ties are ordered by document_id: the output order never depends on the input order (total).
  optimizer: {
    sort: (params) => ({ key: `relevance:${params.direction ?? 'desc'}`, field: 'relevance', total: true }),
  },
  async run(_ctx, docs, params) {
    const sign = (params.direction ?? 'desc') === 'desc' ? -1 : 1;
    return [...docs].sort((a, b) => {
      const sa = scored(a);
      const sb = scored(b);
      if (sa !== sb) return sa ? -1 : 1;
      const byScore = sa ? sign * (a.score! - b.score!) : 0;
      if (byScore !== 0) return byScore;
      return a.document_id < b.document_id ? -1 : a.document_id > b.document_id ? 1 : 0;
    });
  },
});
