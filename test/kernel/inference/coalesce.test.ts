import { describe, expect, it } from 'vitest';
import { Coalescer } from '../../../kernel/inference/coalesce.js';

class BadInput extends Error {}

describe('Coalescer', () => {
  it('sends concurrent small calls for one key as one request and hands each caller its slice', async () => {
    const sent: Array<{ key: string; items: number[] }> = [];
    const c = new Coalescer<number, number>(async (key, items) => {
      sent.push({ key, items });
      return items.map((i) => i * 10);
    }, 100);
    const [a, b, other] = await Promise.all([c.submit('m', [1, 2]), c.submit('m', [3]), c.submit('n', [4])]);
    expect(a).toEqual([10, 20]);
    expect(b).toEqual([30]);
    expect(other).toEqual([40]);
    expect(sent).toEqual([
      { key: 'm', items: [1, 2, 3] },
      { key: 'n', items: [4] },
    ]);
  });

  it('flushes when a batch is full', async () => {
    const sizes: number[] = [];
    const c = new Coalescer<number, number>(async (_key, items) => {
      sizes.push(items.length);
      return items;
    }, 3);
    const results = await Promise.all([1, 2, 3, 4, 5, 6, 7].map((i) => c.submit('m', [i])));
    expect(results.flat()).toEqual([1, 2, 3, 4, 5, 6, 7]);
    expect(sizes).toEqual([3, 3, 1]);
  });

  it('fails every caller of a failed request, but isolates an error one input caused', async () => {
    const shared = new Coalescer<number, number>(async () => {
      throw new Error('down');
    }, 10);
    const outcomes = await Promise.allSettled([shared.submit('m', [1]), shared.submit('m', [2])]);
    expect(outcomes.map((o) => o.status)).toEqual(['rejected', 'rejected']);

    const isolating = new Coalescer<number, number>(
      async (_key, items) => {
        if (items.includes(13)) throw new BadInput('13 is not an input');
        return items;
      },
      10,
      (err) => err instanceof BadInput,
    );
    const mixed = await Promise.allSettled([isolating.submit('m', [1]), isolating.submit('m', [13]), isolating.submit('m', [2])]);
    expect(mixed[0]).toEqual({ status: 'fulfilled', value: [1] });
    expect(mixed[1].status).toBe('rejected');
    expect(mixed[2]).toEqual({ status: 'fulfilled', value: [2] });
  });
});
