/**
 * Rows read from the database, kept in this process for the hot read paths (a retriever's definition, the
 * collections it runs over, the documents a search returns) — only when this process is the database's
 * only writer: the embedded default (PGlite serves one process). The code that writes those rows calls
 * `forget`/`forgetAll` before its request answers, so a hit is never older than the last acknowledged
 * write. With a shared database (PostgreSQL, several API and worker processes) other processes write too,
 * so the cache is off and every read goes to the database. The threads of one process that share the
 * embedded database (API and task thread) tell each other what they forget (`shared`).
 *
 * A read that started before a write finished could put back what the write replaced: each read notes the
 * cache's generation before it goes to the database and keeps its value only if no write came in between.
 */
import type { DatabaseNotices } from './database.js';

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
}

export class LocalReadCache<V> {
  private readonly entries = new Map<string, V>();
  private generation = 0;

  private readonly topic: string | undefined;

  constructor(private readonly options: LocalReadCacheOptions) {
    const shared = options.enabled ? options.shared : undefined;
    if (shared?.notices) {
      this.topic = `cache:${shared.name}`;
      shared.notices.onNotice((topic, payload) => {
        if (topic === this.topic) this.forgetHere(payload as string[] | null);
      });
    }
  }

  get enabled(): boolean {
    return this.options.enabled;
  }

  /** The cached value, or `load()`'s (kept when it is defined and no write came in meanwhile). */
  async read(key: string, load: () => Promise<V | undefined>): Promise<V | undefined> {
    if (!this.options.enabled) return load();
    const hit = this.get(key);
    if (hit !== undefined) return hit;
    const before = this.generation;
    const value = await load();
    if (value !== undefined && before === this.generation) this.set(key, value);
    return value;
  }

  /** The cached value, refreshed as most recently used; undefined on a miss or when the cache is off. */
  get(key: string): V | undefined {
    const hit = this.entries.get(key);
    if (hit === undefined) return undefined;
    this.entries.delete(key);
    this.entries.set(key, hit);
    return hit;
  }

  /** The generation a read must note before going to the database, to `keep` what it read. */
  mark(): number {
    return this.generation;
  }

  /** Keeps `value` if no write happened since `mark()` returned `generation`. */
  keep(generation: number, key: string, value: V): void {
    if (this.options.enabled && generation === this.generation) this.set(key, value);
  }

  forget(keys: Iterable<string>): void {
    const list = [...keys];
    this.forgetHere(list);
    if (this.topic) this.options.shared!.notices!.notify(this.topic, list);
  }

  forgetAll(): void {
    this.forgetHere(null);
    if (this.topic) this.options.shared!.notices!.notify(this.topic, null);
  }

  /** Forgets `keys` (all with null) in this thread only. */
  private forgetHere(keys: readonly string[] | null): void {
    this.generation += 1;
    if (keys === null) this.entries.clear();
    else for (const key of keys) this.entries.delete(key);
  }

  private set(key: string, value: V): void {
    this.entries.delete(key);
    this.entries.set(key, value);
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
