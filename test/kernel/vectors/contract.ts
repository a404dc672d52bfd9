/**
 * The VectorIndex contract: every engine runs this same suite (pgvector.test.ts, lancedb.test.ts).
 * Results are checked against brute force in memory and against matchesFilter on the same payloads,
 * so an engine agrees with the filter language's reference semantics, not with another engine.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConflictError, InputError, NotFoundError } from '../../../kernel/errors.js';
import { seededRandom } from '../../../kernel/random.js';
import { matchesFilter, parseFilter, type FilterInput } from '../../../kernel/filters/filter.js';
import type { Distance, VectorIndex, VectorRecord } from '../../../kernel/vectors/vector-index.js';
import { clusteredVectors } from '../../support/embeddings.js';

export { clusteredVectors };

export interface VectorIndexSubject {
  index: VectorIndex;
  cleanup(): Promise<void>;
}

export function randomVectors(n: number, dims: number, seed: number): number[][] {
  const rand = seededRandom(seed); // deterministic, so a failure reproduces
  // Rounded to float32, as both engines store them, so brute force ranks the stored values.
  return Array.from({ length: n }, () => Array.from({ length: dims }, () => Math.fround(rand() * 2 - 1)));
}

/** Share of the true top-k ids found, averaged over queries. */
export function recallAtK(found: string[][], truth: string[][]): number {
  let sum = 0;
  for (let i = 0; i < truth.length; i++) {
    const want = new Set(truth[i]);
    sum += want.size === 0 ? 1 : found[i]!.filter((id) => want.has(id)).length / want.size;
  }
  return sum / truth.length;
}

export function similarity(distance: Distance, a: number[], b: number[]): number {
  let dot = 0;
  let na = 0;
  let nb = 0;
  let l2 = 0;
  for (let i = 0; i < a.length; i++) {
    dot += a[i]! * b[i]!;
    na += a[i]! * a[i]!;
    nb += b[i]! * b[i]!;
    l2 += (a[i]! - b[i]!) ** 2;
  }
  if (distance === 'cosine') return dot / Math.sqrt(na * nb);
  if (distance === 'l2') return -Math.sqrt(l2);
  return dot;
}

export function bruteForce(records: VectorRecord[], query: number[], distance: Distance, k: number): Array<{ id: string; score: number }> {
  return records
    .map((r) => ({ id: r.id, score: similarity(distance, Array.from(r.vector), query) }))
    .sort((x, y) => y.score - x.score)
    .slice(0, k);
}

const COLORS = ['Red', 'green', 'BLUE', 'red'];

/** Payloads that exercise every operator: mixed case, mixed JSON types, arrays, nulls, missing fields. */
export function payloadFor(i: number): Record<string, unknown> {
  return {
    organization_id: `org_${i % 3}`,
    namespace_id: `ns_${i % 2}`,
    document_id: `doc_${i}`,
    code: i % 5 === 0 ? 5 : '5',
    metadata: {
      color: COLORS[i % COLORS.length],
      rank: i,
      score: i / 10,
      flag: i % 2 === 0,
      title: `item ${String(i).padStart(3, '0')} of the set`,
      word: ['alpha', 'beta', 'gamma', 'delta'][i % 4],
      tags: i % 3 === 0 ? ['a', 'B'] : ['c'],
      ...(i % 100 === 7 ? { rare: 'yes' } : {}),
      maybe: i % 4 === 0 ? null : 'x',
    },
  };
}

export const FILTERS: Array<[string, FilterInput]> = [
  ['eq string (case-insensitive)', { AND: [{ field: 'metadata.color', operator: 'eq', value: 'red' }] }],
  ['eq string (case-sensitive)', { AND: [{ field: 'metadata.color', operator: 'eq', value: 'Red' }], case_sensitive: true }],
  ['eq top-level', { AND: [{ field: 'organization_id', operator: 'eq', value: 'org_1' }] }],
  ['eq number is typed', { AND: [{ field: 'code', operator: 'eq', value: 5 }] }],
  ['eq string is typed', { AND: [{ field: 'code', operator: 'eq', value: '5' }] }],
  ['eq boolean', { AND: [{ field: 'metadata.flag', operator: 'eq', value: true }] }],
  ['eq null', { AND: [{ field: 'metadata.maybe', operator: 'eq', value: null }] }],
  ['ne', { AND: [{ field: 'metadata.color', operator: 'ne', value: 'RED' }] }],
  ['ne missing field', { AND: [{ field: 'metadata.rare', operator: 'ne', value: 'yes' }] }],
  ['gt number', { AND: [{ field: 'metadata.rank', operator: 'gt', value: 250 }] }],
  ['gte float', { AND: [{ field: 'metadata.score', operator: 'gte', value: 12.5 }] }],
  ['lt', { AND: [{ field: 'metadata.rank', operator: 'lt', value: 10 }] }],
  ['lte', { AND: [{ field: 'metadata.rank', operator: 'lte', value: 10 }] }],
  ['gt string', { AND: [{ field: 'metadata.word', operator: 'gt', value: 'beta' }] }],
  ['in', { AND: [{ field: 'metadata.word', operator: 'in', value: ['ALPHA', 'delta'] }] }],
  ['in mixed types', { AND: [{ field: 'code', operator: 'in', value: [5, 'nope'] }] }],
  ['nin', { AND: [{ field: 'metadata.word', operator: 'nin', value: ['alpha', 'Gamma'] }] }],
  ['contains string', { AND: [{ field: 'metadata.title', operator: 'contains', value: 'M 01' }] }],
  ['contains array', { AND: [{ field: 'metadata.tags', operator: 'contains', value: 'a' }] }],
  ['contains array (ignoring case)', { AND: [{ field: 'metadata.tags', operator: 'contains', value: 'b' }] }],
  ['contains array (case-sensitive)', { AND: [{ field: 'metadata.tags', operator: 'contains', value: 'b' }], case_sensitive: true }],
  ['starts_with', { AND: [{ field: 'metadata.title', operator: 'starts_with', value: 'ITEM 1' }] }],
  ['ends_with', { AND: [{ field: 'document_id', operator: 'ends_with', value: '7' }] }],
  ['exists', { AND: [{ field: 'metadata.rare', operator: 'exists', value: true }] }],
  ['exists null is absent', { AND: [{ field: 'metadata.maybe', operator: 'exists', value: true }] }],
  ['not exists', { AND: [{ field: 'metadata.rare', operator: 'exists', value: false }] }],
  ['exists on an object', { AND: [{ field: 'metadata', operator: 'exists' }] }],
  [
    'nested AND / OR / NOT',
    {
      AND: [{ field: 'namespace_id', operator: 'eq', value: 'ns_0' }],
      OR: [{ field: 'metadata.rank', operator: 'lt', value: 50 }, { AND: [{ field: 'metadata.word', operator: 'eq', value: 'gamma' }] }],
      NOT: [{ field: 'metadata.color', operator: 'eq', value: 'blue' }],
    },
  ],
];

export function runVectorIndexContract(name: string, factory: () => Promise<VectorIndexSubject>): void {
  describe(`VectorIndex contract: ${name}`, () => {
    let subject: VectorIndexSubject;
    let index: VectorIndex;
    const prefix = `t${randomBytes(4).toString('hex')}`;
    let n = 0;
    const fresh = () => `${prefix}_${++n}`;

    const DIMS = 32;
    const N = 300;
    const records: VectorRecord[] = randomVectors(N, DIMS, 42).map((vector, i) => ({ id: `r${i}`, vector, payload: payloadFor(i) }));
    const shared = `${prefix}_shared`;

    beforeAll(async () => {
      subject = await factory();
      index = subject.index;
      await index.ensureIndex({ name: shared, dims: DIMS, distance: 'cosine' });
      await index.upsert(shared, records);
    });
    afterAll(async () => {
      await index?.dropIndex(shared);
      await subject?.cleanup();
    });

    it('pings', async () => {
      await expect(index.ping()).resolves.toBeUndefined();
    });

    it('ensureIndex is idempotent and refuses another dims or distance for a name', async () => {
      const name = fresh();
      await index.ensureIndex({ name, dims: 4, distance: 'l2' });
      await index.ensureIndex({ name, dims: 4, distance: 'l2' });
      await expect(index.ensureIndex({ name, dims: 8, distance: 'l2' })).rejects.toBeInstanceOf(ConflictError);
      await expect(index.ensureIndex({ name, dims: 4, distance: 'cosine' })).rejects.toBeInstanceOf(ConflictError);
      await index.dropIndex(name);
    });

    it('refuses names that are not [a-z0-9_]{1,63}', async () => {
      for (const bad of ['Bad', 'x; drop table y', 'a"b', '', 'x'.repeat(64)]) {
        await expect(index.ensureIndex({ name: bad, dims: 4, distance: 'l2' })).rejects.toThrow(/invalid vector index name/);
      }
    });

    it('an unknown index is NotFound', async () => {
      await expect(index.search(`${prefix}_missing`, { vector: [1], limit: 1 })).rejects.toBeInstanceOf(NotFoundError);
      await expect(index.count(`${prefix}_missing`)).rejects.toBeInstanceOf(NotFoundError);
    });

    it('upsert / get round-trips vectors and payloads', async () => {
      const got = await index.get(shared, ['r0', 'r7', 'r299', 'nope']);
      expect(got.map((r) => r.id).sort()).toEqual(['r0', 'r299', 'r7']);
      for (const r of got) {
        const original = records[Number(r.id.slice(1))]!;
        expect(r.payload).toEqual(JSON.parse(JSON.stringify(original.payload)));
        expect(Array.from(r.vector)).toHaveLength(DIMS);
        Array.from(r.vector).forEach((v, i) => expect(v).toBeCloseTo(Array.from(original.vector)[i]!, 5));
      }
    });

    it('takes vectors as arrays or Float32Arrays, and refuses other dims or values that are not finite (float32)', async () => {
      const name = fresh();
      await index.ensureIndex({ name, dims: 3, distance: 'l2' });
      await index.upsert(name, [
        { id: 'plain', vector: [1, 0, 0], payload: {} },
        { id: 'typed', vector: Float32Array.from([0, 1, 0]), payload: {} },
      ]);
      const hits = await index.search(name, { vector: Float32Array.from([0, 0.9, 0]), limit: 2 });
      expect(hits.map((h) => h.id)).toEqual(['typed', 'plain']);
      for (const vector of [[1, 0], [1, 0, 0, 0], [1, Number.NaN, 0], [Number.POSITIVE_INFINITY, 0, 0], [1e39, 0, 0], Float32Array.from([0, 0, Number.NaN])]) {
        await expect(index.upsert(name, [{ id: 'bad', vector, payload: {} }])).rejects.toBeInstanceOf(InputError);
        await expect(index.search(name, { vector, limit: 1 })).rejects.toBeInstanceOf(InputError);
      }
      await expect(index.upsert(name, [{ id: 'bad', vector: [1, '2', 3] as unknown as number[], payload: {} }])).rejects.toBeInstanceOf(InputError);
      expect(await index.count(name)).toBe(2);
      await index.dropIndex(name);
    });

    it('re-upserting the same ids replaces and never duplicates', async () => {
      const name = fresh();
      await index.ensureIndex({ name, dims: 3, distance: 'l2' });
      await index.upsert(name, [
        { id: 'a', vector: [1, 0, 0], payload: { v: 1 } },
        { id: 'b', vector: [0, 1, 0], payload: { v: 1 } },
      ]);
      await index.upsert(name, [
        { id: 'a', vector: [0, 0, 1], payload: { v: 2 } },
        { id: 'a', vector: [0, 0, 2], payload: { v: 3 } },
      ]);
      expect(await index.count(name)).toBe(2);
      const [a] = await index.get(name, ['a']);
      expect(a?.payload).toEqual({ v: 3 });
      expect(Array.from(a!.vector)).toEqual([0, 0, 2]);
      await expect(index.upsert(name, [{ id: 'c', vector: [1, 2], payload: {} }])).rejects.toThrow(/dimensions/);
      await index.dropIndex(name);
    });

    it('replaced vectors are found where they moved to, never where they were, at graph scale', async () => {
      // Large enough that in-process graphs walk the graph rather than scan: replacements go in as new points there.
      const name = fresh();
      const dims = 16;
      const before = randomVectors(1_500, dims, 31);
      const after = randomVectors(300, dims, 32);
      await index.ensureIndex({ name, dims, distance: 'cosine' });
      await index.upsert(name, before.map((vector, i) => ({ id: `p${i}`, vector, payload: { round: 1 } })));
      // Half the replaced ids get a new vector; the other half the same vector with a new payload.
      const moved = after.map((vector, i) => ({ id: `p${i}`, vector, payload: { round: 2 } }));
      const kept = before.slice(300, 600).map((vector, i) => ({ id: `p${300 + i}`, vector, payload: { round: 2 } }));
      await index.upsert(name, [...moved, ...kept]);
      await index.upsert(name, moved.slice(0, 50)); // the same again: nothing changes
      expect(await index.count(name)).toBe(1_500);
      expect(await index.count(name, parseFilter({ AND: [{ field: 'round', operator: 'eq', value: 2 }] }))).toBe(600);
      let foundAtNew = 0;
      for (const [i, vector] of after.slice(0, 40).entries()) {
        const hits = await index.search(name, { vector, limit: 3 });
        if (hits[0]?.id === `p${i}`) foundAtNew++;
        // The old position no longer answers with the replaced id (unless its new vector happens to be close).
        const old = await index.search(name, { vector: before[i]!, limit: 1 });
        if (old[0]?.id === `p${i}`) expect(similarity('cosine', before[i]!, vector)).toBeGreaterThan(0.9);
      }
      expect(foundAtNew).toBeGreaterThanOrEqual(38);
      const kept0 = await index.search(name, { vector: before[300]!, limit: 1 });
      expect(kept0[0]).toMatchObject({ id: 'p300', payload: { round: 2 } });
      await index.dropIndex(name);
    });

    it('finds the exact nearest neighbours (brute force) on small data', async () => {
      const queries = randomVectors(5, DIMS, 7);
      for (const q of queries) {
        const expected = bruteForce(records, q, 'cosine', 10);
        const hits = await index.search(shared, { vector: q, limit: 10 });
        expect(hits.map((h) => h.id)).toEqual(expected.map((e) => e.id));
        hits.forEach((h, i) => expect(h.score).toBeCloseTo(expected[i]!.score, 4));
        expect(hits[0]!.payload).toEqual(JSON.parse(JSON.stringify(records[Number(hits[0]!.id.slice(1))]!.payload)));
      }
    });

    it('payloads: false answers the same ids and scores (payloads may then be empty)', async () => {
      for (const q of randomVectors(3, DIMS, 8)) {
        const full = await index.search(shared, { vector: q, limit: 10 });
        const bare = await index.search(shared, { vector: q, limit: 10, payloads: false });
        expect(bare.map((h) => [h.id, h.score])).toEqual(full.map((h) => [h.id, h.score]));
        for (const [i, hit] of bare.entries()) expect([{}, full[i]!.payload]).toContainEqual(hit.payload);
      }
    });

    for (const distance of ['l2', 'dot'] as const) {
      it(`exact nearest neighbours with ${distance}`, async () => {
        const name = fresh();
        await index.ensureIndex({ name, dims: DIMS, distance });
        await index.upsert(name, records.slice(0, 200));
        for (const q of randomVectors(3, DIMS, 11)) {
          const expected = bruteForce(records.slice(0, 200), q, distance, 10);
          const hits = await index.search(name, { vector: q, limit: 10 });
          expect(hits.map((h) => h.id)).toEqual(expected.map((e) => e.id));
          hits.forEach((h, i) => expect(h.score).toBeCloseTo(expected[i]!.score, 3));
        }
        await index.dropIndex(name);
      });
    }

    it('orders by the index distance: cosine, l2 and dot disagree as they should', async () => {
      const points: VectorRecord[] = [
        { id: 'a', vector: [10, 1], payload: {} },
        { id: 'b', vector: [1.1, 0], payload: {} },
        { id: 'c', vector: [0.6, 0.3], payload: {} },
      ];
      const expected: Record<Distance, string[]> = { cosine: ['b', 'a', 'c'], l2: ['b', 'c', 'a'], dot: ['a', 'b', 'c'] };
      for (const distance of ['cosine', 'l2', 'dot'] as const) {
        const name = fresh();
        await index.ensureIndex({ name, dims: 2, distance });
        await index.upsert(name, points);
        const hits = await index.search(name, { vector: [1, 0], limit: 3 });
        expect(hits.map((h) => h.id)).toEqual(expected[distance]);
        hits.forEach((h) => expect(h.score).toBeCloseTo(similarity(distance, Array.from(points.find((p) => p.id === h.id)!.vector), [1, 0]), 4));
        await index.dropIndex(name);
      }
    });

    for (const [label, input] of FILTERS) {
      it(`filter: ${label} selects what matchesFilter selects`, async () => {
        const filter = parseFilter(input);
        const expected = records.filter((r) => matchesFilter(filter, r.payload)).map((r) => r.id).sort();
        expect(await index.count(shared, filter)).toBe(expected.length);
        const hits = await index.search(shared, { vector: records[0]!.vector, limit: N, filter });
        expect(hits.map((h) => h.id).sort()).toEqual(expected);
      });
    }

    it('a selective filter (1%) returns only matching ids and the true top-k among them', async () => {
      const filter = parseFilter({ AND: [{ field: 'metadata.rare', operator: 'eq', value: 'YES' }] });
      const subset = records.filter((r) => matchesFilter(filter, r.payload));
      expect(subset.length).toBe(3);
      const q = randomVectors(1, DIMS, 99)[0]!;
      const hits = await index.search(shared, { vector: q, limit: 2, filter });
      expect(hits.map((h) => h.id)).toEqual(bruteForce(subset, q, 'cosine', 2).map((e) => e.id));
    });

    it('filtered search keeps recall@10 ≥ 0.98 at 50%, 10% and 1% selectivity', async () => {
      const name = fresh();
      const dims = 16;
      const vectors = clusteredVectors(2_000, dims, 3);
      const data: VectorRecord[] = vectors.map((vector, i) => ({ id: `c${i}`, vector, payload: { bucket: i % 100 } }));
      await index.ensureIndex({ name, dims, distance: 'cosine' });
      await index.upsert(name, data);
      const queries = clusteredVectors(20, dims, 4);
      for (const share of [50, 10, 1]) {
        const filter = parseFilter({ AND: [{ field: 'bucket', operator: 'lt', value: share }] });
        const subset = data.filter((r) => (r.payload.bucket as number) < share);
        const found: string[][] = [];
        const truth: string[][] = [];
        for (const q of queries) {
          const hits = await index.search(name, { vector: q, limit: 10, filter });
          expect(hits.every((h) => (h.payload.bucket as number) < share)).toBe(true);
          found.push(hits.map((h) => h.id));
          truth.push(bruteForce(subset, q, 'cosine', 10).map((e) => e.id));
        }
        expect(recallAtK(found, truth), `recall at ${share}%`).toBeGreaterThanOrEqual(0.98);
      }
      await index.dropIndex(name);
    });

    it('delete, deleteWhere and count', async () => {
      const name = fresh();
      await index.ensureIndex({ name, dims: DIMS, distance: 'cosine' });
      await index.upsert(name, records.slice(0, 60));
      expect(await index.count(name)).toBe(60);
      expect(await index.delete(name, ['r0', 'r1', 'nope'])).toBe(2);
      expect(await index.delete(name, [])).toBe(0);
      expect(await index.get(name, ['r0', 'r1'])).toEqual([]);
      const org1 = parseFilter({ AND: [{ field: 'organization_id', operator: 'eq', value: 'org_1' }] });
      const expected = records.slice(2, 60).filter((r) => matchesFilter(org1, r.payload)).length;
      expect(await index.count(name, org1)).toBe(expected);
      expect(await index.deleteWhere(name, org1)).toBe(expected);
      expect(await index.count(name, org1)).toBe(0);
      expect(await index.count(name)).toBe(58 - expected);
      await index.dropIndex(name);
    });

    it('dropIndex removes the index and is idempotent', async () => {
      const name = fresh();
      await index.ensureIndex({ name, dims: 2, distance: 'l2' });
      await index.upsert(name, [{ id: 'x', vector: [1, 1], payload: {} }]);
      await index.dropIndex(name);
      await index.dropIndex(name);
      await expect(index.count(name)).rejects.toBeInstanceOf(NotFoundError);
      // The name is free again, with another shape, and starts empty.
      await index.ensureIndex({ name, dims: 3, distance: 'dot' });
      expect(await index.count(name)).toBe(0);
      await index.dropIndex(name);
    });

    it('two indexes never mix', async () => {
      const a = fresh();
      const b = fresh();
      await index.ensureIndex({ name: a, dims: 2, distance: 'l2' });
      await index.ensureIndex({ name: b, dims: 2, distance: 'l2' });
      await index.upsert(a, [{ id: 'same', vector: [1, 0], payload: { in: 'a' } }, { id: 'only_a', vector: [0, 1], payload: {} }]);
      await index.upsert(b, [{ id: 'same', vector: [5, 5], payload: { in: 'b' } }]);
      expect(await index.count(a)).toBe(2);
      expect(await index.count(b)).toBe(1);
      expect((await index.search(b, { vector: [1, 0], limit: 10 })).map((h) => [h.id, h.payload])).toEqual([['same', { in: 'b' }]]);
      await index.delete(b, ['same']);
      expect((await index.get(a, ['same']))[0]?.payload).toEqual({ in: 'a' });
      await index.dropIndex(a);
      await index.dropIndex(b);
    });
  });
}
