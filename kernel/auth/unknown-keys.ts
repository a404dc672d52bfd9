/**
 * Hashes of keys the database did not know, remembered for a short TTL so a client retrying a wrong or
 * revoked key (or a scanner replaying one) costs no query. Bounded: the oldest entry goes first once it is
 * full (a Map iterates in insertion order, and a hit re-inserts). Cleared whenever a key is minted or
 * rotated anywhere, so a new key works at once even if its secret was tried before it existed.
 */
export class UnknownKeyCache {
  private readonly expiresAt = new Map<string, number>();

  constructor(
    private readonly maxEntries: number,
    private readonly ttlMs: number,
  ) {}

  get enabled(): boolean {
    return this.maxEntries > 0 && this.ttlMs > 0;
  }

  has(hash: string, now: number): boolean {
    const until = this.expiresAt.get(hash);
    if (until === undefined) return false;
    this.expiresAt.delete(hash);
    if (until <= now) return false;
    this.expiresAt.set(hash, until);
    return true;
  }

  add(hash: string, now: number): void {
    if (!this.enabled) return;
    this.expiresAt.delete(hash);
    this.expiresAt.set(hash, now + this.ttlMs);
    while (this.expiresAt.size > this.maxEntries) this.expiresAt.delete(this.expiresAt.keys().next().value!);
  }

  forget(hash: string): void {
    this.expiresAt.delete(hash);
  }

  clear(): void {
    this.expiresAt.clear();
  }

  get size(): number {
    return this.expiresAt.size;
  }
}
