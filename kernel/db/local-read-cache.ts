/**
 * Rows read from the database, kept in this process for the hot read paths (a retriever's definition, the
 * collections it runs over, the documents a search returns) — when this process is the database's only
 * writer: the embedded default (PGlite serves one process). The code that writes those rows calls
 * `forget`/`forgetAll` before its request answers, so a hit is never older than the last acknowledged
 * write. The threads of one process that share the embedded database (API and task thread) tell each other
 * what they forget (`shared`).
 *
 * With a shared database (PostgreSQL, several API and worker processes) other processes write too: a cache
 * is then off (every read goes to the database) unless it is given `crossProcess` notices
 * (kernel/db/pg-notices.ts), for rarely written rows. It then answers from memory while those notices are
 * received, forgets what other processes say they wrote a moment after they wrote it, keeps no entry
 * longer than `ttlMs`, and forgets everything whenever the notices stop or start again.
 *
 * A read that started before a write finished could put back what the write replaced: each read notes the
 * cache's generation before it goes to the database and keeps its value only if no write came in between.
 */
import type { DatabaseNotices } from './database.js';
import type { CrossProcessNotices } from './pg-notices.js';

export interface LocalReadCacheOptions {
  /** False when other processes write the same database: every read then goes to it. */
  enabled: boolean;
  /** Entries kept at most; the least recently used go first. */
  maxEntries: number;
  /**
   * Other threads of this process that write the same embedded database (the task thread): what one
   * forgets, the same-named cache in the others forgets too, before they read the write's result.
   */
  shared?: { name: string; notices: DatabaseNotices | undefined };
  /**
   * Other processes writing the same database (PostgreSQL): the cache answers from memory while `notices`
   * are received, each entry for at most `ttlMs`; what it forgets, the same-named cache of the other processes
   * forgets too.
   */
  crossProcess?: { name: string; notices: CrossProcessNotices; ttlMs: number };
}

export class LocalReadCache<V> {
  private readonly entries = new Map<string, { value: V; until: number }>();
  private generation = 0;

  private readonly topic: string | undefined;
  private readonly crossProcess: LocalReadCacheOptions['crossProcess'];
  private readonly crossProcessTopic: string;

  constructor(private readonly options: LocalReadCacheOptions) {
    const shared = options.enabled ? options.shared : undefined;
    if (shared?.notices) {
      this.topic = `cache:${shared.name}`;
      shared.notices.onNotice((topic, payload) => {
        if (topic === this.topic) this.forgetHere(payload as string[] | null);
      });
    }
    // The only writer needs no word from other processes.
    this.crossProcess = options.enabled ? undefined : options.crossProcess;
    this.crossProcessTopic = `cache:${options.crossProcess?.name}`;
    if (this.crossProcess) {
      this.crossProcess.notices.onNotice((topic, keys) => {
        if (topic === this.crossProcessTopic) this.forgetHere(keys);
      });
      this.crossProcess.notices.onReset(() => this.forgetHere(null));
    }
  }

  /** True while a read may be answered from memory. */
  get enabled(): boolean {
    return this.options.enabled || this.crossProcess?.notices.listening === true;
  }

  /** The cached value, or `load()`'s (kept when it is defined and no write came in meanwhile). */
  async read(key: string, load: () => Promise<V | undefined>): Promise<V | undefined> {
    if (!this.enabled) return load();
    const hit = this.get(key);
    if (hit !== undefined) return hit;
    const before = this.generation;
    const value = await load();
    if (value !== undefined && before === this.generation) this.set(key, value);
    return value;
  }

  /** The cached value, refreshed as most recently used; undefined on a miss or when the cache is off. */
  get(key: string): V | undefined {
    if (!this.enabled) return undefined;
    const hit = this.entries.get(key);
    if (hit === undefined) return undefined;
    this.entries.delete(key);
    if (hit.until < performance.now()) return undefined;
    this.entries.set(key, hit);
    return hit.value;
  }

  /** The generation a read must note before going to the database, to `keep` what it read. */
  mark(): number {
    return this.generation;
  }

  /** Keeps `value` if no write happened since `mark()` returned `generation`. */
  keep(generation: number, key: string, value: V): void {
    if (this.enabled && generation === this.generation) this.set(key, value);
  }

  forget(keys: Iterable<string>): void {
    const list = [...keys];
    this.forgetHere(list);
    if (this.topic) this.options.shared!.notices!.notify(this.topic, list);
    this.crossProcess?.notices.notify(this.crossProcessTopic, list);
  }

  forgetAll(): void {
    this.forgetHere(null);
    if (this.topic) this.options.shared!.notices!.notify(this.topic, null);
    this.crossProcess?.notices.notify(this.crossProcessTopic, null);
  }

  /** Forgets `keys` (all with null) in this thread only. */
  private forgetHere(keys: readonly string[] | null): void {
    this.generation += 1;
    if (keys === null) this.entries.clear();
    else for (const key of keys) this.entries.delete(key);
  }

  private set(key: string, value: V): void {
    this.entries.delete(key);
    this.entries.set(key, { value, until: this.crossProcess ? performance.now() + this.crossProcess.ttlMs : Infinity });
    if (this.entries.size > this.options.maxEntries) this.entries.delete(this.entries.keys().next().value as string);
  }
}

/**
 * Freezes a value kept in a cache and its nested objects: every reader shares it, so a reader that changed
 * it would change it for the others. Dates stay as they are (freezing does not stop their setters).
 */
export function deepFreeze<T>(value: T): T {
  if (value === null || typeof value !== 'object' || Object.isFrozen(value) || value instanceof Date) return value;
  Object.freeze(value);
  for (const nested of Object.values(value as Record<string, unknown>)) deepFreeze(nested);
  return value;
}
