/**
 * The marketplace: the catalog of published retrievers their owners listed, and subscriptions. Subscribing
 * gives the subscriber's organization a `sk_marketplace_` key bound to the listed retriever (kernel/auth/keys.ts):
 * the public execute endpoints honour it while the retriever is published and listed; every authenticated route
 * refuses it, so it reaches nothing of the subscriber's organization nor anything else of the publisher's.
 * Unsubscribing revokes the key in the same transaction; so does the publisher deleting the retriever, for every
 * subscriber. Publications are read through the kernel's
 * PublishedRetrievers directory, never the publishing plugin's tables.
 */
import type { Knex } from 'knex';
import type { components } from '../../../generated/openapi.js';
import type { AuditLog } from '../../../kernel/auth/audit-log.js';
import type { AuthContext } from '../../../kernel/auth/authenticator.js';
import { keyStatus, type KeyRecord, type KeyStore } from '../../../kernel/auth/key-store.js';
import { generateKeySecret } from '../../../kernel/auth/keys.js';
import type { Clock } from '../../../kernel/clock.js';
import { ConflictError, InputError, NotFoundError } from '../../../kernel/errors.js';
import type { Announcer } from '../../../kernel/events/announcer.js';
import { UnsupportedPatternError, compileUserRegex } from '../../../kernel/filters/regex.js';
import { iso, isoOrNull, isUniqueViolation } from '../../../kernel/http/values.js';
import { newId } from '../../../kernel/ids.js';
import type { RemovedRetriever } from '../../../kernel/retrieval/removals.js';
import type { PublishedRetrieverDirectory, PublishedRetrieverRecord } from '../../../kernel/retrieval/published.js';
import type { SubscriptionRow, SubscriptionStore } from './store.js';

type Schemas = components['schemas'];
export type MarketplaceListing = Schemas['MarketplaceListing'];
export type MarketplaceSubscription = Schemas['MarketplaceSubscription'];

export interface MarketplaceCaller {
  auth: AuthContext;
  requestId: string;
}

export interface MarketplaceServices {
  db: Knex;
  subscriptions: SubscriptionStore;
  published: () => PublishedRetrieverDirectory;
  keys: KeyStore;
  audit: AuditLog;
  announcer: Announcer;
  clock: Clock;
}

/** What a catalog visitor sees: nothing internal (no ids, keys, organization or configuration). */
export function toListing(record: PublishedRetrieverRecord): MarketplaceListing {
  const name = encodeURIComponent(record.publicName);
  return {
    public_name: record.publicName,
    title: record.title,
    description: record.description,
    logo_url: record.displayConfig.logo_url ?? null,
    template_type: record.displayConfig.template_type ?? null,
    password_protected: record.passwordProtected,
    exposed_fields: record.exposedFields,
    published_at: iso(record.createdAt),
    config_url: `/v1/marketplace/catalog/${name}/config`,
    execute_url: `/v1/public/retrievers/${name}/execute`,
    page_url: `/p/${name}`,
    subscribe_url: `/v1/marketplace/catalog/${name}/subscribe`,
  };
}

function listed(record: PublishedRetrieverRecord | null): record is PublishedRetrieverRecord {
  return record !== null && record.active && record.marketplaceListed;
}

export class MarketplaceService {
  constructor(private readonly s: MarketplaceServices) {}

  async catalog(page: number, pageSize: number, search: string | undefined): Promise<{ records: PublishedRetrieverRecord[]; total: number }> {
    return this.s.published().list({
      marketplaceListed: true,
      offset: (page - 1) * pageSize,
      limit: pageSize,
      ...(search !== undefined ? { search: safeSearch(search) } : {}),
    });
  }

  /** An active, listed publication; anything else is the same 404 (nothing says whether the name exists). */
  async listing(publicName: string): Promise<PublishedRetrieverRecord> {
    const record = await this.s.published().findByPublicName(publicName);
    if (!listed(record)) throw new NotFoundError(`No marketplace retriever is named '${publicName}'`, { public_name: publicName });
    return record;
  }

  async subscribe(caller: MarketplaceCaller, publicName: string, allowedOrigins: string[]): Promise<{ subscription: MarketplaceSubscription; plaintext: string }> {
    const { auth } = caller;
    const record = await this.listing(publicName);
    if (record.organizationId === auth.organizationId) {
      throw new ConflictError(
        `'${publicName}' is your organization's own retriever: make it a ret_sk_ key with POST /v1/retrievers/{retriever_id}/api-keys instead of subscribing`,
      );
    }
    const existing = await this.s.subscriptions.active(auth.organizationId, record.retrieverId);
    if (existing) throw this.alreadySubscribed(publicName, existing.subscription_id);
    const plaintext = generateKeySecret('marketplace');
    const now = this.s.clock.now();
    const subscriptionId = newId('msub');
    let key: KeyRecord;
    let row: SubscriptionRow;
    try {
      ({ key, row } = await this.s.db.transaction(async (trx) => {
        const created = await this.s.keys.insert(trx, {
          organizationId: auth.organizationId,
          userId: auth.userId,
          name: `marketplace:${record.publicName}`,
          description: `Marketplace subscription ${subscriptionId}`,
          plaintext,
          keyType: 'marketplace',
          permissions: ['read'],
          scopes: [{ resource_type: 'retriever', resource_id: record.retrieverId, operations: ['execute_retriever'] }],
          rateLimitOverride: null,
          expiresAt: null,
          principalId: null,
          allowedOrigins,
          isProtected: false,
          createdBy: auth.userEmail,
          boundRetriever: { organizationId: record.organizationId, retrieverId: record.retrieverId },
        });
        const subscription: SubscriptionRow = {
          subscription_id: subscriptionId,
          organization_id: auth.organizationId,
          user_id: auth.userId,
          created_by: auth.userEmail,
          publisher_organization_id: record.organizationId,
          retriever_id: record.retrieverId,
          public_name: record.publicName,
          title: record.title,
          key_id: created.key_id,
          status: 'active',
          created_at: now,
          cancelled_at: null,
          cancelled_by: null,
          cancel_reason: null,
        };
        await this.s.subscriptions.insert(trx, subscription);
        await this.s.audit.record(trx, {
          organizationId: auth.organizationId,
          action: 'api_key_created',
          actor: { keyId: auth.keyId, userEmail: auth.userEmail, requestId: caller.requestId },
          resourceType: 'api_key',
          resourceId: created.key_id,
          resourceName: created.name,
          changes: { key_type: 'marketplace', public_name: record.publicName, subscription_id: subscriptionId, allowed_origins: allowedOrigins },
        });
        return { key: created, row: subscription };
      }));
    } catch (err) {
      if (isUniqueViolation(err)) throw this.alreadySubscribed(publicName, undefined);
      throw err;
    }
    await this.announce('api_key.created', key);
    return { subscription: this.toSubscription(row, key, record), plaintext };
  }

  async list(organizationId: string, includeCancelled: boolean): Promise<MarketplaceSubscription[]> {
    const rows = await this.s.subscriptions.list(organizationId, includeCancelled);
    return Promise.all(rows.map((row) => this.describe(row)));
  }

  async unsubscribe(caller: MarketplaceCaller, subscriptionId: string): Promise<MarketplaceSubscription> {
    const { auth } = caller;
    const row = await this.s.subscriptions.find(auth.organizationId, subscriptionId);
    if (!row || row.status !== 'active') {
      throw new NotFoundError(`No active marketplace subscription '${subscriptionId}' in this organization`, { subscription_id: subscriptionId });
    }
    const now = this.s.clock.now();
    const key = await this.s.db.transaction(async (trx) => {
      if (!(await this.s.subscriptions.cancel(trx, row.subscription_id, now, auth.userEmail, 'unsubscribed'))) {
        throw new NotFoundError(`No active marketplace subscription '${subscriptionId}' in this organization`, { subscription_id: subscriptionId });
      }
      const revoked = await this.s.keys.revoke(trx, auth.organizationId, row.key_id, auth.userEmail);
      await this.s.audit.record(trx, {
        organizationId: auth.organizationId,
        action: 'api_key_revoked',
        actor: { keyId: auth.keyId, userEmail: auth.userEmail, requestId: caller.requestId },
        resourceType: 'api_key',
        resourceId: row.key_id,
        resourceName: revoked.name,
        changes: { status: { from: 'active', to: 'revoked' }, reason: 'marketplace_unsubscribed', subscription_id: row.subscription_id },
      });
      return revoked;
    });
    await this.announce('api_key.revoked', key);
    return this.describe({ ...row, status: 'cancelled', cancelled_at: now, cancelled_by: auth.userEmail, cancel_reason: 'unsubscribed' });
  }

  /**
   * The publisher deleted these retrievers: every organization's subscription to them ends and its key is
   * revoked (it could reach nothing any more, and must not come back with a retriever of the same id), each
   * audited in the subscriber's organization. Idempotent: only subscriptions still active are ended.
   */
  async endSubscriptionsTo(removed: readonly RemovedRetriever[]): Promise<number> {
    let ended = 0;
    const byPublisher = new Map<string, string[]>();
    for (const r of removed) byPublisher.set(r.organizationId, [...(byPublisher.get(r.organizationId) ?? []), r.retrieverId]);
    for (const [publisherOrganizationId, retrieverIds] of byPublisher) {
      const rows = await this.s.subscriptions.activeTo(publisherOrganizationId, retrieverIds);
      for (const row of rows) {
        const now = this.s.clock.now();
        // Read before the transaction: the embedded database has one connection, which the transaction holds.
        const before = await this.s.keys.findById(row.organization_id, row.key_id);
        const outcome = await this.s.db.transaction(async (trx): Promise<{ ended: boolean; key?: KeyRecord }> => {
          if (!(await this.s.subscriptions.cancel(trx, row.subscription_id, now, null, 'retriever_deleted'))) return { ended: false };
          if (!before || before.status === 'revoked') return { ended: true };
          const revoked = await this.s.keys.revoke(trx, row.organization_id, row.key_id, 'system');
          await this.s.audit.record(trx, {
            organizationId: row.organization_id,
            action: 'api_key_revoked',
            // The publisher's people are not named to the subscriber.
            actor: { keyId: null, userEmail: null },
            resourceType: 'api_key',
            resourceId: row.key_id,
            resourceName: revoked.name,
            changes: { status: { from: keyStatus(before, now), to: 'revoked' }, reason: 'marketplace_retriever_deleted', subscription_id: row.subscription_id },
          });
          return { ended: true, key: revoked };
        });
        if (outcome.ended) ended += 1;
        if (outcome.key) await this.announce('api_key.revoked', outcome.key);
      }
    }
    return ended;
  }

  private async describe(row: SubscriptionRow): Promise<MarketplaceSubscription> {
    const [key, record] = await Promise.all([
      this.s.keys.findById(row.organization_id, row.key_id),
      this.s.published().findByRetrieverId(row.publisher_organization_id, row.retriever_id),
    ]);
    if (!key) throw new Error(`subscription ${row.subscription_id} has no key ${row.key_id}`);
    return this.toSubscription(row, key, record);
  }

  private toSubscription(row: SubscriptionRow, key: KeyRecord, record: PublishedRetrieverRecord | null): MarketplaceSubscription {
    return {
      subscription_id: row.subscription_id,
      public_name: record?.publicName ?? row.public_name,
      title: record?.title ?? row.title,
      status: row.status,
      available: row.status === 'active' && listed(record),
      key_id: key.key_id,
      key_prefix: key.key_prefix,
      key_type: 'marketplace',
      key_status: keyStatus(key, this.s.clock.now()),
      allowed_origins: key.allowed_origins,
      created_at: iso(row.created_at),
      created_by: row.created_by,
      cancelled_at: isoOrNull(row.cancelled_at),
      cancelled_by: row.cancelled_by,
      cancel_reason: row.cancel_reason,
    };
  }

  private alreadySubscribed(publicName: string, subscriptionId: string | undefined): ConflictError {
    return new ConflictError(
      `Your organization already subscribes to '${publicName}'${subscriptionId ? ` (${subscriptionId})` : ''}: cancel that subscription first for a new key`,
      subscriptionId ? { subscription_id: subscriptionId } : {},
    );
  }

  /** After the change committed: evict the key here, then tell the other API processes. */
  private announce(type: string, key: KeyRecord): Promise<void> {
    this.s.keys.evict(key.key_id);
    return this.s.announcer.announce({ type, organization_id: key.organization_id, data: { key_id: key.key_id, name: key.name, user_email: key.user_email } });
  }
}

/** The catalog's `search`: a user regex, refused unless it runs in linear time (RE2 dialect). */
function safeSearch(search: string): string {
  try {
    return compileUserRegex(search, false).postgres;
  } catch (err) {
    if (err instanceof UnsupportedPatternError) throw new InputError(`search ${err.message}: give a regular expression in RE2 syntax`, { search });
    throw err;
  }
}
