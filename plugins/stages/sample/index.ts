/**
 * sample: keeps `count` documents chosen at random, reproducibly: the same seed and the same input give the
 * same sample (a retriever re-executed for its next page sees the same documents). The chosen documents keep
 * their incoming order. With `stratify_by`, each value of that field (missing counts as one value) gets a
 * share of `count` proportional to its size (largest remainders get the leftover places, earlier strata
 * first on ties) and is sampled on its own.
 */
import { defineStage, type StageDocument } from '../../../kernel/plugins.js';
import { seededRandom } from '../../../kernel/random.js';
import { readPath, valueKey } from '../../../kernel/retrieval/documents.js';
import { fieldPathSchema } from '../../../kernel/retrieval/schemas.js';

export interface SampleParameters {
  count: number;
  seed?: number;
  stratify_by?: string;
}

/** `k` distinct positions of `0..n-1` (a partial Fisher–Yates shuffle), ascending. */
function choosePositions(n: number, k: number, random: () => number): number[] {
  if (k >= n) return Array.from({ length: n }, (_, i) => i);
  const pool = Array.from({ length: n }, (_, i) => i);
  for (let i = 0; i < k; i++) {
    const j = i + Math.floor(random() * (n - i));
    [pool[i], pool[j]] = [pool[j]!, pool[i]!];
  }
  return pool.slice(0, k).sort((a, b) => a - b);
}

/** Splits `count` over strata of the given sizes in proportion (Hamilton's largest remainder method). */
export function proportionalQuotas(sizes: readonly number[], count: number): number[] {
  const total = sizes.reduce((sum, s) => sum + s, 0);
  if (count >= total) return [...sizes];
  const exact = sizes.map((s) => (s * count) / total);
  const quotas = exact.map(Math.floor);
  let left = count - quotas.reduce((sum, q) => sum + q, 0);
  const byRemainder = exact.map((e, i) => ({ i, remainder: e - quotas[i]! })).sort((a, b) => b.remainder - a.remainder || a.i - b.i);
  for (const { i } of byRemainder) {
    if (left === 0) break;
    quotas[i]! += 1;
    left -= 1;
  }
  return quotas;
}

export default defineStage<SampleParameters>({
  id: 'sample',
  version: '1.0',
  type: 'reduce',
  description:
    'Keeps `count` documents chosen at random, in their incoming order. The same `seed` (0 when omitted) and input give the same sample. With `stratify_by` (a field path), every value of that field gets a share proportional to its size.',
  parameters: {
    type: 'object',
    required: ['count'],
    additionalProperties: false,
    properties: {
      count: { type: 'integer', minimum: 1, maximum: 10_000 },
      seed: { type: 'integer', minimum: 0, maximum: 4_294_967_295, default: 0 },
      stratify_by: fieldPathSchema,
    },
  },
  async run(_ctx, docs, params) {
    const random = seededRandom(params.seed ?? 0);
    if (params.stratify_by === undefined) return choosePositions(docs.length, params.count, random).map((i) => docs[i]!);

    const strata = new Map<string, number[]>();
    docs.forEach((doc, i) => {
      const key = valueKey(readPath(doc, params.stratify_by!));
      const members = strata.get(key);
      if (members) members.push(i);
      else strata.set(key, [i]);
    });
    const groups = [...strata.values()];
    const quotas = proportionalQuotas(groups.map((g) => g.length), params.count);
    const chosen = groups.flatMap((members, s) => choosePositions(members.length, quotas[s]!, random).map((p) => members[p]!));
    return chosen.sort((a, b) => a - b).map((i): StageDocument => docs[i]!);
  },
});
