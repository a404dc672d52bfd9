import { describe, expect, it } from 'vitest';
import { deepFreeze, LocalReadCache } from '../../../kernel/db/local-read-cache.js';

describe('LocalReadCache', () => {
  it('loads once and serves the kept value until it is forgotten', async () => {
    const cache = new LocalReadCache<{ v: number }>({ enabled: true, maxEntries: 10 });
    let loads = 0;
    const load = async () => ({ v: ++loads });
    expect(await cache.read('a', load)).toEqual({ v: 1 });
    expect(await cache.read('a', load)).toEqual({ v: 1 });
    cache.forget(['a']);
    expect(await cache.read('a', load)).toEqual({ v: 2 });
    cache.forgetAll();
    expect(await cache.read('a', load)).toEqual({ v: 3 });
  });

  it('keeps nothing when off, and never keeps a miss', async () => {
    const off = new LocalReadCache<number>({ enabled: false, maxEntries: 10 });
    let loads = 0;
    await off.read('a', async () => ++loads);
    await off.read('a', async () => ++loads);
    expect(loads).toBe(2);
    const on = new LocalReadCache<number>({ enabled: true, maxEntries: 10 });
    let misses = 0;
    await on.read('gone', async () => (misses++, undefined));
    await on.read('gone', async () => (misses++, undefined));
    expect(misses).toBe(2);
  });

  it('does not keep what a read fetched before a write that finished while it waited', async () => {
    const cache = new LocalReadCache<string>({ enabled: true, maxEntries: 10 });
    let release!: () => void;
    const slow = cache.read('a', () => new Promise<string>((resolve) => (release = () => resolve('old'))));
    cache.forget(['a']); // the write commits and forgets while the read is on its way
    release();
    expect(await slow).toBe('old');
    expect(await cache.read('a', async () => 'new')).toBe('new');
    // mark/keep: the same rule for reads that fetch many rows at once.
    const generation = cache.mark();
    cache.forget(['b']);
    cache.keep(generation, 'b', 'stale');
    expect(cache.get('b')).toBeUndefined();
  });

  it('drops the least recently used entry past maxEntries', async () => {
    const cache = new LocalReadCache<string>({ enabled: true, maxEntries: 2 });
    await cache.read('a', async () => 'A');
    await cache.read('b', async () => 'B');
    expect(cache.get('a')).toBe('A'); // a is now the most recent
    await cache.read('c', async () => 'C');
    expect(cache.get('b')).toBeUndefined();
    expect(cache.get('a')).toBe('A');
    expect(cache.get('c')).toBe('C');
  });

  it('deepFreeze freezes nested objects and arrays so a shared row cannot be changed', () => {
    const row = deepFreeze({ stages: [{ config: { parameters: { top_k: 10 } } }], at: new Date(0) });
    expect(() => {
      (row.stages[0]!.config.parameters as { top_k: number }).top_k = 5;
    }).toThrow(TypeError);
    expect(Object.isFrozen(row.at)).toBe(false);
  });
});
