/** limit: keeps `limit` documents after skipping `offset` (the pipeline's own cut, before pagination). */
import { defineStage } from '../../../kernel/plugins.js';

export interface LimitParameters {
  limit: number;
  offset?: number;
}

export default defineStage<LimitParameters>({
  id: 'limit',
  version: '1.0',
  type: 'reduce',
  description: 'Keeps at most `limit` documents after skipping the first `offset`.',
  parameters: {
    type: 'object',
    required: ['limit'],
    additionalProperties: false,
    properties: {
      limit: { type: 'integer', minimum: 1, maximum: 10_000 },
      offset: { type: 'integer', minimum: 0, maximum: 100_000, default: 0 },
    },
  },
  optimizer: { passThrough: true },
  estimateOutput: (params, input, at) => (at.first ? 0 : Math.max(0, Math.min(params.limit, input - (params.offset ?? 0)))),
  async run(_ctx, docs, params) {
    const offset = params.offset ?? 0;
    return docs.slice(offset, offset + params.limit);
  },
});
