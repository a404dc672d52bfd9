/**
 * What follows every committed change to a collection's documents (processing, direct writes, metadata
 * updates, deletes, grants): retriever caches learn of it before the request answers (a data version goes
 * up, kernel/retrieval/cache.ts), and a `document.created|updated|deleted` event is published.
 *
 * Collections' `cache_config.invalidation_events` say more: a rule `{collection, action, retriever_id,
 * recompute_strategy}` drops the cache of retriever `retriever_id` (id or name) when `action` happens to
 * `collection` (name or id; the collection holding the rule when absent). `action` is `document.created`,
 * `document.updated`, `document.deleted` (the `document.` may be left out) or `*`; `recompute_strategy`
 * `none` turns a rule off. Entries are not computed again ahead of time: the next execution recomputes them.
 */
import type { Knex } from 'knex';
import type { components } from '../../../generated/openapi.js';
import type { Announcer } from '../../../kernel/events/announcer.js';
import type { RetrievalCacheInvalidation } from '../../../kernel/retrieval/cache.js';
import type { DocumentReadCache } from './document-cache.js';
import type { CollectionRow } from './store.js';

export type DocumentAction = 'document.created' | 'document.updated' | 'document.deleted' | 'collection.deleted';

type InvalidationRule = components['schemas']['CacheInvalidationEvent'];

/** Document ids an event names at most (the count says how many there were). */
const EVENT_DOCUMENT_IDS = 100;

function actionMatches(rule: string | undefined, action: DocumentAction): boolean {
  if (rule === undefined || rule === '' || rule === '*') return true;
  const normalized = rule.toLowerCase();
  return normalized === action || `document.${normalized}` === action || `collection.${normalized}` === action;
}

export class DocumentChanges {
  constructor(
    private readonly db: Knex,
    private readonly announcer: Announcer,
    private readonly cache: () => RetrievalCacheInvalidation | undefined,
    private readonly documents: DocumentReadCache,
  ) {}

  /**
   * `collection`'s documents changed (`documentIds`, at least one). Awaited by the writer: once it answers, no
   * retriever cache in any process serves what was there before.
   */
  async changed(collection: CollectionRow, action: DocumentAction, documentIds: readonly string[], extra: Record<string, unknown> = {}): Promise<void> {
    if (documentIds.length === 0 && action !== 'collection.deleted') return;
    if (action === 'collection.deleted') this.documents.forgetAll();
    else this.documents.forget(documentIds);
    const cache = this.cache();
    if (cache) {
      await cache.collectionsChanged({
        organizationId: collection.organization_id,
        namespaceId: collection.namespace_id,
        collectionIds: [collection.collection_id],
        action,
        retrievers: await this.retrieversToDrop(collection, action),
      });
    }
    if (action === 'collection.deleted') return;
    await this.announcer.announce({
      type: action,
      organization_id: collection.organization_id,
      data: {
        collection_id: collection.collection_id,
        collection_name: collection.collection_name,
        namespace_id: collection.namespace_id,
        document_ids: documentIds.slice(0, EVENT_DOCUMENT_IDS),
        count: documentIds.length,
        ...extra,
      },
    });
  }

  /** Retrievers the namespace's invalidation rules name for this change (rules of this collection, and rules naming it). */
  private async retrieversToDrop(collection: CollectionRow, action: DocumentAction): Promise<string[]> {
    const owners = (await this.db('collections')
      .where({ organization_id: collection.organization_id, namespace_id: collection.namespace_id })
      .whereRaw("jsonb_array_length(coalesce(cache_config->'invalidation_events', '[]'::jsonb)) > 0")
      .select('collection_id', 'cache_config')) as Array<Pick<CollectionRow, 'collection_id' | 'cache_config'>>;
    const names = new Set([collection.collection_id, collection.collection_name.toLowerCase()]);
    const retrievers = new Set<string>();
    for (const owner of owners) {
      for (const rule of (owner.cache_config.invalidation_events ?? []) as InvalidationRule[]) {
        const watched = rule.collection === undefined ? owner.collection_id === collection.collection_id : names.has(rule.collection) || names.has(rule.collection.toLowerCase());
        if (!watched || rule.recompute_strategy === 'none' || !rule.retriever_id || !actionMatches(rule.action, action)) continue;
        retrievers.add(rule.retriever_id);
      }
    }
    return [...retrievers];
  }
}
