/**
 * Retriever result caching. A saved retriever with `cache_config.enabled` keeps the output of the stages
 * `cache_stage_names` names (of its last stage when the list is empty: the whole pipeline, before
 * pagination, so every page is served by one entry) for `ttl_seconds`.
 *
 * The key of a stage's output chains everything that output depends on:
 *   base  = organization, namespace, caller's principal (null for keys that are not user-scoped), retriever,
 *           the retriever's cache generation, and each collection with its data version;
 *   key_i = hash(key_{i-1}, stage id, stage version, parameters after filling placeholders)
 * An `enrich` stage may read any collection of the namespace, so it also mixes in the namespace's data version.
 * No entry is ever read across organizations or principals, since both are in every key.
 *
 * Invalidation is by version: every committed document write, delete or grant change bumps its collection's
 * (and namespace's) data version in the database, so a result read before it can no longer be found, in
 * every API process, with no message to deliver. Rows left behind expire and are swept. A collection's
 * `cache_config.invalidation_events` additionally drop the caches of the retrievers they name (their
 * generation goes up) in a background task.
 *
 * A hit skips the stages it covers: they report `cache_hit: true`, the input and output counts they had when
 * the entry was made, no duration and no credits (nothing ran, nothing is charged).
 */
import { createHash } from 'node:crypto';
import type { Logger } from 'pino';
import type { RetrievalCollection, StageDocument, StagePlugin } from '../plugins.js';
import { valueKey } from './documents.js';

/** Without `ttl_seconds`, entries live an hour. */
export const DEFAULT_CACHE_TTL_SECONDS = 3600;
/** A stage output bigger than this (serialized) is not cached: the cache holds results, not corpora. */
export const MAX_CACHE_ENTRY_BYTES = 4 * 1024 * 1024;

/** What a retriever asks of the cache (from its `cache_config` and `cache_stage_names`). */
export interface ExecutionCacheRequest {
  retrieverId: string;
  ttlSeconds: number;
  /** Stage names whose output is cached; empty: the last stage's (the whole pipeline). */
  stageNames: readonly string[];
}

/** The counts a stage had when its output was cached (reported again on a hit). */
export interface CachedStageCounts {
  stage_name: string;
  input_count: number;
  output_count: number;
}

export interface CacheEntry {
  cacheKey: string;
  organizationId: string;
  namespaceId: string;
  retrieverId: string;
  stageName: string;
  stageIndex: number;
  collectionIds: readonly string[];
  /** The stage's output documents, serialized as JSON (exactly what a hit returns). */
  documents: string;
  /** Counts of this stage and every stage before it. */
  statistics: readonly CachedStageCounts[];
  expiresAt: Date;
}

export interface CacheHit {
  cacheKey: string;
  documents: string;
  statistics: CachedStageCounts[];
}

/** Scopes whose data versions enter cache keys. */
export const versionScope = {
  collection: (collectionId: string) => `collection:${collectionId}`,
  namespace: (namespaceId: string) => `namespace:${namespaceId}`,
  retriever: (retrieverId: string) => `retriever:${retrieverId}`,
};

/** Where entries and data versions live: shared by every API process (the retrievers plugin keeps them in the database). */
export interface CacheStorage {
  /** Current versions of these scopes (absent: never bumped, version 0). */
  versions(organizationId: string, scopes: readonly string[]): Promise<Map<string, number>>;
  /** The entries among these keys that have not expired at `now`. */
  lookup(organizationId: string, keys: readonly string[], now: Date): Promise<CacheHit[]>;
  store(entry: CacheEntry): Promise<void>;
  now(): Date;
}

/** One change of a collection's documents, told to the cache by the plugin that owns documents. */
export interface CollectionDataChange {
  organizationId: string;
  namespaceId: string;
  collectionIds: readonly string[];
  /** `document.created`, `document.updated`, `document.deleted`, `collection.deleted`. */
  action: string;
  /** Retrievers (id or name) whose caches the collections' `invalidation_events` say to drop on this change. */
  retrievers: readonly string[];
}

/** The seam document writers call after every committed change (bound by the retrievers plugin when it is loaded). */
export interface RetrievalCacheInvalidation {
  collectionsChanged(change: CollectionDataChange): Promise<void>;
}

function digest(parts: unknown): string {
  return createHash('sha256').update(valueKey(parts)).digest('hex');
}

interface PlannedStage {
  stageName: string;
  stage: Pick<StagePlugin<never>, 'id' | 'version' | 'type'>;
  parameters: Record<string, unknown>;
}

export interface ExecutionCacheContext {
  organizationId: string;
  namespaceId: string;
  principalId: string | null;
  collections: readonly RetrievalCollection[];
  stages: readonly PlannedStage[];
  log: Logger;
}

/** One execution's view of the cache: its keys, the best hit, and storing what it computes. */
export class ExecutionCache {
  private constructor(
    private readonly storage: CacheStorage,
    private readonly request: ExecutionCacheRequest,
    private readonly context: ExecutionCacheContext,
    private readonly keys: readonly string[],
    private readonly cached: ReadonlySet<number>,
  ) {}

  /** Reads the data versions (before any stage reads data) and computes every stage's key. */
  static async open(storage: CacheStorage, request: ExecutionCacheRequest, context: ExecutionCacheContext): Promise<ExecutionCache> {
    const namespaceScope = versionScope.namespace(context.namespaceId);
    const collectionScopes = context.collections.map((c) => versionScope.collection(c.collection_id));
    const retrieverScope = versionScope.retriever(request.retrieverId);
    const versions = await storage.versions(context.organizationId, [...collectionScopes, namespaceScope, retrieverScope]);
    const version = (scope: string) => versions.get(scope) ?? 0;
    let key = digest({
      organization: context.organizationId,
      namespace: context.namespaceId,
      principal: context.principalId,
      retriever: request.retrieverId,
      generation: version(retrieverScope),
      collections: context.collections.map((c) => [c.collection_id, version(versionScope.collection(c.collection_id))]).sort(),
    });
    const keys = context.stages.map((s) => {
      key = digest({
        previous: key,
        stage: s.stage.id,
        version: s.stage.version,
        parameters: s.parameters,
        ...(s.stage.type === 'enrich' ? { namespace_version: version(namespaceScope) } : {}),
      });
      return key;
    });
    const wanted = request.stageNames.length > 0 ? new Set(request.stageNames) : new Set([context.stages.at(-1)?.stageName]);
    const cached = new Set(context.stages.flatMap((s, i) => (wanted.has(s.stageName) ? [i] : [])));
    return new ExecutionCache(storage, request, context, keys, cached);
  }

  /** The latest cached stage output that is still valid (one query), or null. */
  async bestHit(): Promise<{ index: number; documents: StageDocument[]; statistics: CachedStageCounts[] } | null> {
    const candidates = [...this.cached].map((i) => this.keys[i]!);
    if (candidates.length === 0) return null;
    try {
      const hits = await this.storage.lookup(this.context.organizationId, candidates, this.storage.now());
      const byKey = new Map(hits.map((h) => [h.cacheKey, h]));
      for (const index of [...this.cached].sort((a, b) => b - a)) {
        const hit = byKey.get(this.keys[index]!);
        if (hit) return { index, documents: JSON.parse(hit.documents) as StageDocument[], statistics: hit.statistics };
      }
    } catch (err) {
      // A cache that cannot answer is a miss, never a failed execution.
      this.context.log.warn({ err }, 'retriever cache lookup failed; running the stages');
    }
    return null;
  }

  isCached(index: number): boolean {
    return this.cached.has(index);
  }

  /** Keeps stage `index`'s output (`statistics`: counts of it and the stages before it). */
  async store(index: number, documents: readonly StageDocument[], statistics: readonly CachedStageCounts[]): Promise<void> {
    if (!this.cached.has(index) || this.request.ttlSeconds <= 0) return;
    const serialized = JSON.stringify(documents);
    if (Buffer.byteLength(serialized) > MAX_CACHE_ENTRY_BYTES) return;
    try {
      await this.storage.store({
        cacheKey: this.keys[index]!,
        organizationId: this.context.organizationId,
        namespaceId: this.context.namespaceId,
        retrieverId: this.request.retrieverId,
        stageName: this.context.stages[index]!.stageName,
        stageIndex: index,
        collectionIds: this.context.collections.map((c) => c.collection_id),
        documents: serialized,
        statistics,
        expiresAt: new Date(this.storage.now().getTime() + this.request.ttlSeconds * 1000),
      });
    } catch (err) {
      this.context.log.warn({ err }, 'could not store a retriever cache entry');
    }
  }
}

/** The cache settings of a saved retriever, or undefined when it does not cache. */
export function cacheRequestOf(
  retrieverId: string,
  cacheConfig: { enabled?: boolean; ttl_seconds?: number } | null | undefined,
  stageNames: readonly string[] | null | undefined,
): ExecutionCacheRequest | undefined {
  if (!cacheConfig?.enabled) return undefined;
  const ttlSeconds = cacheConfig.ttl_seconds ?? DEFAULT_CACHE_TTL_SECONDS;
  if (ttlSeconds <= 0) return undefined;
  return { retrieverId, ttlSeconds, stageNames: stageNames ?? [] };
}
