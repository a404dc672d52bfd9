/**
 * Published retrievers: a saved retriever published under a public name (owner endpoints), and the public
 * endpoints anyone may call without a key — list, execute (JSON or streamed), config (and its marketplace
 * successor), verify, interactions and template. Public calls run the retriever through the kernel's
 * `RetrieverExecutor` as the publishing organization with no principal (its organization-wide view), and are
 * recorded in the owner's execution history and signals. Publications are read from the database on every
 * public request, so unpublishing stops the name answering at once in every API process.
 */
import type { components } from '../../../generated/openapi.js';
import { looksLikeBoundKey } from '../../../kernel/auth/bound-keys.js';
import { AuthenticationError, ConflictError, InputError, NotAllowedError, NotFoundError, RateLimitError } from '../../../kernel/errors.js';
import { UnsupportedPatternError, compileUserRegex } from '../../../kernel/filters/regex.js';
import type { RequestContext } from '../../../kernel/http/context.js';
import { callerOf, type HandlerInput } from '../../../kernel/http/handlers.js';
import { iso } from '../../../kernel/http/values.js';
import { defineResource } from '../../../kernel/plugins.js';
import type { ExecutionObserver } from '../../../kernel/retrieval/engine.js';
import type { PaginationRequest } from '../../../kernel/retrieval/pagination.js';
import { HOUR_MS, MINUTE_MS } from '../../../kernel/auth/rate-limiter.js';
import { scopesAllow } from '../../../kernel/auth/scopes.js';
import {
  ApiDocument,
  BlobSigningSecret,
  Clock,
  Config,
  DatabaseHandle,
  KeyStore,
  NamespaceResolver,
  PublishedRetrievers,
  RateLimiter,
  RetrieverExecutor,
  createToken,
  type Services,
} from '../../../kernel/tokens.js';
import { publishedRetrieverMigrations } from './migrations.js';
import { activePublication, actorOf, authorizePublicCaller, checkPassword, verifyPublicKey, visitorOf, type PublicAccess } from './public-callers.js';
import { KeySealer } from './public-keys.js';
import { streamPublicExecution } from './public-streaming.js';
import { publicConfig, publicResult, publicSummary, publicTemplate } from './public-view.js';
import { enforcePublicRateLimits } from './rate-limits.js';
import { PublishingService, type Publisher } from './service.js';
import { PublishedStore, recordOf, type PublicationRow } from './store.js';

type Schemas = components['schemas'];

const Store = createToken<PublishedStore>('published-retrievers.PublishedStore');
const Publishing = createToken<PublishingService>('published-retrievers.PublishingService');
const Sealer = createToken<KeySealer>('published-retrievers.KeySealer');

/** Public retrievers served per page of the public listing at most (a larger page_size is served this many). */
const MAX_PUBLIC_PAGE_SIZE = 100;
/** Interactions per visitor address per minute, on any one publication. */
const INTERACTIONS_PER_VISITOR_PER_MINUTE = 600;
/** Config, verify and template reads per visitor address per hour, on any one publication. */
const READS_PER_VISITOR_PER_HOUR = 3600;

function publisherOf(ctx: RequestContext): Publisher {
  const auth = callerOf(ctx);
  if (!ctx.namespace) throw new Error('publishing routes declare X-Namespace as required');
  return { organizationId: auth.organizationId, namespaceId: ctx.namespace.id, userEmail: auth.userEmail };
}

function toPublished(row: PublicationRow, sealer: KeySealer): Schemas['PublishedRetriever'] {
  return {
    public_name: row.public_name,
    retriever_id: row.retriever_id,
    namespace_id: row.namespace_id,
    title: row.title,
    description: row.description,
    display_config: row.display_config,
    password_protected: row.password_hash !== null,
    exposed_fields: row.display_config.exposed_fields ?? [],
    marketplace_listed: row.marketplace_listed,
    active: row.active,
    rate_limits: row.rate_limits,
    public_api_key: sealer.open(row.api_key_sealed),
    public_url: `/v1/public/retrievers/${row.public_name}/execute`,
    page_url: `/p/${row.public_name}`,
    created_at: iso(row.created_at),
    updated_at: iso(row.updated_at),
  };
}

function accessOf(services: Services): PublicAccess {
  return {
    store: services.get(Store),
    limiter: services.get(RateLimiter),
    keys: services.get(KeyStore),
    clock: services.get(Clock),
    failedKeysPerMinute: services.get(Config).unauthenticatedRateLimitPerMinute,
  };
}

function visitor(services: Services, req: Parameters<typeof visitorOf>[0]): string {
  return visitorOf(req, services.get(Config).trustedProxyHops);
}

/** A cheap per-visitor ceiling for the endpoints that run no retriever. */
async function limitVisitor(services: Services, row: PublicationRow, address: string, what: string, limit: number, windowMs: number): Promise<void> {
  const decision = await services.get(RateLimiter).consume(`published:${row.publication_id}:${what}:ip:${address}`, limit, windowMs);
  if (!decision.allowed) {
    throw new RateLimitError(`Too many ${what} requests from this address; retry in ${decision.resetSeconds} s`, decision.resetSeconds, {
      limit, retry_after_seconds: decision.resetSeconds,
    });
  }
}

/** The page asked for: `settings.limit` is the page size when `pagination` names none (as on the private execute). */
function paginationOf(body: Schemas['PublicRetrieverExecuteRequest'] | undefined): PaginationRequest | undefined {
  const limit = body?.settings?.limit;
  const pagination = body?.pagination;
  if (limit === undefined || pagination?.limit !== undefined || pagination?.page_size !== undefined) return pagination;
  return { ...pagination, limit };
}

/**
 * Problems of the owner's pipeline (a stage version this deployment no longer runs, a collection gone) name
 * internal things: the public get a readable 409 instead; input problems (422, 400) are theirs and pass.
 */
function publicRunError(err: unknown, row: PublicationRow): unknown {
  if (err instanceof NotFoundError || err instanceof ConflictError || err instanceof NotAllowedError) {
    return new ConflictError(`'${row.public_name}' cannot run right now: its owner has to repair the retriever`);
  }
  return err;
}

export default defineResource({
  name: 'published-retrievers',
  migrations: publishedRetrieverMigrations,
  services: (container, services) => {
    const sealer = new KeySealer(services.get(BlobSigningSecret));
    container.bind(Sealer).toConstantValue(sealer);
    const database = services.get(DatabaseHandle);
    const store = new PublishedStore(database.db, sealer, {
      onlyWriter: database.kind === 'pglite',
      ...(database.notices ? { notices: database.notices } : {}),
      // No cross-process cache here (crossProcessOf): an unpublish must stop public access in every process at once.
      retrieverExists: async (row) => (await services.get(RetrieverExecutor).find(row.organization_id, row.namespace_id, row.retriever_id)) !== null,
    });
    container.bind(Store).toConstantValue(store);
    container.bind(PublishedRetrievers).toConstantValue(store);
    const schemas = (services.get(ApiDocument).components as { schemas: Record<string, Record<string, unknown>> }).schemas;
    container.bind(Publishing).toConstantValue(
      new PublishingService(store, () => services.get(RetrieverExecutor), sealer, services.get(Clock), schemas.DisplayConfig!),
    );
  },
  handlers: {
    // ------------------------------------------------------------------------------------------------ owner
    publishRetriever: async ({ params, body, ctx, services }) => {
      const row = await services.get(Publishing).publish(publisherOf(ctx), params.retriever_id, body);
      return { status: 201, body: toPublished(row, services.get(Sealer)) };
    },
    getRetrieverPublication: async ({ params, ctx, services }) => {
      const row = await services.get(Publishing).get(publisherOf(ctx), params.retriever_id);
      return { status: 200, body: toPublished(row, services.get(Sealer)) };
    },
    updateRetrieverPublication: async ({ params, body, ctx, services }) => {
      const row = await services.get(Publishing).update(publisherOf(ctx), params.retriever_id, body);
      return { status: 200, body: toPublished(row, services.get(Sealer)) };
    },
    unpublishRetriever: async ({ params, ctx, services }) => {
      const row = await services.get(Publishing).unpublish(publisherOf(ctx), params.retriever_id);
      return { status: 200, body: { retriever_id: row.retriever_id, public_name: row.public_name, unpublished: true } };
    },
    listPublishedRetrievers: async ({ query, ctx, services }) => {
      const limit = query.limit ?? 100;
      const offset = query.offset ?? 0;
      const auth = callerOf(ctx);
      const store = services.get(Store);
      const namespaceId = ctx.namespace?.id;
      let page: { rows: PublicationRow[]; total: number };
      if (auth.scopes.length === 0) page = await store.listOrganization(auth.organizationId, limit, offset, namespaceId);
      else {
        // A scoped key sees only the publications of retrievers its scopes let it read (an organization has few).
        const all = await store.listOrganization(auth.organizationId, 100_000, 0, namespaceId);
        const namespaces = services.get(NamespaceResolver);
        const visible: PublicationRow[] = [];
        for (const row of all.rows) {
          const namespace = await namespaces.resolve(auth.organizationId, row.namespace_id);
          const retriever = namespace && (await services.get(RetrieverExecutor).find(auth.organizationId, namespace.id, row.retriever_id));
          // Scopes name a retriever by id or by name.
          const allowed = !!namespace && !!retriever && scopesAllow(auth.scopes, {
            organizationId: auth.organizationId, resource: { type: 'retriever', identifiers: [row.retriever_id, retriever.retrieverName] }, namespace, operation: 'read_data',
          });
          if (allowed) visible.push(row);
        }
        page = { rows: visible.slice(offset, offset + limit), total: visible.length };
      }
      const sealer = services.get(Sealer);
      return { status: 200, body: { results: page.rows.map((r) => toPublished(r, sealer)), total: page.total, limit, offset, has_next: offset + page.rows.length < page.total } };
    },

    // ----------------------------------------------------------------------------------------------- public
    listPublicRetrievers: async ({ query, services }) => {
      const page = query.page ?? 1;
      // The contract's schema allows 1000 a page, its prose at most 100: both hold when 100 is what is served.
      const pageSize = Math.min(query.page_size ?? 20, MAX_PUBLIC_PAGE_SIZE);
      let search: string | undefined;
      if (query.search) {
        try {
          search = compileUserRegex(query.search, false).postgres;
        } catch (err) {
          if (err instanceof UnsupportedPatternError) throw new InputError(`search ${err.message}: give a regular expression in RE2 syntax`, { search: query.search });
          throw err;
        }
      }
      const filter = { includeInactive: query.include_inactive === true, ...(search !== undefined ? { search } : {}) };
      const store = services.get(Store);
      const [{ rows, total }, stats] = await Promise.all([
        store.listRows({ ...filter, offset: (page - 1) * pageSize, limit: pageSize }),
        store.statistics(filter),
      ]);
      return {
        status: 200,
        body: {
          results: rows.map(publicSummary),
          page,
          page_size: pageSize,
          total_count: total,
          total_pages: Math.ceil(total / pageSize),
          statistics: { total_active: stats.active, password_protected: stats.protectedCount, open: stats.total - stats.protectedCount },
        },
      };
    },
    executePublicRetriever: async (input) => {
      const row = await activePublication(input.services.get(Store), input.params.public_name);
      return executePublication(row, input.req.get('x-public-api-key'), input);
    },
    executePublicRetrieverByKey: async (input) => {
      const { services, req } = input;
      const apiKey = keyAloneOf(req);
      const grant = await verifyPublicKey(accessOf(services), apiKey, req.get('origin'), visitor(services, req));
      const row = await services.get(Store).rowOf(grant.retrieverOrganizationId, grant.retrieverId);
      if (!row || !row.active) {
        throw new NotFoundError('The retriever this key executes is not published now: ask its owner to publish it again');
      }
      return executePublication(row, apiKey, input);
    },
    getPublicRetrieverConfig: async ({ params, services, req }) => {
      const row = await activePublication(services.get(Store), params.public_name);
      await limitVisitor(services, row, visitor(services, req), 'read', READS_PER_VISITOR_PER_HOUR, HOUR_MS);
      return {
        status: 200,
        body: publicConfig(row, services.get(Sealer).open(row.api_key_sealed)),
        headers: {
          Deprecation: 'true',
          Link: `</v1/marketplace/catalog/${encodeURIComponent(row.public_name)}/config>; rel="successor-version"`,
        },
      };
    },
    getMarketplaceCatalogConfig: async ({ params, services, req }) => {
      const row = await activePublication(services.get(Store), params.public_name);
      await limitVisitor(services, row, visitor(services, req), 'read', READS_PER_VISITOR_PER_HOUR, HOUR_MS);
      return { status: 200, body: publicConfig(row, services.get(Sealer).open(row.api_key_sealed)) };
    },
    verifyPublicRetrieverPassword: async ({ params, body, services, req }) => {
      const row = await activePublication(services.get(Store), params.public_name);
      if (row.password_hash === null) return { status: 200, body: { valid: false, public_api_key: null } };
      const valid = await checkPassword(accessOf(services), row, body.password, visitor(services, req));
      return { status: 200, body: { valid, public_api_key: valid ? services.get(Sealer).open(row.api_key_sealed) : null } };
    },
    recordPublicRetrieverInteraction: async ({ params, body, services, req }) => {
      const ids = await recordInteractions(services, req, params.public_name, [body]);
      return { status: 200, body: { recorded: ids.length, interaction_ids: ids } };
    },
    recordPublicRetrieverInteractionsBatch: async ({ params, body, services, req }) => {
      const ids = await recordInteractions(services, req, params.public_name, body.interactions);
      return { status: 200, body: { recorded: ids.length, interaction_ids: ids } };
    },
    getPublicRetrieverTemplate: async ({ params, services, req }) => {
      const row = await activePublication(services.get(Store), params.public_name);
      const address = visitor(services, req);
      await authorizePublicCaller(accessOf(services), {
        row, apiKey: req.get('x-public-api-key'), password: req.get('x-retriever-password'), needsPassword: true, visitor: address, origin: req.get('origin'),
      });
      await limitVisitor(services, row, address, 'read', READS_PER_VISITOR_PER_HOUR, HOUR_MS);
      const retriever = await services.get(RetrieverExecutor).find(row.organization_id, row.namespace_id, row.retriever_id);
      if (!retriever) throw new NotFoundError(`No published retriever is named '${row.public_name}'`);
      return { status: 200, body: publicTemplate(row, retriever) };
    },
  },
});

/**
 * The key of `POST /v1/public/retrievers/execute`, which names the retriever: a `ret_sk_` or `sk_marketplace_`
 * key in `X-Public-API-Key` (or, for servers, `Authorization: Bearer`).
 */
function keyAloneOf(req: Parameters<typeof visitorOf>[0]): string {
  const bearer = /^Bearer[ ]+(\S+)\s*$/i.exec(req.get('authorization') ?? '')?.[1];
  const apiKey = req.get('x-public-api-key') ?? bearer;
  if (apiKey === undefined) {
    throw new AuthenticationError('Send the ret_sk_ retriever key (or sk_marketplace_ key) in X-Public-API-Key: it names the retriever to execute');
  }
  if (!looksLikeBoundKey(apiKey)) {
    throw new AuthenticationError(
      'This endpoint takes a ret_sk_ retriever key or a sk_marketplace_ key, which names the retriever; with a prk_ key or none, use POST /v1/public/retrievers/{public_name}/execute',
    );
  }
  return apiKey;
}

type PublicExecuteInput = HandlerInput<'executePublicRetriever'> | HandlerInput<'executePublicRetrieverByKey'>;

/** Public execution of one publication: caller check, rate limits, then the run (JSON or streamed), exposed fields only. */
async function executePublication(row: PublicationRow, apiKey: string | undefined, { query, body, ctx, services, req, res }: PublicExecuteInput) {
  const address = visitor(services, req);
  const caller = await authorizePublicCaller(accessOf(services), {
    row, apiKey, password: req.get('x-retriever-password'), needsPassword: true, visitor: address, origin: req.get('origin'),
  });
  await enforcePublicRateLimits(services.get(RateLimiter), recordOf(row), address);
  const exposed = row.display_config.exposed_fields ?? [];
  const pagination = paginationOf(body);
  const run = async (streaming?: { observer: ExecutionObserver; signal: AbortSignal }) => {
    try {
      const { outcome } = await services.get(RetrieverExecutor).execute({
        organizationId: row.organization_id, namespaceId: row.namespace_id, retrieverId: row.retriever_id,
        inputs: body?.inputs ?? {},
        ...(pagination ? { pagination } : {}),
        presignUrls: body?.return_presigned_urls ?? query.return_presigned_urls ?? true,
        actor: actorOf(caller, row),
        ...streaming,
        log: ctx.log,
      });
      return publicResult(outcome, exposed);
    } catch (err) {
      throw publicRunError(err, row);
    }
  };
  const accept = req.get('accept');
  if (body?.stream === true || (accept !== undefined && accept.includes('text/event-stream') && req.accepts(['application/json', 'text/event-stream']) === 'text/event-stream')) {
    return streamPublicExecution(res, ctx.log, (observer, signal) => run({ observer, signal }));
  }
  return { status: 200 as const, body: await run() };
}

/** Interactions of visitors: no password, an optional `prk_` key, `X-Session-ID` as every one's session. */
async function recordInteractions(
  services: Services,
  req: Parameters<typeof visitorOf>[0],
  publicName: string,
  interactions: ReadonlyArray<Schemas['RetrieverInteraction']>,
): Promise<string[]> {
  const row = await activePublication(services.get(Store), publicName);
  const address = visitor(services, req);
  const caller = await authorizePublicCaller(accessOf(services), {
    row, apiKey: req.get('x-public-api-key'), password: undefined, needsPassword: false, visitor: address, origin: req.get('origin'),
  });
  await limitVisitor(services, row, address, 'interaction', INTERACTIONS_PER_VISITOR_PER_MINUTE, MINUTE_MS);
  const session = req.get('x-session-id');
  try {
    return await services.get(RetrieverExecutor).recordInteractions({
      organizationId: row.organization_id, namespaceId: row.namespace_id, retrieverId: row.retriever_id,
      interactions: session === undefined ? interactions : interactions.map((i) => ({ ...i, session_id: session })),
      actor: actorOf(caller, row),
    });
  } catch (err) {
    // An execution id of another retriever (or none at all) is simply not found here; nothing else is said.
    if (err instanceof NotFoundError) throw new NotFoundError(err.message.replace(/ of retriever '.*'/, ''), err.details);
    throw err;
  }
}
