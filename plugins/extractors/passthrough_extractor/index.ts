/**
 * passthrough_extractor: copies fields of each source record into one document, unchanged — for
 * collections that organise or filter data without computing features, and as the simplest reference
 * implementation of the extractor contract.
 */
import { defineExtractor, type DocumentDraft } from '../../../kernel/plugins.js';

export interface PassthroughParameters {
  /** Copy only these fields (default: all). */
  fields?: string[];
  /** Never copy these. */
  exclude?: string[];
}

export default defineExtractor({
  name: 'passthrough_extractor',
  version: '1.0',
  description: 'Copies the fields of each source record into one document, without computing features.',
  accepts: ['*/*'],
  inputs: [],
  parameters: {
    type: 'object',
    additionalProperties: false,
    properties: {
      fields: { type: 'array', items: { type: 'string', minLength: 1 }, maxItems: 200, uniqueItems: true },
      exclude: { type: 'array', items: { type: 'string', minLength: 1 }, maxItems: 200, uniqueItems: true },
    },
  },
  features: [],
  fields: { type: 'object', additionalProperties: true },
  async *extract(_ctx, input): AsyncIterable<DocumentDraft> {
    const { fields, exclude = [] } = input.parameters as PassthroughParameters;
    const copied: Record<string, unknown> = {};
    for (const [name, value] of Object.entries(input.fields)) {
      if (fields && !fields.includes(name)) continue;
      if (exclude.includes(name)) continue;
      copied[name] = value;
    }
    yield { key: 'passthrough', fields: copied };
  },
});
