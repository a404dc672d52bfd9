/**
 * sort_attribute: orders documents by one field (a dotted path, read like attribute_filter reads it:
 * `price` = fields.price, `metadata.rank`, `score`, `created_at`). Documents without the field come last,
 * whatever the direction; ties keep their incoming order (the sort is stable).
 */
import { defineStage } from '../../../kernel/plugins.js';
import { readPath } from '../../../kernel/retrieval/documents.js';
import { fieldPathSchema } from '../../../kernel/retrieval/schemas.js';

export interface SortAttributeParameters {
  field: string;
  direction?: 'asc' | 'desc';
}

/** Numbers before strings before booleans; within a kind, natural order. */
function compare(a: unknown, b: unknown): number {
  const rank = (v: unknown) => (typeof v === 'number' ? 0 : typeof v === 'string' ? 1 : typeof v === 'boolean' ? 2 : 3);
  const ra = rank(a);
  const rb = rank(b);
  if (ra !== rb) return ra - rb;
  if (typeof a === 'number' && typeof b === 'number') return a - b;
  if (typeof a === 'string' && typeof b === 'string') return a < b ? -1 : a > b ? 1 : 0;
  if (typeof a === 'boolean' && typeof b === 'boolean') return Number(a) - Number(b);
  return 0;
}

export default defineStage<SortAttributeParameters>({
  id: 'sort_attribute',
  version: '1.0',
  type: 'sort',
  description: 'Sorts documents by a field (dotted path; `score`, `created_at`, fields and metadata). Missing values sort last; ties keep their order.',
  parameters: {
    type: 'object',
    required: ['field'],
    additionalProperties: false,
    properties: {
      field: fieldPathSchema,
      direction: { enum: ['asc', 'desc'], default: 'desc' },
    },
  },
  // Stable: ties keep their incoming order, so it is not total; two sorts on one field leave only the second's effect.
  optimizer: {
    sort: (params) => ({ key: `sort_attribute:${params.field}:${params.direction ?? 'desc'}`, field: `sort_attribute:${params.field}`, total: false }),
  },
  async run(_ctx, docs, params) {
    const sign = (params.direction ?? 'desc') === 'desc' ? -1 : 1;
    const keyed = docs.map((doc) => ({ doc, value: readPath(doc, params.field) }));
    const missing = (v: unknown) => v === undefined || v === null || (typeof v === 'object');
    keyed.sort((x, y) => {
      const mx = missing(x.value);
      const my = missing(y.value);
      if (mx || my) return Number(mx) - Number(my);
      return sign * compare(x.value, y.value);
    });
    return keyed.map((k) => k.doc);
  },
});
