/**
 * compileFilter (the in-process vector index's evaluator) must agree with matchesFilter, the reference
 * semantics, on every operator: the vector contract's filters over its payloads, and random nested ones.
 */
import { describe, expect, it } from 'vitest';
import { matchesFilter, parseFilter, type FilterInput } from '../../../kernel/filters/filter.js';
import { compileFilter } from '../../../kernel/filters/predicate.js';
import { seededRandom } from '../../../kernel/random.js';
import { FILTERS, payloadFor } from '../vectors/contract.js';

const payloads = Array.from({ length: 400 }, (_, i) => payloadFor(i));

describe('compileFilter', () => {
  for (const [label, input] of FILTERS) {
    it(`agrees with matchesFilter: ${label}`, () => {
      const filter = parseFilter(input);
      const test = compileFilter(filter);
      const expected = payloads.map((p) => matchesFilter(filter, p));
      expect(payloads.map((p) => test(p))).toEqual(expected);
    });
  }

  it('agrees with matchesFilter on random nested filters', () => {
    const rand = seededRandom(5);
    const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)]!;
    const conditions = FILTERS.flatMap(([, f]) => (f.AND ?? []) as Array<Record<string, unknown>>).filter((c) => 'field' in c);
    const group = (depth: number): FilterInput => {
      const part = () => (depth < 2 && rand() < 0.3 ? group(depth + 1) : pick(conditions));
      const out: FilterInput = {};
      if (rand() < 0.8) out.AND = Array.from({ length: 1 + Math.floor(rand() * 2) }, part);
      if (rand() < 0.5) out.OR = Array.from({ length: 1 + Math.floor(rand() * 3) }, part);
      if (rand() < 0.3) out.NOT = [part()];
      return out;
    };
    let selectedSome = 0;
    for (let i = 0; i < 200; i++) {
      const input = { ...group(0), case_sensitive: rand() < 0.3 };
      const filter = parseFilter(input);
      const test = compileFilter(filter);
      const expected = payloads.map((p) => matchesFilter(filter, p));
      expect(payloads.map((p) => test(p)), JSON.stringify(input)).toEqual(expected);
      if (expected.some(Boolean) && !expected.every(Boolean)) selectedSome++;
    }
    expect(selectedSome).toBeGreaterThan(50);
  });
});
