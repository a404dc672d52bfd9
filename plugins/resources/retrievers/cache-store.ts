/**
 * The retriever result cache's storage (kernel/retrieval/cache.ts says what is cached and how keys are
 * made): entries and data versions in the database, so every API process shares one cache and sees every
 * invalidation at once. Bounds: one row per key (rewritten, never duplicated), entries over
 * MAX_CACHE_ENTRY_BYTES are not kept, at most MAX_CACHE_ENTRIES_PER_ORGANIZATION rows per organization
 * (the oldest go first), and expired rows are swept by a background task.
 */
import { createHash } from 'node:crypto';
import type { Knex } from 'knex';
import type { Clock } from '../../../kernel/clock.js';
import {
  versionScope,
  type CacheEntry,
  type CacheHit,
  type CacheStorage,
  type CachedStageCounts,
  type CollectionDataChange,
  type RetrievalCacheInvalidation,
} from '../../../kernel/retrieval/cache.js';
import type { TaskQueue } from '../../../kernel/tasks/task-queue.js';

export const CACHE_INVALIDATE_TASK = 'retrievers.cache_invalidate';
export const CACHE_SWEEP_TASK = 'retrievers.cache_sweep';
export const MAX_CACHE_ENTRIES_PER_ORGANIZATION = 10_000;
/** Every this many stored entries, a sweep is scheduled (besides the periodic one). */
const SWEEP_EVERY_STORES = 200;

/** Why entries left the cache (recorded per retriever for the cache analytics). */
export type EvictionReason = 'expired' | 'invalidated' | 'over_bound';

interface EvictedRow {
  organization_id: string;
  namespace_id: string;
  retriever_id: string;
}

export interface CacheInvalidationPayload {
  organization_id: string;
  namespace_id: string;
  collection_ids: string[];
  action: string;
  retrievers: string[];
}

export interface CacheHitRate {
  /** Executions of the retriever while it cached. */
  executions: number;
  hits: number;
  misses: number;
  /** hits / executions; null before any execution that cached. */
  hit_rate: number | null;
}

/** A retriever's hit rate before any execution. */
export const NO_EXECUTIONS: CacheHitRate = Object.freeze({ executions: 0, hits: 0, misses: 0, hit_rate: null });

export class RetrieverCacheStore implements CacheStorage, RetrievalCacheInvalidation {
  private storedSinceSweep = 0;

  constructor(
    private readonly db: Knex,
    private readonly clock: Clock,
    private readonly tasks: () => TaskQueue,
    /** Finds a retriever by id or name in a namespace (invalidation rules may name either). */
    private readonly findRetriever: (organizationId: string, namespaceId: string, nameOrId: string) => Promise<{ retriever_id: string } | undefined>,
  ) {}

  now(): Date {
    return this.clock.now();
  }

  async versions(organizationId: string, scopes: readonly string[]): Promise<Map<string, number>> {
    const rows = (await this.db('retriever_cache_versions')
      .where({ organization_id: organizationId })
      .whereRaw('scope = any(?::text[])', [[...scopes]] as unknown as Knex.RawBinding[])
      .select('scope', 'version')) as Array<{ scope: string; version: string | number }>;
    return new Map(rows.map((r) => [r.scope, Number(r.version)]));
  }

  async lookup(organizationId: string, keys: readonly string[], now: Date): Promise<CacheHit[]> {
    const rows = (await this.db('retriever_cache_entries')
      .where({ organization_id: organizationId })
      .whereRaw('cache_key = any(?::text[])', [[...keys]] as unknown as Knex.RawBinding[])
      .where('expires_at', '>', now)
      .select('cache_key', 'documents', 'statistics')) as Array<{ cache_key: string; documents: string; statistics: CachedStageCounts[] }>;
    return rows.map((r) => ({ cacheKey: r.cache_key, documents: r.documents, statistics: r.statistics }));
  }

  async store(entry: CacheEntry): Promise<void> {
    const now = this.clock.now();
    await this.db('retriever_cache_entries')
      .insert({
        cache_key: entry.cacheKey,
        organization_id: entry.organizationId,
        namespace_id: entry.namespaceId,
        retriever_id: entry.retrieverId,
        stage_name: entry.stageName,
        stage_index: entry.stageIndex,
        collection_ids: JSON.stringify(entry.collectionIds),
        documents: entry.documents,
        statistics: JSON.stringify(entry.statistics),
        size_bytes: Buffer.byteLength(entry.documents),
        created_at: now,
        expires_at: entry.expiresAt,
      })
      .onConflict('cache_key')
      .merge(['documents', 'statistics', 'size_bytes', 'created_at', 'expires_at']);
    this.storedSinceSweep += 1;
    if (this.storedSinceSweep >= SWEEP_EVERY_STORES) {
      this.storedSinceSweep = 0;
      await this.scheduleSweep();
    }
  }

  scheduleSweep(): Promise<unknown> {
    return this.tasks().enqueue(CACHE_SWEEP_TASK, {}, { dedupeKey: CACHE_SWEEP_TASK });
  }

  /**
   * A committed change: its collections' (and namespace's) versions go up now, in the writer's request, so
   * no process can serve a result read before it. Dropping the caches of retrievers named by invalidation
   * rules (and the rows of a deleted collection) is more than a counter: it runs as a background task.
   */
  async collectionsChanged(change: CollectionDataChange): Promise<void> {
    if (change.collectionIds.length === 0) return;
    const scopes = [...new Set([...change.collectionIds.map(versionScope.collection), versionScope.namespace(change.namespaceId)])].sort();
    await this.bump(change.organizationId, scopes);
    if (change.retrievers.length === 0 && change.action !== 'collection.deleted') return;
    const payload: CacheInvalidationPayload = {
      organization_id: change.organizationId,
      namespace_id: change.namespaceId,
      collection_ids: [...change.collectionIds],
      action: change.action,
      retrievers: [...new Set(change.retrievers)].sort(),
    };
    const dedupe = createHash('sha256').update(JSON.stringify(payload)).digest('hex');
    await this.tasks().enqueue(CACHE_INVALIDATE_TASK, { ...payload }, { organizationId: change.organizationId, dedupeKey: `cache-invalidate:${dedupe}` });
  }

  /** The background half of an invalidation: named retrievers lose their cache; a deleted collection's rows go. */
  async invalidate(payload: CacheInvalidationPayload): Promise<{ retrievers: number; entries: number }> {
    const ids: string[] = [];
    for (const name of payload.retrievers) {
      const found = await this.findRetriever(payload.organization_id, payload.namespace_id, name);
      if (found) ids.push(found.retriever_id);
    }
    let entries = 0;
    if (ids.length > 0) {
      // The generation goes up first: an execution still running stores under the old key, which nobody looks up.
      await this.bump(payload.organization_id, ids.map(versionScope.retriever).sort());
      entries += await this.deleteWhere('invalidated', (q) => q.where({ organization_id: payload.organization_id }).whereIn('retriever_id', ids));
    }
    if (payload.action === 'collection.deleted') {
      for (const collectionId of payload.collection_ids) {
        entries += await this.deleteWhere('invalidated', (q) =>
          q.where({ organization_id: payload.organization_id }).whereRaw('collection_ids @> ?::jsonb', [JSON.stringify([collectionId])]),
        );
      }
    }
    return { retrievers: ids.length, entries };
  }

  /** Removes expired rows, then the oldest rows of organizations over their bound. */
  async sweep(): Promise<{ expired: number; over_bound: number }> {
    const expired = await this.deleteWhere('expired', (q) => q.where('expires_at', '<=', this.clock.now()));
    const result = (await this.db.raw<{ rows: EvictedRow[] }>(
      `delete from retriever_cache_entries where cache_key in (
         select cache_key from (
           select cache_key, row_number() over (partition by organization_id order by created_at desc, cache_key) as position
           from retriever_cache_entries
         ) ranked where position > ?
       ) returning organization_id, namespace_id, retriever_id`,
      [MAX_CACHE_ENTRIES_PER_ORGANIZATION],
    )) as { rows: EvictedRow[] };
    await this.recordEvictions('over_bound', result.rows);
    return { expired, over_bound: result.rows.length };
  }

  async hitRate(retrieverId: string): Promise<CacheHitRate> {
    return (await this.hitRates([retrieverId])).get(retrieverId)!;
  }

  /** Each retriever's hit rate, in one statement (a page of a list). */
  async hitRates(retrieverIds: readonly string[]): Promise<Map<string, CacheHitRate>> {
    const rates = new Map<string, CacheHitRate>(retrieverIds.map((id) => [id, NO_EXECUTIONS]));
    if (retrieverIds.length === 0) return rates;
    const rows = (await this.db('retriever_executions')
      .whereIn('retriever_id', [...retrieverIds])
      .groupBy('retriever_id')
      .select('retriever_id', this.db.raw('count(cache_hit) as executions'), this.db.raw('count(*) filter (where cache_hit) as hits'))) as Array<{
      retriever_id: string;
      executions: string | number;
      hits: string | number;
    }>;
    for (const row of rows) {
      const executions = Number(row.executions);
      const hits = Number(row.hits);
      rates.set(row.retriever_id, { executions, hits, misses: executions - hits, hit_rate: executions === 0 ? null : hits / executions });
    }
    return rates;
  }

  private async bump(organizationId: string, scopes: readonly string[]): Promise<void> {
    // Scopes in one order everywhere: concurrent bumps lock their rows in the same order (no deadlock).
    await this.db.raw(
      `insert into retriever_cache_versions (scope, organization_id, version)
       select s, ?, 1 from unnest(?::text[]) as u(s)
       on conflict (scope) do update set version = retriever_cache_versions.version + 1`,
      [organizationId, [...scopes]] as unknown as Knex.RawBinding[],
    );
  }

  private async deleteWhere(reason: EvictionReason, where: (q: Knex.QueryBuilder) => Knex.QueryBuilder): Promise<number> {
    // Counted from RETURNING: PGlite's knex client does not report a row count for DELETE.
    const rows = (await where(this.db('retriever_cache_entries'))
      .delete()
      .returning(['organization_id', 'namespace_id', 'retriever_id'])) as EvictedRow[];
    await this.recordEvictions(reason, rows);
    return rows.length;
  }

  /** One row per retriever and reason: the cache analytics count evictions over a window from these. */
  private async recordEvictions(reason: EvictionReason, rows: readonly EvictedRow[]): Promise<void> {
    if (rows.length === 0) return;
    const counts = new Map<string, EvictedRow & { entries: number }>();
    for (const row of rows) {
      const key = `${row.organization_id}\u0000${row.retriever_id}`;
      const seen = counts.get(key);
      if (seen) seen.entries += 1;
      else counts.set(key, { organization_id: row.organization_id, namespace_id: row.namespace_id, retriever_id: row.retriever_id, entries: 1 });
    }
    const occurredAt = this.clock.now();
    await this.db('retriever_cache_evictions').insert([...counts.values()].map((c) => ({ ...c, reason, occurred_at: occurredAt })));
  }
}
