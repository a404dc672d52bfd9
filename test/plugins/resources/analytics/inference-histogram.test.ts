import { describe, expect, it } from 'vitest';
import { bucketOf, LATENCY_BUCKETS_MS } from '../../../../kernel/inference/call-stats.js';
import { histogramQuantile, sumGroups } from '../../../../plugins/resources/analytics/inference-queries.js';

describe('inference latency histogram', () => {
  const empty = () => new Array<number>(LATENCY_BUCKETS_MS.length + 1).fill(0);

  it('puts each latency in the first bucket whose bound holds it, the slowest past the last bound', () => {
    expect(bucketOf(0.3)).toBe(0);
    expect(bucketOf(1)).toBe(0);
    expect(bucketOf(1.01)).toBe(1);
    expect(bucketOf(150)).toBe(LATENCY_BUCKETS_MS.indexOf(200));
    expect(bucketOf(60_000)).toBe(LATENCY_BUCKETS_MS.length);
  });

  it('reads a quantile as the upper bound of its bucket, at most the slowest call', () => {
    const histogram = empty();
    histogram[bucketOf(3)] = 90;
    histogram[bucketOf(150)] = 10;
    expect(histogramQuantile(histogram, 0.5, 170)).toBe(5);
    expect(histogramQuantile(histogram, 0.95, 170)).toBe(170);
    expect(histogramQuantile(histogram, 0.9, 170)).toBe(5);
    expect(histogramQuantile(empty(), 0.5, 0)).toBeNull();
    const slow = empty();
    slow[LATENCY_BUCKETS_MS.length] = 1;
    expect(histogramQuantile(slow, 0.99, 45_000)).toBe(45_000);
  });

  it('adds groups up bucket by bucket', () => {
    const a = { calls: 2, items: 10, errors: 0, total_ms: 8, max_ms: 5, histogram: empty() };
    const b = { calls: 1, items: 1, errors: 1, total_ms: 30, max_ms: 30, histogram: empty() };
    a.histogram[bucketOf(3)]! += 1;
    a.histogram[bucketOf(5)]! += 1;
    b.histogram[bucketOf(30)] = 1;
    const sum = sumGroups([a, b]);
    expect(sum).toMatchObject({ calls: 3, items: 11, errors: 1, total_ms: 38, max_ms: 30 });
    expect(sum.histogram.reduce((x, y) => x + y, 0)).toBe(3);
  });
});
