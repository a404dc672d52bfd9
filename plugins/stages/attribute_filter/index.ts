/**
 * attribute_filter: keeps the documents matching a filter in the shared filter language (AND/OR/NOT,
 * every operator, case_sensitive, dotted paths into fields and metadata). As the first stage it reads the
 * retriever's collections with the filter pushed into the query (and the caller's principal filter);
 * later in a pipeline it filters the documents it receives, with the same field semantics.
 */
import { InputError } from '../../../kernel/errors.js';
import { matchesFilter, parseFilter } from '../../../kernel/filters/filter.js';
import type { FilterInput } from '../../../kernel/filters/filter.js';
import { defineStage } from '../../../kernel/plugins.js';
import { filterView } from '../../../kernel/retrieval/documents.js';
import { filterDefs, filterRef } from '../../../kernel/retrieval/schemas.js';
import { DocumentSource, resolve } from '../../../kernel/tokens.js';

export interface AttributeFilterParameters {
  filters: Record<string, unknown>;
  /** As the first stage: at most this many documents are read. */
  limit?: number;
}

export const MAX_SOURCE_DOCUMENTS = 10_000;

export default defineStage<AttributeFilterParameters>({
  id: 'attribute_filter',
  version: '1.0',
  type: 'filter',
  description:
    'Keeps documents matching a filter (AND/OR/NOT of {field, operator, value}; operators eq, ne, gt, gte, lt, lte, in, nin, ' +
    'contains, starts_with, ends_with, exists, regex; case_sensitive). A bare field name reads fields.<name>; metadata.<path> ' +
    'reads metadata. As the first stage it reads the collections (in document id order); more than `limit` matches fail the ' +
    'stage instead of being cut.',
  parameters: {
    type: 'object',
    required: ['filters'],
    additionalProperties: false,
    $defs: filterDefs,
    properties: {
      filters: filterRef,
      limit: {
        type: 'integer',
        minimum: 1,
        maximum: MAX_SOURCE_DOCUMENTS,
        description: 'First stage only: the most documents it may return (default and maximum 10000); more matches fail the stage rather than being cut.',
      },
    },
  },
  // A pure filter: it may be merged with the next one, or pushed into a search (kernel/retrieval/optimizer.ts).
  optimizer: {
    filter: {
      read: (params) => params.filters as FilterInput,
      write: (params, filters) => ({ ...params, filters: filters as Record<string, unknown> }),
    },
    passThrough: true,
  },
  estimateOutput: (params, input, at) => (at.first ? Math.min(at.source, params.limit ?? MAX_SOURCE_DOCUMENTS) : input),
  async run(ctx, docs, params) {
    const filter = parseFilter(params.filters, ['parameters', 'filters']);
    if (ctx.stageIndex === 0) {
      const limit = params.limit ?? MAX_SOURCE_DOCUMENTS;
      const found = await resolve(ctx.container, DocumentSource).list({
        organizationId: ctx.organizationId,
        collectionIds: ctx.collections.map((c) => c.collection_id),
        principalId: ctx.principalId,
        filter,
        limit: limit + 1,
      });
      // A filter never loses matches silently: more than `limit` is an error the caller can act on.
      if (found.length > limit) {
        throw new InputError(`more than ${limit} documents match the filter; narrow the filter or raise \`limit\` (at most ${MAX_SOURCE_DOCUMENTS})`, { limit });
      }
      return found;
    }
    return docs.filter((doc) => matchesFilter(filter, filterView(doc)));
  },
});
