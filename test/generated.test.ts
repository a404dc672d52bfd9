/** generated/ is the output of `npm run generate` from openapi/, byte for byte. */
import { describe, expect, it } from 'vitest';
import { staleGeneratedFiles } from '../scripts/generate.js';

describe('generated/', () => {
  it('matches what openapi/ generates (run `npm run generate` after changing the contract)', async () => {
    expect(await staleGeneratedFiles()).toEqual([]);
  });
});
