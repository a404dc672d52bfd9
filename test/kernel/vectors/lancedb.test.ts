import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseFilter } from '../../../kernel/filters/filter.js';
import { filterToLance } from '../../../kernel/filters/lance.js';
import { chooseEngine, createVectorIndex } from '../../../kernel/vectors/index.js';
import { runVectorIndexContract } from './contract.js';

runVectorIndexContract('lancedb', async () => {
  const dir = await mkdtemp(path.join(tmpdir(), 'tessera-lance-'));
  const index = createVectorIndex({ engine: 'lancedb', lanceDir: dir });
  return {
    index,
    cleanup: async () => {
      await index.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
});

describe('lancedb engine specifics', () => {
  it('filter values cannot break out of their string literals', () => {
    const sql = filterToLance(parseFilter({ AND: [{ field: 'a', operator: 'eq', value: "x') OR true OR ('" }] }));
    expect(sql).toContain("''");
    expect(sql).not.toMatch(/[^']'\) OR true/);
  });

  it('chooseEngine prefers pgvector and falls back to lancedb', () => {
    expect(chooseEngine({ hasPgvector: true })).toBe('pgvector');
    expect(chooseEngine({ hasPgvector: false })).toBe('lancedb');
    expect(chooseEngine({ requested: 'lancedb', hasPgvector: true })).toBe('lancedb');
    expect(() => chooseEngine({ requested: 'pgvector', hasPgvector: false })).toThrow(/no pgvector/);
  });
});
