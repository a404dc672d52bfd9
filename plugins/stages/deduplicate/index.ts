/**
 * deduplicate: keeps the first document (the highest ranked, since the input is in rank order) of each
 * combination of values of `fields`. A document with none of the fields (each missing or null) has no key and is always
 * kept; otherwise a missing field counts as null. Values compare as JSON (`1` is not `"1"`, strings are
 * case-sensitive, objects equal whatever their key order).
 */
import { defineStage } from '../../../kernel/plugins.js';
import { readPath, valueKey } from '../../../kernel/retrieval/documents.js';
import { fieldPathSchema } from '../../../kernel/retrieval/schemas.js';

export interface DeduplicateParameters {
  fields: string[];
}

export default defineStage<DeduplicateParameters>({
  id: 'deduplicate',
  version: '1.0',
  type: 'filter',
  description:
    'Removes duplicates: of the documents with the same values of `fields` (field paths), only the first (highest ranked) is kept. Documents with none of the fields (missing or null) are kept.',
  parameters: {
    type: 'object',
    required: ['fields'],
    additionalProperties: false,
    properties: {
      fields: { type: 'array', minItems: 1, maxItems: 20, uniqueItems: true, items: fieldPathSchema },
    },
  },
  async run(_ctx, docs, params) {
    const seen = new Set<string>();
    return docs.filter((doc) => {
      const values = params.fields.map((field) => readPath(doc, field));
      if (values.every((v) => v === undefined || v === null)) return true;
      const key = valueKey(values);
      if (seen.has(key)) return false;
      seen.add(key);
      return true;
    });
  },
});
