/**
 * unwind: turns a document whose `field` holds a list into one document per element, in list order. Each
 * keeps the document's id, collection, score and payload, with the element at `fields.<output_field>`
 * (default: the last segment of `field`, so `tags` is replaced by one tag) and its position at
 * `fields.unwind_index`. A value that is not a list counts as a one-element list; a missing, null or empty
 * list drops the document unless `preserve_empty` keeps it unchanged.
 */
import { defineStage, type StageDocument } from '../../../kernel/plugins.js';
import { readPath } from '../../../kernel/retrieval/documents.js';
import { fieldPathSchema } from '../../../kernel/retrieval/schemas.js';

export interface UnwindParameters {
  field: string;
  output_field?: string;
  preserve_empty?: boolean;
}

export const UNWIND_INDEX_FIELD = 'unwind_index';

export default defineStage<UnwindParameters>({
  id: 'unwind',
  version: '1.0',
  type: 'apply',
  description:
    'One document per element of the list at `field` (a field path): id and score kept, the element at `fields.<output_field>` (default: the last segment of `field`) and its position at `fields.unwind_index`. A single value counts as a one-element list; documents with a missing or empty list are dropped unless `preserve_empty`.',
  parameters: {
    type: 'object',
    required: ['field'],
    additionalProperties: false,
    properties: {
      field: fieldPathSchema,
      output_field: { type: 'string', minLength: 1, maxLength: 100, pattern: '^[A-Za-z_][A-Za-z0-9_]*$' },
      preserve_empty: { type: 'boolean', default: false },
    },
  },
  async run(_ctx, docs, params) {
    const outputField = params.output_field ?? params.field.split('.').at(-1)!;
    const out: StageDocument[] = [];
    for (const doc of docs) {
      const value = readPath(doc, params.field);
      const elements = Array.isArray(value) ? value : value === undefined || value === null ? [] : [value];
      if (elements.length === 0) {
        if (params.preserve_empty) out.push(doc);
        continue;
      }
      const fields = (doc.payload?.fields ?? {}) as Record<string, unknown>;
      elements.forEach((element: unknown, index) => {
        out.push({ ...doc, payload: { ...doc.payload, fields: { ...fields, [outputField]: element, [UNWIND_INDEX_FIELD]: index } } });
      });
    }
    return out;
  },
});
