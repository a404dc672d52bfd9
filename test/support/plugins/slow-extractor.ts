/**
 * A test plugin module (loaded through TESSERA_PLUGINS by servers the crash test spawns): an extractor that
 * takes a fixed, configurable time per record, so a test can kill a process while a batch is mid-way.
 */
import { defineExtractor } from '../../../kernel/plugins.js';

export default defineExtractor({
  name: 'slow_extractor',
  version: '1.0',
  description: 'Test only: waits `delay_ms`, then writes one document with the record text.',
  accepts: ['*/*'],
  inputs: [{ name: 'text', type: 'text', required: true }],
  parameters: {
    type: 'object',
    additionalProperties: false,
    properties: { delay_ms: { type: 'integer', minimum: 0, maximum: 10_000, default: 100 } },
  },
  features: [],
  fields: {
    type: 'object',
    required: ['text'],
    properties: { text: { type: 'string' } },
  },
  async *extract(ctx, input) {
    await new Promise((resolve) => setTimeout(resolve, Number(input.parameters.delay_ms ?? 100)));
    const value = input.fields.text;
    let text: string;
    if (typeof value === 'string') text = value;
    else {
      const { body } = await ctx.blobs.get(String((value as { storage_key: string }).storage_key));
      const parts: Buffer[] = [];
      for await (const part of body) parts.push(Buffer.from(part as Buffer));
      text = Buffer.concat(parts).toString('utf8');
    }
    yield { key: 'copy', fields: { text } };
  },
});
