import { describe, expect, it, vi } from 'vitest';
import { deepFreeze, LocalReadCache } from '../../../kernel/db/local-read-cache.js';
import type { CrossProcessNotices } from '../../../kernel/db/pg-notices.js';

/** What PostgresNotices gives a cache, driven by hand: which notices went out, and the other processes' notices in. */
class FakeNotices implements CrossProcessNotices {
  listening = true;
  sent: Array<[string, readonly string[] | null]> = [];
  private readonly noticeListeners: Array<(topic: string, keys: readonly string[] | null) => void> = [];
  private readonly resetListeners: Array<() => void> = [];
  notify(topic: string, keys: readonly string[] | null): void {
    this.sent.push([topic, keys]);
  }
  onNotice(listener: (topic: string, keys: readonly string[] | null) => void): () => void {
    this.noticeListeners.push(listener);
    return () => undefined;
  }
  onReset(listener: () => void): () => void {
    this.resetListeners.push(listener);
    return () => undefined;
  }
  /** Another process says it wrote. */
  receive(topic: string, keys: readonly string[] | null): void {
    for (const listener of this.noticeListeners) listener(topic, keys);
  }
  setListening(listening: boolean): void {
    this.listening = listening;
    for (const listener of this.resetListeners) listener();
  }
}

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

  describe('with other processes writing (crossProcess notices)', () => {
    const make = (notices: FakeNotices, ttlMs = 60_000) =>
      new LocalReadCache<number>({ enabled: false, maxEntries: 10, crossProcess: { name: 'things', notices, ttlMs } });

    it('answers from memory while notices are received, and forgets what another process says it wrote', async () => {
      const notices = new FakeNotices();
      const cache = make(notices);
      let loads = 0;
      expect(cache.enabled).toBe(true);
      expect(await cache.read('a', async () => ++loads)).toBe(1);
      expect(await cache.read('a', async () => ++loads)).toBe(1);
      notices.receive('cache:other-things', ['a']);
      expect(await cache.read('a', async () => ++loads)).toBe(1);
      notices.receive('cache:things', ['a']);
      expect(await cache.read('a', async () => ++loads)).toBe(2);
      notices.receive('cache:things', null);
      expect(await cache.read('a', async () => ++loads)).toBe(3);
    });

    it('tells the other processes what it forgets', () => {
      const notices = new FakeNotices();
      const cache = make(notices);
      cache.forget(['a', 'b']);
      cache.forgetAll();
      expect(notices.sent).toEqual([['cache:things', ['a', 'b']], ['cache:things', null]]);
    });

    it('reads the database while notices are not received, and forgets everything when they stop or start', async () => {
      const notices = new FakeNotices();
      const cache = make(notices);
      let loads = 0;
      await cache.read('a', async () => ++loads);
      notices.setListening(false);
      expect(cache.enabled).toBe(false);
      expect(cache.get('a')).toBeUndefined();
      expect(await cache.read('a', async () => ++loads)).toBe(2);
      expect(await cache.read('a', async () => ++loads)).toBe(3);
      notices.setListening(true);
      // Notices sent while not listening were missed: nothing from before is kept.
      expect(await cache.read('a', async () => ++loads)).toBe(4);
      expect(await cache.read('a', async () => ++loads)).toBe(4);
    });

    it('does not keep a read that was on its way when listening stopped', async () => {
      const notices = new FakeNotices();
      const cache = make(notices);
      let release!: () => void;
      const slow = cache.read('a', () => new Promise<number>((resolve) => (release = () => resolve(1))));
      notices.setListening(false);
      notices.setListening(true);
      release();
      expect(await slow).toBe(1);
      expect(await cache.read('a', async () => 2)).toBe(2);
    });

    it('keeps an entry for at most ttlMs, so a notice lost in a race is not lost for long', async () => {
      vi.useFakeTimers({ toFake: ['performance'] });
      try {
        const cache = make(new FakeNotices(), 1_000);
        let loads = 0;
        await cache.read('a', async () => ++loads);
        vi.advanceTimersByTime(999);
        expect(await cache.read('a', async () => ++loads)).toBe(1);
        vi.advanceTimersByTime(2);
        expect(await cache.read('a', async () => ++loads)).toBe(2);
      } finally {
        vi.useRealTimers();
      }
    });

    it('is the embedded cache, without notices or time limit, when this process is the only writer', async () => {
      const notices = new FakeNotices();
      const cache = new LocalReadCache<number>({ enabled: true, maxEntries: 10, crossProcess: { name: 'things', notices, ttlMs: 1 } });
      await cache.read('a', async () => 1);
      await new Promise((resolve) => setTimeout(resolve, 5));
      notices.setListening(false);
      expect(await cache.read('a', async () => 2)).toBe(1);
      cache.forgetAll();
      expect(notices.sent).toEqual([]);
    });
  });
});
