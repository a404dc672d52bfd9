/**
 * Builds the container and starts or stops everything. The same function runs `tessera serve`, the
 * tests (port 0) and the benchmarks.
 */
import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import path from 'node:path';
import { readFile } from 'node:fs/promises';
import { Container } from 'inversify';
import type { Logger } from 'pino';
import type { Config as ConfigShape } from './config.js';
import { systemClock, type Clock as ClockShape } from './clock.js';
import { createLogger, resolveLogFormat } from './logger.js';
import { projectRoot } from './paths.js';
import { Lifecycle as LifecycleService } from './lifecycle.js';
import { keepsOwnStatistics, TableStatistics } from './db/table-statistics.js';
import { openDatabase } from './db/database.js';
import { acquireHomeLock } from './db/home-lock.js';
import { listenStartupError, natsStartupError } from './startup-errors.js';
import { ADMIN_KEY_NAME } from './auth/tenants.js';
import { runMigrations, type MigrationSet } from './db/migrations.js';
import { InProcessEventBus } from './events/in-process.js';
import { TaskThread } from './tasks/task-thread.js';
import type { DatabaseHandle } from './db/database.js';
import type { MessagePort } from 'node:worker_threads';
import { NatsEventBus } from './events/nats.js';
import type { EventBus as EventBusShape } from './events/event-bus.js';
import { Announcer } from './events/announcer.js';
import { KeyStore as KeyStoreService } from './auth/key-store.js';
import { TenantStore as TenantStoreService, type NewOrganization } from './auth/tenants.js';
import { AuditLog as AuditLogService } from './auth/audit-log.js';
import { InProcessRateLimiter } from './auth/rate-limiter.js';
import { SharedRateLimiter } from './auth/shared-rate-limiter.js';
import { Authenticator } from './auth/authenticator.js';
import { Authorizer } from './auth/authorizer.js';
import { authMigrations } from './auth/migrations.js';
import { RequestLog as RequestLogService, requestLogMigrations } from './http/request-log.js';
import { HealthRegistry as HealthRegistryService } from './health.js';
import { PluginRegistry as PluginRegistryService, type PluginContext } from './plugins.js';
import { createAppServer } from './http/app-server.js';
import { PostgresNotices } from './db/pg-notices.js';
import { buildHttpApp } from './http/server.js';
import { operations, type OperationId } from './http/operations.js';
import type { AnyHandler } from './http/handlers.js';
import * as T from './tokens.js';
import { ResourceIdentifiers as ResourceIdentifiersService } from './auth/resource-identifiers.js';
import { ReferenceRegistry as ReferenceRegistryService } from './references.js';
import { NamespacePurges as NamespacePurgesService } from './namespace-purge.js';
import { RetrieverRemovals as RetrieverRemovalsService } from './retrieval/removals.js';
import { DatabaseTaskQueue, taskMigrations } from './tasks/task-queue.js';
import { NatsTaskQueue } from './tasks/nats-task-queue.js';
import { TaskBacklog, TaskConsumerPresence, taskConsumerMigrations } from './tasks/consumers.js';
import { TaskWorkerHeartbeat, liveTaskWorkers, workerHeartbeatMigrations } from './tasks/worker-heartbeat.js';
import { createBlobStore } from './blobs/index.js';
import { signingSecret } from './secrets.js';
import { chooseEngine, createVectorIndex } from './vectors/index.js';
import { SqlTextIndex, textIndexMigrations } from './text/text-index.js';

/** How often the embedded database's tables are checked for growth that needs new planner statistics. */
const TABLE_STATISTICS_INTERVAL_MS = 15_000;
import { InferenceCallStats, inferenceCallStatsMigrations } from './inference/call-stats.js';
import { InferenceClient, probeInference, startInferenceWorkers } from './inference/index.js';

export interface KernelOverrides {
  clock?: ClockShape;
  logger?: Logger;
  /** A PGlite data dump to start from instead of running initdb (tests). */
  pgliteTemplate?: Blob;
  /** The embedded database another thread of this process opened (the task thread uses its parent's). */
  databasePort?: MessagePort;
}

export interface KernelOptions {
  config: ConfigShape;
  /** Loaded plugin objects, each with where it came from (for contract errors). */
  plugins: ReadonlyArray<{ plugin: unknown; origin: string }>;
  /**
   * The plugin modules, by specifier, that spawned inference workers load for their models. Without
   * them (and without INFERENCE_ADDRESSES) this process runs no inference workers.
   */
  inferencePlugins?: readonly string[];
  /**
   * The plugin modules, by specifier, for the task thread: with them, the embedded database and
   * `config.taskThread`, tasks run in a thread beside the HTTP one (kernel/tasks/task-thread.ts). Without
   * them (tests that pass plugin objects), tasks run on the HTTP thread.
   */
  taskThreadPlugins?: readonly string[];
  /**
   * Called as soon as a first start created the first organization, before anything else can fail: its
   * admin-key must reach the operator even when the start then fails (a port in use), since the database
   * keeps the organization and no later start shows the key again.
   */
  onBootstrap?: (created: NewOrganization) => void;
  overrides?: KernelOverrides;
}

/** The kernel without its HTTP server: for operator commands (`tessera orgs create`). */
export interface KernelCore {
  container: Container;
  services: T.Services;
  stop(): Promise<void>;
}

export interface Kernel {
  container: Container;
  /** Typed access to the container's services. */
  services: T.Services;
  config: ConfigShape;
  server: Server;
  port: number;
  url: string;
  /** Set when this start created the first organization (its admin-key plaintext is shown once). */
  bootstrap: NewOrganization | undefined;
  /** What the operator should know about this start (also logged as warnings). */
  warnings: string[];
  stop(): Promise<void>;
}

export async function loadApiDocument(): Promise<Record<string, unknown>> {
  return JSON.parse(await readFile(path.join(projectRoot(), 'generated/openapi.json'), 'utf8')) as Record<string, unknown>;
}

export async function startKernel(options: KernelOptions): Promise<Kernel> {
  const core = await openCore(options);
  try {
    return await serve(core, options);
  } catch (err) {
    await core.lifecycle.stop();
    throw err;
  }
}

/** Opens the database (migrated) and the event bus, with every plugin's services bound; no HTTP. */
export async function openKernelCore(options: KernelOptions): Promise<KernelCore> {
  // A command that runs for seconds holds no caches worth keeping current: it sends its own changes' notices
  // to the running processes, but opens no connection to listen for theirs.
  const core = await openCore(options, { listenForCacheNotices: false });
  return { container: core.container, services: core.services, stop: () => core.lifecycle.stop() };
}

interface Core {
  container: Container;
  services: T.Services;
  lifecycle: LifecycleService;
  log: Logger;
  clock: ClockShape;
  registry: PluginRegistryService;
  apiDocument: Record<string, unknown>;
}

interface CoreMode {
  /** Listen for other processes' cache notices (PostgreSQL): every long-running process does. */
  listenForCacheNotices: boolean;
}

async function openCore(options: KernelOptions, mode: CoreMode = { listenForCacheNotices: true }): Promise<Core> {
  const log = options.overrides?.logger ?? createLogger(options.config.logLevel, undefined, resolveLogFormat(options.config.logFormat));
  const clock = options.overrides?.clock ?? systemClock;
  const lifecycle = new LifecycleService(log);
  const container = new Container();
  try {
    return await assembleCore(container, lifecycle, log, clock, options, mode);
  } catch (err) {
    await lifecycle.stop();
    throw err;
  }
}

async function assembleCore(
  container: Container,
  lifecycle: LifecycleService,
  log: Logger,
  clock: ClockShape,
  options: KernelOptions,
  mode: CoreMode,
): Promise<Core> {
  const { config } = options;
  container.bind(T.Config).toConstantValue(config);
  container.bind(T.RootLogger).toConstantValue(log);
  container.bind(T.Clock).toConstantValue(clock);
  container.bind(T.Lifecycle).toConstantValue(lifecycle);

  const registry = new PluginRegistryService();
  for (const { plugin, origin } of options.plugins) registry.add(plugin, origin);
  container.bind(T.PluginRegistry).toConstantValue(registry);

  const apiDocument = await loadApiDocument();
  container.bind(T.ApiDocument).toConstantValue(apiDocument);

  // Backing components. The embedded database serves one process: lock its folder first (released
  // after the database closes, as shutdown hooks run in reverse).
  const databasePort = options.overrides?.databasePort;
  if (!config.databaseUrl && !config.databaseInMemory && !databasePort) {
    const lock = acquireHomeLock(config.home, log);
    lifecycle.onShutdown('TESSERA_HOME lock', () => lock.release());
  }
  const database = await openDatabase({
    url: config.databaseUrl,
    dataDir: path.join(config.home, 'db'),
    inMemory: config.databaseInMemory,
    log: log.child({ component: 'database' }),
    ...(options.overrides?.pgliteTemplate ? { pgliteTemplate: options.overrides.pgliteTemplate } : {}),
    ...(databasePort ? { pglitePort: databasePort } : {}),
  });
  lifecycle.onShutdown('database', () => database.close());
  container.bind(T.DatabaseHandle).toConstantValue(database);
  const db = database.db;
  if (database.kind === 'postgres' && config.databaseUrl && config.definitionCache) {
    const notices = new PostgresNotices(config.databaseUrl, (channel, payload) => db.raw('select pg_notify(?, ?)', [channel, payload]), log.child({ component: 'cache-notices' }));
    // While not listening (refused, lost later, or never started), the definition caches are off: every read
    // goes to the database.
    if (mode.listenForCacheNotices) await notices.start();
    // Registered after the database's hook, so it closes first.
    lifecycle.onShutdown('cache notices', () => notices.close());
    container.bind(T.CrossProcessNotices).toConstantValue(notices);
  }
  if (await keepsOwnStatistics(database, databasePort !== undefined)) {
    // PostgreSQL's autovacuum keeps its planner's statistics current; PGlite has none (kernel/db/table-statistics.ts).
    if (database.kind === 'postgres') log.info('PostgreSQL runs without autovacuum: Tessera analyzes the tables that grew itself');
    const statistics = new TableStatistics(db, log.child({ component: 'table-statistics' }));
    statistics.start(TABLE_STATISTICS_INTERVAL_MS);
    lifecycle.onShutdown('table statistics', () => statistics.stop());
  }

  const events: EventBusShape = config.natsUrl
    ? await NatsEventBus.connect(config.natsUrl, config.natsPrefix, log.child({ component: 'events' })).catch((err: unknown) => {
        throw natsStartupError(err, config.natsUrl!);
      })
    : new InProcessEventBus(log.child({ component: 'events' }), database.notices);
  lifecycle.onShutdown('event bus', () => events.close());
  container.bind(T.EventBus).toConstantValue(events);
  container.bind(T.Announcer).toConstantValue(new Announcer(events, log.child({ component: 'events' })));

  // Presigned URLs of the local blob store point at this API; its address is known once it listens.
  const publicUrl = { current: config.publicUrl ?? `http://127.0.0.1:${config.port}` };
  const secret = await signingSecret(config);
  container.bind(T.BlobSigningSecret).toConstantValue(secret);
  const blobs = createBlobStore({
    localRoot: path.join(config.home, 'blobs'),
    signingSecret: secret,
    publicBaseUrl: () => publicUrl.current,
    clock,
    ...(config.s3 ? { s3: config.s3 } : {}),
  });
  container.bind(T.BlobStore).toConstantValue(blobs);
  container.bind(T.PublicUrl).toConstantValue(publicUrl);
  container.bind(T.LocalApiUrl).toConstantValue({ current: '' });

  const vectors = createVectorIndex({
    engine: chooseEngine({ requested: config.vectorEngine, hasPgvector: database.hasPgvector }),
    db,
    lanceDir: path.join(config.home, 'vectors'),
    milvus: config.milvus,
    ...(config.vectorMemoryIndex
      ? {
          memory: {
            db,
            // PGlite has one connection in one process; PostgreSQL may be shared by several API processes.
            lockDuringWrites: database.kind === 'postgres',
            sharedDatabase: database.kind === 'postgres',
            ...(database.notices ? { notices: database.notices } : {}),
            // The task thread never searches: its writes feed the API thread's graphs through the change log.
            ...(databasePort ? { keepGraphs: false } : { graphThread: config.vectorGraphThread }),
            log: log.child({ component: 'vectors' }),
            maxVectors: config.vectorMemoryMaxVectors,
          },
        }
      : {}),
  });
  lifecycle.onShutdown('vector index', () => vectors.close());
  container.bind(T.VectorIndex).toConstantValue(vectors);
  container.bind(T.TextIndex).toConstantValue(new SqlTextIndex(db));

  const health = new HealthRegistryService();
  health.register({ name: 'blob_store', kind: blobs.kind, required: true, probe: () => blobs.ping() });
  health.register({ name: 'vectors', kind: vectors.engine, required: true, probe: () => vectors.ping() });
  health.register({ name: 'database', kind: database.kind, required: true, probe: async () => void (await db.raw('select 1')) });
  health.register({ name: 'event_bus', kind: events.kind, required: true, probe: async () => void (await events.ping()) });
  container.bind(T.HealthRegistry).toConstantValue(health);

  // Kernel services.
  const keyStore = new KeyStoreService(db, clock, config.keyCacheTtlMs, {
    maxEntries: config.unknownKeyCacheSize,
    ttlMs: config.unknownKeyCacheTtlMs,
  });
  const tenants = new TenantStoreService(db, keyStore, clock);
  const requestLog = new RequestLogService(db, log.child({ component: 'request-log' }));
  container.bind(T.KeyStore).toConstantValue(keyStore);
  container.bind(T.TenantStore).toConstantValue(tenants);
  container.bind(T.AuditLog).toConstantValue(new AuditLogService(db, clock));
  // Every limit (per key, per unauthenticated address, per published retriever) goes through this one
  // limiter. PostgreSQL may serve several API processes, so their counters live there; the embedded
  // PGlite serves exactly one process, so they stay in memory: exact, and no I/O on the request path.
  if (database.kind === 'postgres') {
    const limiter = new SharedRateLimiter(db, clock, { log: log.child({ component: 'rate-limits' }) });
    lifecycle.onShutdown('rate limits', () => limiter.close());
    container.bind(T.RateLimiter).toConstantValue(limiter);
  } else {
    container.bind(T.RateLimiter).toConstantValue(new InProcessRateLimiter(clock));
  }
  container.bind(T.RequestLog).toConstantValue(requestLog);
  container.bind(T.Authenticator).toConstantValue(
    new Authenticator(keyStore, clock, config.planRateLimitPerMinute, {
      limiter: container.get(T.RateLimiter),
      perMinute: config.unauthenticatedRateLimitPerMinute,
      trustedProxyHops: config.trustedProxyHops,
    }),
  );
  container.bind(T.ResourceIdentifiers).toConstantValue(new ResourceIdentifiersService());
  container.bind(T.ReferenceRegistry).toConstantValue(new ReferenceRegistryService());
  container.bind(T.NamespacePurges).toConstantValue(new NamespacePurgesService());
  container.bind(T.RetrieverRemovals).toConstantValue(new RetrieverRemovalsService());
  // Tasks travel through a JetStream work queue when NATS is configured; the table stays their record either way.
  const tasks = config.natsUrl
    ? await NatsTaskQueue.create({
        db,
        clock,
        log: log.child({ component: 'tasks' }),
        nats: config.natsUrl,
        prefix: config.natsPrefix,
        leaseMs: config.taskLeaseMs,
        concurrency: config.taskConcurrency,
      }).catch((err: unknown) => {
        throw natsStartupError(err, config.natsUrl!);
      })
    : new DatabaseTaskQueue(db, clock, log.child({ component: 'tasks' }), {
        leaseMs: config.taskLeaseMs,
        pollMs: 500,
        concurrency: config.taskConcurrency,
        // PGlite serves one process: whatever it finds RUNNING at start was left by a process that died.
        soleRunner: !config.databaseUrl,
        ...(database.notices ? { notices: database.notices } : {}),
      });
  // Also reached without serve() (operator commands): stop() is idempotent and closes the NATS connection.
  lifecycle.onShutdown('task queue', () => tasks.stop());
  container.bind(T.TaskQueue).toConstantValue(tasks);
  const backlog = new TaskBacklog(db, clock, config.taskWaitWarnMs);
  container.bind(T.TaskBacklog).toConstantValue(backlog);
  health.register({
    name: 'task_queue',
    kind: config.natsUrl ? 'nats' : 'database',
    required: false,
    probe: async () => {
      const { waiting_for_worker: waiting, ...details } = await backlog.report();
      if (!waiting) return { details };
      return {
        degraded: `no process is taking tasks: ${details.queued} task(s) queued, the oldest for ${details.oldest_queued_age_seconds} s; start \`tessera worker\` or run the server with TESSERA_RUN_TASKS=true`,
        details,
      };
    },
  });

  if (database.kind === 'postgres') {
    // Several processes share PostgreSQL: task workers elsewhere say what they hold through their heartbeats.
    health.register({
      name: 'task_workers',
      kind: config.natsUrl ? 'nats' : 'database',
      required: false,
      probe: async () => {
        const workers = await liveTaskWorkers(db, clock);
        // This process is counted as `api` already.
        const rssBytes = workers.filter((w) => !w.this_process).reduce((sum, w) => sum + w.rss_bytes, 0);
        return { rssBytes, details: { workers, rss_bytes: rssBytes } };
      },
    });
  }

  const services = T.servicesOf(container);
  for (const resource of registry.resources) resource.services?.(container, services);

  const migrationSets: MigrationSet[] = [
    { owner: 'kernel', migrations: [...authMigrations, ...requestLogMigrations, ...taskMigrations, ...taskConsumerMigrations, ...textIndexMigrations, ...workerHeartbeatMigrations, ...inferenceCallStatsMigrations] },
    ...registry.resources.map((r) => ({ owner: r.name, migrations: r.migrations ?? [] })),
  ];
  const applied = await runMigrations(db, migrationSets);
  if (applied.length > 0) log.info({ migrations: applied }, 'database migrated');
  return { container, services, lifecycle, log, clock, registry, apiDocument };
}

async function serve(core: Core, options: KernelOptions): Promise<Kernel> {
  const { container, services, lifecycle, log, clock, registry, apiDocument } = core;
  const { config } = options;
  const events = services.get(T.EventBus);
  const keyStore = services.get(T.KeyStore);
  const tenants = services.get(T.TenantStore);
  const requestLog = services.get(T.RequestLog);

  const bootstrap = await tenants.bootstrapFirstOrganization({
    name: config.organizationName,
    ownerEmail: config.adminEmail,
    adminKeyPlaintext: config.adminKey,
  });
  if (bootstrap) options.onBootstrap?.(bootstrap);
  const warnings = bootstrap ? [] : await adminKeyWarnings(keyStore, config);
  for (const warning of warnings) log.warn(warning);

  // Key changes made by any process evict that key from every process's cache; a minted or rotated
  // secret must not stay remembered as unknown anywhere.
  const unsubscribe = events.subscribe('api_key.*', (event) => {
    const keyId = event.data.key_id;
    if (typeof keyId === 'string') keyStore.evict(keyId);
    if (event.type === 'api_key.created' || event.type === 'api_key.rotated') keyStore.forgetUnknownKeys();
  });
  lifecycle.onShutdown('key cache subscription', unsubscribe);

  const flushTimer = setInterval(() => {
    void requestLog.flush();
    void keyStore.flushLastUsed().catch((err: unknown) => log.error({ err }, 'last_used_at write failed'));
  }, config.requestLogFlushMs);
  flushTimer.unref();
  lifecycle.onShutdown('request log', async () => {
    clearInterval(flushTimer);
    await requestLog.flush();
    await keyStore.flushLastUsed();
  });

  await setupPlugins(core, config);

  const handlers = collectHandlers(registry.resources);
  const authorizer = new Authorizer(T.tryResolve(container, T.NamespaceResolver), services.get(T.ResourceIdentifiers));
  const app = buildHttpApp({
    container,
    log,
    clock,
    apiDocument,
    validateResponses: config.validateResponses,
    jsonBodyLimit: config.jsonBodyLimit,
    authenticator: container.get(T.Authenticator),
    authorizer,
    rateLimiter: container.get(T.RateLimiter),
    keyStore,
    requestLog,
    handlers,
  });

  await startInference(core, options);

  // Background tasks stop after the HTTP server has drained (shutdown hooks run in reverse).
  const database = services.get(T.DatabaseHandle);
  const taskThread = config.runTasks && config.taskThread && database.connect !== undefined && (options.taskThreadPlugins?.length ?? 0) > 0;
  if (config.runTasks && !taskThread) await startTaskRunner(core, config, 'api');

  await lifecycle.start();
  const server = await listen(app, config.port, config.host);
  lifecycle.onShutdown('http server', () => closeServer(server, config.shutdownGraceMs));
  const port = (server.address() as AddressInfo).port;
  services.get(T.LocalApiUrl).current = `http://${loopbackHost(config.host)}:${port}`;
  if (!config.publicUrl) {
    services.get(T.PublicUrl).current = `http://${config.host === '0.0.0.0' ? 'localhost' : config.host}:${port}`;
  }
  if (taskThread) await startTaskThread(core, options, database);
  return {
    container,
    services,
    config,
    server,
    port,
    url: `http://127.0.0.1:${port}`,
    bootstrap,
    warnings,
    stop: () => lifecycle.stop(),
  };
}

/** Runs every resource plugin's setup (task handlers, subscriptions, timers). */
async function setupPlugins(core: Core, config: ConfigShape): Promise<void> {
  const { container, services, lifecycle, log, registry } = core;
  const pluginContext: PluginContext = { container, services, config, log, lifecycle, events: services.get(T.EventBus) };
  for (const resource of registry.resources) await resource.setup?.({ ...pluginContext, log: log.child({ plugin: resource.name }) });
}

/** Tasks in a thread beside the HTTP one, over this process's embedded database and inference workers. */
async function startTaskThread(core: Core, options: KernelOptions, database: DatabaseHandle): Promise<void> {
  const inference = core.services.get(T.Inference);
  const thread = new TaskThread(
    {
      config: options.config,
      plugins: options.taskThreadPlugins ?? [],
      baseDir: process.cwd(),
      inferenceAddresses: inference.addresses(),
      publicUrl: core.services.get(T.PublicUrl).current,
    },
    () => database.connect!(),
    core.log.child({ component: 'task-thread' }),
  );
  // Registered after the HTTP server's hook: it stops first, and before the database closes.
  core.lifecycle.onShutdown('task thread', () => thread.stop());
  await thread.start();
}

/** Takes tasks in this process, and says so in `task_consumers` (health and batches look there for a worker). */
async function startTaskRunner(core: Core, config: ConfigShape, role: 'api' | 'worker'): Promise<void> {
  const tasks = core.services.get(T.TaskQueue);
  const presence = new TaskConsumerPresence(core.services.get(T.DatabaseHandle).db, core.clock, core.log.child({ component: 'tasks' }), config.natsUrl ? 'nats' : 'database');
  await presence.start();
  // Health lists the task workers with their memory from these rows.
  const heartbeat = new TaskWorkerHeartbeat(core.services.get(T.DatabaseHandle).db, core.clock, core.log.child({ component: 'tasks' }), role, config.natsUrl ? 'nats' : 'database');
  await heartbeat.start();
  core.lifecycle.onShutdown('task worker heartbeat', () => heartbeat.stop());
  tasks.start();
  core.lifecycle.onShutdown('task runner', async () => {
    await tasks.stop();
    await presence.stop();
  });
}

/** A task consumer without HTTP (`tessera worker`): scales batch processing out beside the API processes. */
export interface Worker {
  services: T.Services;
  stop(): Promise<void>;
}

export async function startWorker(options: KernelOptions): Promise<Worker> {
  const core = await openCore(options);
  try {
    await setupPlugins(core, options.config);
    await startInference(core, options);
    await startTaskRunner(core, options.config, 'worker');
    await core.lifecycle.start();
    core.log.info('worker running tasks');
    return { services: core.services, stop: () => core.lifecycle.stop() };
  } catch (err) {
    await core.lifecycle.stop();
    throw err;
  }
}

/**
 * Remote workers (INFERENCE_ADDRESSES), or workers this process spawns over the given plugin modules, or
 * none: then the client has no address and every call is a ServiceUnavailableError. Inference is not
 * required for the API to serve; health reports it as degraded when its workers do not answer.
 */
async function startInference(core: Core, options: KernelOptions): Promise<void> {
  const { config } = options;
  const remote = config.inferenceAddresses;
  const spawn = remote.length === 0 && (options.inferencePlugins?.length ?? 0) > 0 && config.inferenceWorkers > 0;
  if (remote.length === 0 && !spawn) {
    core.container.bind(T.Inference).toConstantValue(new InferenceClient({ addresses: [], log: core.log.child({ component: 'inference' }) }));
    return;
  }
  // Model latency and throughput for the analytics, written every half minute (call-stats.ts).
  const calls = new InferenceCallStats(core.services.get(T.DatabaseHandle).db, core.clock, core.log.child({ component: 'inference-stats' }));
  const runtime = await startInferenceWorkers({
    addresses: remote,
    plugins: options.inferencePlugins ?? [],
    workers: config.inferenceWorkers,
    log: core.log,
    pool: { logLevel: config.logLevel, logFormat: resolveLogFormat(config.logFormat) },
    client: { onCall: (call) => calls.record(call) },
  });
  calls.start();
  core.container.bind(T.InferenceCallStats).toConstantValue(calls);
  core.lifecycle.onShutdown('inference', () => runtime.stop());
  core.lifecycle.onShutdown('inference statistics', () => calls.stop());
  core.container.bind(T.Inference).toConstantValue(runtime.client);
  core.services.get(T.HealthRegistry).register({
    name: 'inference',
    kind: runtime.pool ? `${config.inferenceWorkers} spawned workers` : `${remote.length} remote workers`,
    required: false,
    probe: () => probeInference(runtime.client),
  });
}

function collectHandlers(resources: PluginRegistryService['resources']): Map<OperationId, AnyHandler> {
  const handlers = new Map<OperationId, AnyHandler>();
  for (const resource of resources) {
    for (const [operationId, handler] of Object.entries(resource.handlers)) {
      if (!operations.has(operationId as OperationId)) {
        throw new Error(`resource ${resource.name} handles '${operationId}', which the OpenAPI document does not define`);
      }
      if (handlers.has(operationId as OperationId)) throw new Error(`operation '${operationId}' has two handlers`);
      handlers.set(operationId as OperationId, handler as AnyHandler);
    }
  }
  const missing = [...operations.keys()].filter((id) => !handlers.has(id));
  if (missing.length > 0) throw new Error(`no plugin handles these operations: ${missing.join(', ')}`);
  return handlers;
}

/**
 * TESSERA_ADMIN_KEY is read on the first start only. Set later to another value, it would look
 * applied while the first start's admin-key stays in force: say so instead of ignoring it.
 */
async function adminKeyWarnings(keyStore: KeyStoreService, config: ConfigShape): Promise<string[]> {
  if (!config.adminKey) return [];
  const key = await keyStore.findByPlaintext(config.adminKey);
  if (key && key.is_protected && key.name === ADMIN_KEY_NAME) return [];
  return [
    `TESSERA_ADMIN_KEY is not the admin-key: it is read on the first start only, and the admin-key created then is still the one in force (this value was ignored). ` +
      `Use that admin-key, create further admin keys with it (tessera keys create --user ${config.adminEmail} --name <name> --permissions admin), and unset TESSERA_ADMIN_KEY.`,
  ];
}

/** An address of this host that reaches a server listening on `host` (any address: the IPv4 loopback). */
function loopbackHost(host: string): string {
  if (host === '0.0.0.0' || host === '' || host === '::') return '127.0.0.1';
  return host.includes(':') ? `[${host}]` : host;
}

function listen(app: import('express').Express, port: number, host: string): Promise<Server> {
  return new Promise((resolve, reject) => {
    const server = createAppServer(app);
    server.keepAliveTimeout = 65_000;
    const failed = (err: Error) => reject(listenStartupError(err, host, port));
    server.once('error', failed);
    server.listen(port, host, () => {
      server.off('error', failed);
      resolve(server);
    });
  });
}

/** Stops accepting connections and waits for in-flight requests, up to the grace period. */
function closeServer(server: Server, graceMs: number): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => server.closeAllConnections(), graceMs);
    timer.unref();
    server.close(() => {
      clearTimeout(timer);
      resolve();
    });
    server.closeIdleConnections();
  });
}
