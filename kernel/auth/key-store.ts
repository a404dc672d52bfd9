/**
 * Persistence of API keys, and the hot-path lookup by secret hash. Lookups are cached for a short TTL;
 * every change evicts the key here at once and is announced on the event bus so other API processes
 * evict it too. Expiry is checked against the clock on every request, never cached. Secrets the
 * database does not know are remembered too (UnknownKeyCache), until a key is minted or rotated.
 */
import type { Knex } from 'knex';
import { newId } from '../ids.js';
import type { Clock } from '../clock.js';
import { displayPrefix, hashKey, type KeyType } from './keys.js';
import type { Permission } from './permissions.js';
import type { ResourceScope } from './scopes.js';
import { UnknownKeyCache } from './unknown-keys.js';

/** `expired` is written once a new key takes an expired key's name; until then expiry is computed. */
export type StoredKeyStatus = 'active' | 'revoked' | 'expired';
export type KeyStatus = StoredKeyStatus;

export interface KeyRecord {
  key_id: string;
  organization_id: string;
  user_id: string;
  name: string;
  description: string | null;
  key_hash: string;
  key_prefix: string;
  key_type: KeyType;
  permissions: Permission[];
  scopes: ResourceScope[];
  rate_limit_override: number | null;
  expires_at: Date | null;
  principal_id: string | null;
  allowed_origins: string[];
  status: StoredKeyStatus;
  /** Set for `ret_sk_` and `sk_marketplace_` keys: the one retriever they may execute (kernel/auth/keys.ts). */
  bound_retriever_id: string | null;
  /** The organization of that retriever (another one's for `sk_marketplace_` keys). */
  bound_organization_id: string | null;
  is_protected: boolean;
  last_used_at: Date | null;
  created_at: Date;
  created_by: string;
  updated_at: Date | null;
  revoked_at: Date | null;
  revoked_by: string | null;
  /** Joined from users and organizations. */
  user_email: string;
  organization_name: string;
}

export interface NewKey {
  organizationId: string;
  userId: string;
  name: string;
  description: string | null;
  plaintext: string;
  keyType: KeyType;
  permissions: Permission[];
  scopes: ResourceScope[];
  rateLimitOverride: number | null;
  expiresAt: Date | null;
  principalId: string | null;
  allowedOrigins: string[];
  isProtected: boolean;
  createdBy: string;
  /** For `ret_sk_` and `sk_marketplace_` keys only. */
  boundRetriever?: { organizationId: string; retrieverId: string } | null;
}

export type KeyChanges = Partial<
  Pick<KeyRecord, 'name' | 'description' | 'permissions' | 'scopes' | 'rate_limit_override' | 'expires_at' |
    'principal_id' | 'allowed_origins' | 'key_type'>
>;

const JSON_COLUMNS = ['permissions', 'scopes', 'allowed_origins'] as const;

export function keyStatus(key: Pick<KeyRecord, 'status' | 'expires_at'>, now: Date): KeyStatus {
  if (key.status !== 'active') return key.status;
  if (key.expires_at && key.expires_at.getTime() <= now.getTime()) return 'expired';
  return 'active';
}

function toColumns(changes: KeyChanges): Record<string, unknown> {
  const out: Record<string, unknown> = { ...changes };
  for (const column of JSON_COLUMNS) {
    if (column in out) out[column] = JSON.stringify(out[column]);
  }
  return out;
}

interface CacheEntry {
  record: KeyRecord;
  cachedUntil: number;
}

export interface UnknownKeyCacheSettings {
  maxEntries: number;
  ttlMs: number;
}

export class KeyStore {
  private readonly byHash = new Map<string, CacheEntry>();
  private readonly unknown: UnknownKeyCache;
  private readonly pendingLastUsed = new Map<string, Date>();
  private flushing: Promise<void> = Promise.resolve();
  /** Database lookups by secret hash so far (what the caches save; read by tests and benchmarks). */
  lookups = 0;

  constructor(
    private readonly db: Knex,
    private readonly clock: Clock,
    private readonly cacheTtlMs: number,
    unknownKeys: UnknownKeyCacheSettings = { maxEntries: 0, ttlMs: 0 },
  ) {
    this.unknown = new UnknownKeyCache(unknownKeys.maxEntries, unknownKeys.ttlMs);
  }

  private selectKeys(db: Knex) {
    return db('api_keys as k')
      .join('users as u', 'u.user_id', 'k.user_id')
      .join('organizations as o', 'o.organization_id', 'k.organization_id')
      .select('k.*', 'u.email as user_email', 'o.name as organization_name');
  }

  /** The key a secret belongs to, if it is stored and not revoked (expiry is the caller's check). */
  async findByPlaintext(plaintext: string): Promise<KeyRecord | undefined> {
    const hash = hashKey(plaintext);
    const now = Date.now();
    const cached = this.findCached(hash, now);
    if (cached) return cached;
    if (this.unknown.has(hash, now)) return undefined;
    this.lookups += 1;
    const record = (await this.selectKeys(this.db).where('k.key_hash', hash).where('k.status', 'active').first()) as
      | KeyRecord
      | undefined;
    if (record && this.cacheTtlMs > 0) this.byHash.set(hash, { record, cachedUntil: now + this.cacheTtlMs });
    else this.byHash.delete(hash);
    if (!record) this.unknown.add(hash, now);
    return record;
  }

  /** The key of a secret when this process has it cached, without touching the database. */
  findCachedByPlaintext(plaintext: string): KeyRecord | undefined {
    return this.findCached(hashKey(plaintext), Date.now());
  }

  private findCached(hash: string, now: number): KeyRecord | undefined {
    const cached = this.byHash.get(hash);
    return cached && cached.cachedUntil > now ? cached.record : undefined;
  }

  /**
   * Forgets every secret remembered as unknown: called when a key is minted or rotated in any process
   * (the event carries no secret or hash, so the whole set goes; minting keys is rare).
   */
  forgetUnknownKeys(): void {
    this.unknown.clear();
  }

  /** Drops every cached lookup of this key (its current and any previous secret). */
  evict(keyId: string): void {
    for (const [hash, entry] of this.byHash) {
      if (entry.record.key_id === keyId) this.byHash.delete(hash);
    }
  }

  async insert(db: Knex, key: NewKey): Promise<KeyRecord> {
    const keyId = newId('key');
    this.unknown.forget(hashKey(key.plaintext));
    await db('api_keys').insert({
      key_id: keyId,
      organization_id: key.organizationId,
      user_id: key.userId,
      name: key.name,
      description: key.description,
      key_hash: hashKey(key.plaintext),
      key_prefix: displayPrefix(key.plaintext),
      key_type: key.keyType,
      permissions: JSON.stringify(key.permissions),
      scopes: JSON.stringify(key.scopes),
      rate_limit_override: key.rateLimitOverride,
      expires_at: key.expiresAt,
      principal_id: key.principalId,
      allowed_origins: JSON.stringify(key.allowedOrigins),
      status: 'active',
      bound_retriever_id: key.boundRetriever?.retrieverId ?? null,
      bound_organization_id: key.boundRetriever?.organizationId ?? null,
      is_protected: key.isProtected,
      created_at: this.clock.now(),
      created_by: key.createdBy,
    });
    return (await this.findById(key.organizationId, keyId, db))!;
  }

  async findById(organizationId: string, keyId: string, db: Knex = this.db): Promise<KeyRecord | undefined> {
    return (await this.selectKeys(db).where({ 'k.organization_id': organizationId, 'k.key_id': keyId }).first()) as
      | KeyRecord
      | undefined;
  }

  /**
   * The user's non-revoked key of that name (names are unique among those). Keys bound to a retriever are
   * not the user's to manage by name: they are managed where they were made (the retriever, the subscription).
   */
  async findByName(organizationId: string, userId: string, name: string, db: Knex = this.db): Promise<KeyRecord | undefined> {
    return (await this.selectKeys(db)
      .where({ 'k.organization_id': organizationId, 'k.user_id': userId, 'k.name': name, 'k.status': 'active' })
      .whereNull('k.bound_retriever_id')
      .first()) as KeyRecord | undefined;
  }

  async listForUser(organizationId: string, userId: string, includeRevoked: boolean): Promise<KeyRecord[]> {
    const query = this.selectKeys(this.db)
      .where({ 'k.organization_id': organizationId, 'k.user_id': userId })
      .whereNot('k.key_type', 'session')
      .whereNull('k.bound_retriever_id')
      .orderBy([{ column: 'k.created_at', order: 'asc' }, { column: 'k.key_id', order: 'asc' }]);
    if (!includeRevoked) query.whereNot('k.status', 'revoked');
    return (await query) as KeyRecord[];
  }

  /** The keys of one type bound to a retriever, made in this organization, oldest first. */
  async listBound(organizationId: string, retrieverId: string, keyType: KeyType, includeRevoked: boolean): Promise<KeyRecord[]> {
    const query = this.selectKeys(this.db)
      .where({ 'k.organization_id': organizationId, 'k.bound_retriever_id': retrieverId, 'k.key_type': keyType })
      .orderBy([{ column: 'k.created_at', order: 'asc' }, { column: 'k.key_id', order: 'asc' }]);
    if (!includeRevoked) query.whereNot('k.status', 'revoked');
    return (await query) as KeyRecord[];
  }

  /**
   * Names of bound keys are unique per retriever among active keys: an expired one gives its name up the way
   * retireExpiredName() does for a user's keys.
   */
  async retireExpiredBoundName(db: Knex, organizationId: string, retrieverId: string, name: string): Promise<void> {
    const now = this.clock.now();
    await db('api_keys')
      .where({ organization_id: organizationId, bound_retriever_id: retrieverId, name, status: 'active' })
      .where('expires_at', '<=', now)
      .update({ status: 'expired', updated_at: now });
  }

  async listActiveIdsForUser(db: Knex, organizationId: string, userId: string): Promise<KeyRecord[]> {
    return (await this.selectKeys(db)
      .where({ 'k.organization_id': organizationId, 'k.user_id': userId, 'k.status': 'active' })) as KeyRecord[];
  }

  /**
   * Names are unique among active keys; an expired key still holds its name in the unique index until it
   * is marked expired here, which frees the name for a new key.
   */
  async retireExpiredName(db: Knex, organizationId: string, userId: string, name: string): Promise<void> {
    const now = this.clock.now();
    await db('api_keys')
      .where({ organization_id: organizationId, user_id: userId, name, status: 'active' })
      .whereNull('bound_retriever_id')
      .where('expires_at', '<=', now)
      .update({ status: 'expired', updated_at: now });
  }

  async update(db: Knex, organizationId: string, keyId: string, changes: KeyChanges): Promise<KeyRecord> {
    await db('api_keys')
      .where({ organization_id: organizationId, key_id: keyId })
      .update({ ...toColumns(changes), updated_at: this.clock.now() });
    this.evict(keyId);
    return (await this.findById(organizationId, keyId, db))!;
  }

  async replaceSecret(db: Knex, organizationId: string, keyId: string, plaintext: string): Promise<KeyRecord> {
    this.unknown.forget(hashKey(plaintext));
    await db('api_keys')
      .where({ organization_id: organizationId, key_id: keyId })
      .update({ key_hash: hashKey(plaintext), key_prefix: displayPrefix(plaintext), updated_at: this.clock.now() });
    this.evict(keyId);
    return (await this.findById(organizationId, keyId, db))!;
  }

  async revoke(db: Knex, organizationId: string, keyId: string, revokedBy: string): Promise<KeyRecord> {
    const now = this.clock.now();
    await db('api_keys')
      .where({ organization_id: organizationId, key_id: keyId, status: 'active' })
      .update({ status: 'revoked', revoked_at: now, revoked_by: revokedBy, updated_at: now });
    this.evict(keyId);
    return (await this.findById(organizationId, keyId, db))!;
  }

  /** Remembers a successful use; written in batches by flushLastUsed(). */
  noteUsed(keyId: string, at: Date): void {
    const previous = this.pendingLastUsed.get(keyId);
    if (!previous || previous < at) this.pendingLastUsed.set(keyId, at);
  }

  /**
   * Writes every use noted so far. Flushes run one after another, so when this resolves, every use noted
   * before the call is in the database, even one a concurrent (timer) flush had already taken.
   */
  flushLastUsed(): Promise<void> {
    const run = this.flushing.then(() => this.writeLastUsed());
    this.flushing = run.catch(() => undefined);
    return run;
  }

  private async writeLastUsed(): Promise<void> {
    if (this.pendingLastUsed.size === 0) return;
    const batch = [...this.pendingLastUsed];
    this.pendingLastUsed.clear();
    for (const [keyId, at] of batch) {
      await this.db('api_keys')
        .where({ key_id: keyId })
        .where((q) => q.whereNull('last_used_at').orWhere('last_used_at', '<', at))
        .update({ last_used_at: at });
    }
  }
}
