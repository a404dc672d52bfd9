/**
 * Old id → new id for everything one instantiation copies. Ids are a type prefix and 20 random base62
 * characters (kernel/ids.ts), so an old id found anywhere — a column, a JSON config, inside a source key or
 * a storage key — can only mean that resource, and is replaced wherever it appears.
 */
import { newId } from '../../../kernel/ids.js';

const ID = /(?<![0-9A-Za-z])(?:ns|bkt|col|doc|ret)_[0-9A-Za-z]{20}(?![0-9A-Za-z])/g;

export class IdMap {
  private readonly ids = new Map<string, string>();

  /** A new id for `oldId` (the same one when asked again). */
  issue(oldId: string, prefix: string): string {
    let fresh = this.ids.get(oldId);
    if (!fresh) {
      fresh = newId(prefix);
      this.ids.set(oldId, fresh);
    }
    return fresh;
  }

  /** The new id of a copied resource; throws for one that was not copied (a bug, not an input problem). */
  of(oldId: string): string {
    const fresh = this.ids.get(oldId);
    if (!fresh) throw new Error(`no copy of ${oldId}`);
    return fresh;
  }

  /** Every copied id inside a text replaced; ids of what was not copied (bucket objects) stay. */
  text(value: string): string {
    return value.replace(ID, (id) => this.ids.get(id) ?? id);
  }

  textOrNull(value: string | null): string | null {
    return value === null ? null : this.text(value);
  }

  /** A JSON value with every copied id replaced, in strings and in object keys. */
  json<T>(value: T): T {
    return this.rewrite(value) as T;
  }

  private rewrite(value: unknown): unknown {
    if (typeof value === 'string') return this.text(value);
    if (Array.isArray(value)) return value.map((v) => this.rewrite(v));
    if (value === null || typeof value !== 'object' || value instanceof Date) return value;
    const out: Record<string, unknown> = {};
    for (const [key, v] of Object.entries(value)) out[this.text(key)] = this.rewrite(v);
    return out;
  }
}
