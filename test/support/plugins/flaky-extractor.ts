/**
 * A test extractor that fails on records whose metadata says `fail: true` and succeeds on the others:
 * a test makes a record fail, changes its metadata, and retries the batch to see it succeed.
 */
import { defineExtractor } from '../../../kernel/plugins.js';

export default defineExtractor({
  name: 'flaky_extractor',
  version: '1.0',
  description: 'Test only: fails on records with metadata fail=true, else writes one document.',
  accepts: ['text/*'],
  inputs: [{ name: 'text', type: 'text', required: true }],
  parameters: { type: 'object', additionalProperties: false, properties: {} },
  features: [],
  fields: { type: 'object', additionalProperties: false, required: ['copied'], properties: { copied: { type: 'boolean' } } },
  async *extract(_ctx, input) {
    if (input.fields.fail === true) throw new Error(`flaky_extractor: object ${input.objectId} is marked to fail`);
    yield { key: 'copy', fields: { copied: true } };
  },
});
