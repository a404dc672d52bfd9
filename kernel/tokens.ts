/**
 * Typed service identifiers. A token is a Symbol that carries the type of what it resolves to, so
 * `container.get(Config)` is typed without casts. Token and interface share a name on purpose.
 */
import type { Container } from 'inversify';
import type { Logger } from 'pino';
import type { Config as ConfigShape } from './config.js';
import type { Clock as ClockShape } from './clock.js';
import type { Lifecycle as LifecycleShape } from './lifecycle.js';
import type { DatabaseHandle as DatabaseHandleShape } from './db/database.js';
import type { EventBus as EventBusShape } from './events/event-bus.js';
import type { Announcer as AnnouncerShape } from './events/announcer.js';
import type { KeyStore as KeyStoreShape } from './auth/key-store.js';
import type { Authenticator as AuthenticatorShape } from './auth/authenticator.js';
import type { TenantStore as TenantStoreShape } from './auth/tenants.js';
import type { AuditLog as AuditLogShape } from './auth/audit-log.js';
import type { RateLimiter as RateLimiterShape } from './auth/rate-limiter.js';
import type { NamespaceResolver as NamespaceResolverShape } from './auth/namespaces.js';
import type { RequestLog as RequestLogShape } from './http/request-log.js';
import type { HealthRegistry as HealthRegistryShape } from './health.js';
import type { PluginRegistry as PluginRegistryShape } from './plugins.js';
import type { ResourceIdentifiers as ResourceIdentifiersShape } from './auth/resource-identifiers.js';
import type { ReferenceRegistry as ReferenceRegistryShape } from './references.js';
import type { NamespacePurges as NamespacePurgesShape } from './namespace-purge.js';
import type { TaskQueue as TaskQueueShape } from './tasks/task-queue.js';
import type { TaskBacklog as TaskBacklogShape } from './tasks/consumers.js';
import type { CollectionProcessor as CollectionProcessorShape, ObjectCatalog as ObjectCatalogShape } from './processing.js';
import type { DocumentSource as DocumentSourceShape } from './retrieval/documents.js';
import type { RetrievalCacheInvalidation as RetrievalCacheInvalidationShape } from './retrieval/cache.js';
import type { BlobStore as BlobStoreShape } from './blobs/blob-store.js';
import type { PresignedPutGate as PresignedPutGateShape } from './blobs/put-gate.js';
import type { VectorIndex as VectorIndexShape } from './vectors/vector-index.js';
import type { InferenceClient as InferenceClientShape } from './inference/client.js';
import type { TextIndex as TextIndexShape } from './text/text-index.js';
import type { CrossProcessNotices as CrossProcessNoticesShape } from './db/pg-notices.js';
import type { PublishedRetrieverDirectory as PublishedRetrieverDirectoryShape } from './retrieval/published.js';
import type { RetrieverExecutor as RetrieverExecutorShape } from './retrieval/executor.js';
import type { RetrieverRemovals as RetrieverRemovalsShape } from './retrieval/removals.js';
import type { SavedRetrievers as SavedRetrieversShape } from './retrieval/saved.js';
import type { InferenceCallStats as InferenceCallStatsShape } from './inference/call-stats.js';
import type { RetrieverAlertPolicy as RetrieverAlertPolicyShape } from './retrieval/alerts.js';
import type { OrganizationSecrets as OrganizationSecretsShape } from './organization-secrets.js';

declare const tokenType: unique symbol;
export type Token<T> = symbol & { readonly [tokenType]?: T };

export function createToken<T>(id: string): Token<T> {
  return Symbol.for(`tessera.${id}`) as Token<T>;
}

export function resolve<T>(container: Container, token: Token<T>): T {
  return container.get<T>(token);
}

/** Typed access to the container's services, as handlers and plugins see it. */
export interface Services {
  get<T>(token: Token<T>): T;
  tryGet<T>(token: Token<T>): T | undefined;
}

export function servicesOf(container: Container): Services {
  return {
    get: (token) => container.get(token),
    tryGet: (token) => (container.isBound(token) ? container.get(token) : undefined),
  };
}

export function tryResolve<T>(container: Container, token: Token<T>): T | undefined {
  return container.isBound(token) ? container.get<T>(token) : undefined;
}

// ---------------------------------------------------------------------------------------------- kernel services
export const Config = createToken<ConfigShape>('Config');
export const RootLogger = createToken<Logger>('RootLogger');
export const Clock = createToken<ClockShape>('Clock');
export const Lifecycle = createToken<LifecycleShape>('Lifecycle');
export const DatabaseHandle = createToken<DatabaseHandleShape>('DatabaseHandle');
export const EventBus = createToken<EventBusShape>('EventBus');
/** Publishes a committed change's events, logging a refusal instead of throwing it (events/announcer.ts). */
export const Announcer = createToken<AnnouncerShape>('Announcer');
export const KeyStore = createToken<KeyStoreShape>('KeyStore');
/** Who a request's `Authorization` header names (what the HTTP pipeline uses; public handlers that show more to a key, too). */
export const Authenticator = createToken<AuthenticatorShape>('Authenticator');
export const TenantStore = createToken<TenantStoreShape>('TenantStore');
/** PostgreSQL only (and TESSERA_DEFINITION_CACHE on): what definition caches forget, the other processes forget too. */
export const CrossProcessNotices = createToken<CrossProcessNoticesShape>('CrossProcessNotices');
export const AuditLog = createToken<AuditLogShape>('AuditLog');
export const RateLimiter = createToken<RateLimiterShape>('RateLimiter');
export const NamespaceResolver = createToken<NamespaceResolverShape>('NamespaceResolver');
export const RequestLog = createToken<RequestLogShape>('RequestLog');
export const HealthRegistry = createToken<HealthRegistryShape>('HealthRegistry');
export const PluginRegistry = createToken<PluginRegistryShape>('PluginRegistry');
/** The OpenAPI document as served and validated against. */
export const ApiDocument = createToken<Record<string, unknown>>('ApiDocument');
export const ResourceIdentifiers = createToken<ResourceIdentifiersShape>('ResourceIdentifiers');
export const ReferenceRegistry = createToken<ReferenceRegistryShape>('ReferenceRegistry');
/** What each plugin removes when a namespace is deleted (kernel/namespace-purge.ts). */
export const NamespacePurges = createToken<NamespacePurgesShape>('NamespacePurges');
export const TaskQueue = createToken<TaskQueueShape>('TaskQueue');
/** Whether anyone takes tasks and how long the oldest has waited (health, batches waiting for a worker). */
export const TaskBacklog = createToken<TaskBacklogShape>('TaskBacklog');
export const BlobStore = createToken<BlobStoreShape>('BlobStore');
/** The base URL clients reach this API at (set once the server listens, unless configured). */
export const PublicUrl = createToken<{ current: string }>('PublicUrl');
/** Signs and verifies the local blob store's presigned URLs. */
export const BlobSigningSecret = createToken<Buffer>('BlobSigningSecret');
/**
 * This process's own API as a loopback base URL (`http://127.0.0.1:<port>`), known once it listens (empty
 * before): for operations that act as a client of the API on their caller's behalf (manifests).
 */
export const LocalApiUrl = createToken<{ current: string }>('LocalApiUrl');
/** Organization secrets (names; values for the service's own use), provided by the secrets plugin. */
export const OrganizationSecrets = createToken<OrganizationSecretsShape>('OrganizationSecrets');
/** Whether a presigned PUT may still write its key (bound by the plugin that issues upload URLs). */
export const PresignedPutGate = createToken<PresignedPutGateShape>('PresignedPutGate');
export const VectorIndex = createToken<VectorIndexShape>('VectorIndex');
/** BM25 full-text search over documents' text fields (postings in the database, scored in process). */
export const TextIndex = createToken<TextIndexShape>('TextIndex');
/** The inference client extractors and stages use (gRPC to spawned or remote workers). */
export const Inference = createToken<InferenceClientShape>('Inference');
/** Bucket objects as batch processing reads them (bound by the buckets plugin). */
export const ObjectCatalog = createToken<ObjectCatalogShape>('ObjectCatalog');
/** The collection graph and document writing (bound by the collections plugin). */
export const CollectionProcessor = createToken<CollectionProcessorShape>('CollectionProcessor');
/** Documents and feature indexes as retriever stages read them (bound by the collections plugin). */
export const DocumentSource = createToken<DocumentSourceShape>('DocumentSource');
/** Document writers tell retriever caches what changed (bound by the retrievers plugin). */
export const RetrievalCacheInvalidation = createToken<RetrievalCacheInvalidationShape>('RetrievalCacheInvalidation');
/** Published retrievers by public name (bound by the published-retrievers plugin). */
export const PublishedRetrievers = createToken<PublishedRetrieverDirectoryShape>('PublishedRetrievers');
/** Runs saved retrievers and records interactions for callers without an API key (bound by the retrievers plugin). */
export const RetrieverExecutor = createToken<RetrieverExecutorShape>('RetrieverExecutor');
/** Hooks other plugins register to end what they hold for a deleted retriever (kernel/retrieval/removals.ts). */
export const RetrieverRemovals = createToken<RetrieverRemovalsShape>('RetrieverRemovals');
/** Saved retrievers' definitions and execution history for readers outside their plugin (bound by the retrievers plugin). */
export const SavedRetrievers = createToken<SavedRetrieversShape>('SavedRetrievers');
/** This process's model call figures, written behind (bound when the process has inference workers). */
export const InferenceCallStats = createToken<InferenceCallStatsShape>('InferenceCallStats');
/** What listeners ask to hear about saved retrievers' executions (bound by the webhooks plugin; kernel/retrieval/alerts.ts). */
export const RetrieverAlertPolicy = createToken<RetrieverAlertPolicyShape>('RetrieverAlertPolicy');
