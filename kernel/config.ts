/**
 * One typed configuration, read once from the environment. Plugins receive it injected and never
 * read process.env themselves.
 */
import { availableParallelism } from 'node:os';
import path from 'node:path';
import { isAcceptableOperatorKey } from './auth/keys.js';
import type { LogFormat } from './logger.js';
import { StartupError } from './startup-errors.js';
import type { MilvusSettings } from './vectors/milvus.js';
import { defaultInferenceWorkers } from './inference/model-io.js';

export interface Config {
  /** HTTP port; 0 picks a free one (tests). */
  port: number;
  host: string;
  /** Data folder for the embedded defaults (PGlite data, blobs). */
  home: string;
  /** PostgreSQL URL; absent means the embedded PGlite under `home/db`. */
  databaseUrl: string | undefined;
  /** Use an in-memory PGlite instead of `home/db` (tests, throwaway runs). */
  databaseInMemory: boolean;
  /** NATS URL; absent means the in-process event bus. */
  natsUrl: string | undefined;
  /** Subject and stream prefix on NATS, so several deployments (or test runs) can share a server. */
  natsPrefix: string;
  /** Plaintext for the first organization's protected admin-key on first start. */
  adminKey: string | undefined;
  adminEmail: string;
  organizationName: string;
  /** Requests per minute per key when the key has no override; 0 means no plan limit. */
  planRateLimitPerMinute: number;
  /** How long an authenticated key stays cached before it is read again (ms). */
  keyCacheTtlMs: number;
  /** How long a secret the database did not know is refused without asking it again (ms; 0 turns it off). */
  unknownKeyCacheTtlMs: number;
  /** How many unknown secrets are remembered at most (the oldest goes first). */
  unknownKeyCacheSize: number;
  /** Failed or missing-key requests one client address may make per minute before 429 (0: no limit). */
  unauthenticatedRateLimitPerMinute: number;
  /**
   * How many reverse proxies in front of Tessera append to `X-Forwarded-For`; 0 (the default) uses the
   * socket address and ignores the header, which any client can forge.
   */
  trustedProxyHops: number;
  /** How often buffered request-log rows and last_used_at are written (ms). */
  requestLogFlushMs: number;
  logLevel: string;
  /** LOG_FORMAT; absent means pretty lines on a terminal, JSON lines otherwise. */
  logFormat: LogFormat | undefined;
  /** Validate every response against the OpenAPI document (on in tests). */
  validateResponses: boolean;
  /** Extra plugin modules (paths or package names). */
  plugins: string[];
  /** How long SIGTERM waits for in-flight requests (ms). */
  shutdownGraceMs: number;
  /** Largest JSON body accepted. */
  jsonBodyLimit: string;
  /** Largest file an upload (or a URL blob) may store; above it, 413. */
  maxUploadBytes: number;
  /** Base URL clients reach this API at, for presigned URLs; default http://localhost:<port>. */
  publicUrl: string | undefined;
  /** Secret for signing the local blob store's URLs; default a random one kept in `home/secrets`. */
  signingSecret: string | undefined;
  /** S3-compatible blob store; absent means the local folder `home/blobs`. */
  s3: S3Settings | undefined;
  /** Blob URLs (`url` sources) may point at private or loopback addresses only when this is on. */
  allowPrivateUrlFetch: boolean;
  urlFetchTimeoutMs: number;
  /** Webhook URLs may point at private or loopback addresses only when this is on (TESSERA_ALLOW_PRIVATE_WEBHOOK_URLS). */
  allowPrivateWebhookUrls: boolean;
  /** How long one webhook delivery attempt may take, connect to last byte (TESSERA_WEBHOOK_TIMEOUT_MS). */
  webhookTimeoutMs: number;
  /** The first retry delay of a failed webhook delivery; each later one is ten times the one before (TESSERA_WEBHOOK_RETRY_BASE_MS). */
  webhookRetryBaseMs: number;
  /** How often unconfirmed uploads past their expiry are cleaned up (ms). */
  uploadCleanupIntervalMs: number;
  /** Vector engine; absent means pgvector when the database has it, else LanceDB under `home/vectors`. */
  vectorEngine: 'pgvector' | 'lancedb' | 'milvus' | undefined;
  /** The Milvus server for VECTOR_ENGINE=milvus (MILVUS_ADDRESS and friends); absent otherwise. */
  milvus: MilvusSettings | undefined;
  /**
   * `VECTOR_MEMORY_INDEX` (default on): search an in-process HNSW copy of each index, kept current from
   * the database's change log, in front of the vector engine (which stays the source of truth). Off:
   * every search runs in the engine itself.
   */
  vectorMemoryIndex: boolean;
  /**
   * `TESSERA_GRAPH_THREAD` (default on): the in-process index's graphs live in a thread of their own
   * (kernel/vectors/graph-thread.ts), so graph walks and inserts run beside the HTTP thread.
   */
  vectorGraphThread: boolean;
  /**
   * `TESSERA_DEFINITION_CACHE` (default on): on PostgreSQL, each process keeps the definitions read on every
   * request (retrievers, collections) in memory, told of other processes' changes over
   * LISTEN/NOTIFY (kernel/db/pg-notices.ts); off, every request reads them from the database.
   */
  definitionCache: boolean;
  /** `VECTOR_MEMORY_MAX_VECTORS`: vectors one process holds in memory at most (larger indexes are searched in the engine). */
  vectorMemoryMaxVectors: number;
  /** Remote `tessera inference` workers; absent means workers this process spawns itself. */
  inferenceAddresses: string[];
  /** How many inference workers to spawn when there are no remote ones (default: one per four cores, at least one). */
  inferenceWorkers: number;
  /** How long a claimed task is reserved; a live process keeps extending it, a dead one's task is taken over after it. */
  taskLeaseMs: number;
  /** Tasks one process runs at a time (per task type on NATS). */
  taskConcurrency: number;
  /** ffmpeg processes one process runs at once across every extractor (default: two per core). */
  mediaProcesses: number;
  /** Whether `tessera serve` also runs background tasks (turn off when `tessera worker` processes do). */
  runTasks: boolean;
  /**
   * With the embedded database, `tessera serve` runs its tasks in a thread of their own, so batch work
   * never holds up HTTP requests (`TESSERA_TASK_THREAD=false` runs them on the HTTP thread).
   */
  taskThread: boolean;
  /** A due task waiting this long while no process takes tasks makes health `degraded` and batches say they wait for a worker. */
  taskWaitWarnMs: number;
  /** Source records per batch chunk task (smaller: finer progress and retries; larger: fewer tasks). */
  batchChunkSize: number;
  /** How often running batches are checked for stalls (0 turns the probe off). */
  batchHealthIntervalMs: number;
  /** A running batch without progress for this long is reported `stalled`. */
  batchStallAfterMs: number;
}

export interface S3Settings {
  endpoint: string | undefined;
  region: string;
  bucket: string;
  accessKeyId: string | undefined;
  secretAccessKey: string | undefined;
  forcePathStyle: boolean;
}

/** A bad value: the one line the CLI prints instead of starting. */
export class ConfigError extends StartupError {}

function int(value: string | undefined, fallback: number, name: string): number {
  if (value === undefined || value === '') return fallback;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0) throw new ConfigError(`${name} must be a whole number of 0 or more, got "${value}"; fix or unset ${name}.`);
  return n;
}

function port(value: string | undefined): number {
  const n = int(value, 8080, 'PORT');
  if (n > 65_535) throw new ConfigError(`PORT must be 0 to 65535, got "${value}"; fix or unset PORT (0 picks a free port).`);
  return n;
}

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

function logLevel(value: string | undefined): string {
  const level = text(value)?.toLowerCase() ?? 'info';
  if (!LOG_LEVELS.includes(level)) throw new ConfigError(`LOG_LEVEL must be one of ${LOG_LEVELS.join(', ')}, got "${value}".`);
  return level;
}

function logFormat(value: string | undefined): LogFormat | undefined {
  const format = text(value)?.toLowerCase();
  if (format === undefined || format === 'json' || format === 'pretty') return format;
  throw new ConfigError(`LOG_FORMAT must be json or pretty, got "${value}"; unset it for pretty lines on a terminal and JSON lines otherwise.`);
}

function adminKey(value: string | undefined): string | undefined {
  const key = text(value);
  if (key !== undefined && !isAcceptableOperatorKey(key)) {
    throw new ConfigError('TESSERA_ADMIN_KEY must be 24 to 200 printable characters without spaces; fix or unset it (unset, the first start generates one).');
  }
  return key;
}

function bool(value: string | undefined, fallback: boolean): boolean {
  if (value === undefined || value === '') return fallback;
  return ['1', 'true', 'yes', 'on'].includes(value.toLowerCase());
}

function vectorEngine(value: string | undefined): Config['vectorEngine'] {
  const engine = value?.toLowerCase();
  if (engine === undefined || engine === 'pgvector' || engine === 'lancedb' || engine === 'milvus') return engine;
  throw new ConfigError(`VECTOR_ENGINE must be pgvector, lancedb or milvus, got "${value}"; unset it for pgvector when the database has it, else LanceDB.`);
}

/** Milvus settings when VECTOR_ENGINE=milvus (MILVUS_* are read only then). */
function milvus(env: NodeJS.ProcessEnv, engine: Config['vectorEngine']): MilvusSettings | undefined {
  if (engine !== 'milvus') return undefined;
  const address = text(env.MILVUS_ADDRESS);
  if (!address) {
    throw new ConfigError('VECTOR_ENGINE=milvus needs MILVUS_ADDRESS, the Milvus server as host:port (e.g. 127.0.0.1:19530) or an https:// URL.');
  }
  if (!/^(https?:\/\/)?[^\s/:]+(:\d{1,5})?\/?$/.test(address)) {
    throw new ConfigError(`MILVUS_ADDRESS must be host:port (e.g. 127.0.0.1:19530) or an http(s):// URL, got "${address}".`);
  }
  const username = text(env.MILVUS_USERNAME);
  const password = text(env.MILVUS_PASSWORD);
  if ((username === undefined) !== (password === undefined)) {
    throw new ConfigError('MILVUS_USERNAME and MILVUS_PASSWORD go together; set both, or neither (or MILVUS_TOKEN instead).');
  }
  const token = text(env.MILVUS_TOKEN);
  if (token && username) throw new ConfigError('set MILVUS_TOKEN or MILVUS_USERNAME/MILVUS_PASSWORD, not both.');
  const database = text(env.MILVUS_DATABASE);
  if (database !== undefined && !/^[A-Za-z_][A-Za-z0-9_]{0,254}$/.test(database)) {
    throw new ConfigError(`MILVUS_DATABASE must start with a letter or _ and hold only letters, digits and _, got "${database}".`);
  }
  const collectionPrefix = text(env.MILVUS_COLLECTION_PREFIX);
  if (collectionPrefix !== undefined && !/^[A-Za-z_][A-Za-z0-9_]{0,120}$/.test(collectionPrefix)) {
    throw new ConfigError(`MILVUS_COLLECTION_PREFIX must start with a letter or _ and hold only letters, digits and _, got "${collectionPrefix}".`);
  }
  return { address, token, username, password, database, collectionPrefix };
}

function text(value: string | undefined): string | undefined {
  return value === undefined || value.trim() === '' ? undefined : value.trim();
}

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const home = path.resolve(env.TESSERA_HOME ?? '.tessera');
  const engine = vectorEngine(text(env.VECTOR_ENGINE));
  return {
    port: port(env.PORT),
    host: env.HOST ?? '0.0.0.0',
    home,
    databaseUrl: text(env.DATABASE_URL),
    databaseInMemory: bool(env.TESSERA_DB_IN_MEMORY, false),
    natsUrl: text(env.NATS_URL),
    natsPrefix: text(env.TESSERA_NATS_PREFIX) ?? 'tessera',
    adminKey: adminKey(env.TESSERA_ADMIN_KEY),
    adminEmail: text(env.TESSERA_ADMIN_EMAIL) ?? 'admin@localhost',
    organizationName: text(env.TESSERA_ORG_NAME) ?? 'default',
    planRateLimitPerMinute: int(env.TESSERA_RATE_LIMIT_PER_MINUTE, 0, 'TESSERA_RATE_LIMIT_PER_MINUTE'),
    keyCacheTtlMs: int(env.TESSERA_KEY_CACHE_TTL_MS, 10_000, 'TESSERA_KEY_CACHE_TTL_MS'),
    unknownKeyCacheTtlMs: int(env.TESSERA_UNKNOWN_KEY_CACHE_TTL_MS, 60_000, 'TESSERA_UNKNOWN_KEY_CACHE_TTL_MS'),
    unknownKeyCacheSize: int(env.TESSERA_UNKNOWN_KEY_CACHE_SIZE, 10_000, 'TESSERA_UNKNOWN_KEY_CACHE_SIZE'),
    unauthenticatedRateLimitPerMinute: int(
      env.TESSERA_UNAUTHENTICATED_RATE_LIMIT_PER_MINUTE,
      120,
      'TESSERA_UNAUTHENTICATED_RATE_LIMIT_PER_MINUTE',
    ),
    trustedProxyHops: int(env.TESSERA_TRUSTED_PROXY_HOPS, 0, 'TESSERA_TRUSTED_PROXY_HOPS'),
    requestLogFlushMs: int(env.TESSERA_REQUEST_LOG_FLUSH_MS, 1_000, 'TESSERA_REQUEST_LOG_FLUSH_MS'),
    logLevel: logLevel(env.LOG_LEVEL),
    logFormat: logFormat(env.LOG_FORMAT),
    validateResponses: bool(env.TESSERA_VALIDATE_RESPONSES, false),
    plugins: (env.TESSERA_PLUGINS ?? '')
      .split(',')
      .map((p) => p.trim())
      .filter(Boolean),
    shutdownGraceMs: int(env.TESSERA_SHUTDOWN_GRACE_MS, 10_000, 'TESSERA_SHUTDOWN_GRACE_MS'),
    jsonBodyLimit: env.TESSERA_JSON_BODY_LIMIT ?? '16mb',
    maxUploadBytes: int(env.TESSERA_MAX_UPLOAD_BYTES, 5 * 1024 ** 3, 'TESSERA_MAX_UPLOAD_BYTES'),
    publicUrl: text(env.TESSERA_PUBLIC_URL)?.replace(/\/+$/, ''),
    signingSecret: text(env.TESSERA_SIGNING_SECRET),
    s3: text(env.S3_BUCKET)
      ? {
          endpoint: text(env.S3_ENDPOINT),
          region: text(env.S3_REGION) ?? 'us-east-1',
          bucket: text(env.S3_BUCKET)!,
          accessKeyId: text(env.S3_ACCESS_KEY_ID),
          secretAccessKey: text(env.S3_SECRET_ACCESS_KEY),
          forcePathStyle: bool(env.S3_FORCE_PATH_STYLE, true),
        }
      : undefined,
    allowPrivateUrlFetch: bool(env.TESSERA_ALLOW_PRIVATE_URL_FETCH, false),
    urlFetchTimeoutMs: int(env.TESSERA_URL_FETCH_TIMEOUT_MS, 30_000, 'TESSERA_URL_FETCH_TIMEOUT_MS'),
    allowPrivateWebhookUrls: bool(env.TESSERA_ALLOW_PRIVATE_WEBHOOK_URLS, false),
    webhookTimeoutMs: Math.max(100, int(env.TESSERA_WEBHOOK_TIMEOUT_MS, 10_000, 'TESSERA_WEBHOOK_TIMEOUT_MS')),
    webhookRetryBaseMs: int(env.TESSERA_WEBHOOK_RETRY_BASE_MS, 10_000, 'TESSERA_WEBHOOK_RETRY_BASE_MS'),
    uploadCleanupIntervalMs: int(env.TESSERA_UPLOAD_CLEANUP_INTERVAL_MS, 300_000, 'TESSERA_UPLOAD_CLEANUP_INTERVAL_MS'),
    vectorEngine: engine,
    milvus: milvus(env, engine),
    vectorMemoryIndex: bool(env.VECTOR_MEMORY_INDEX, true),
    vectorGraphThread: bool(env.TESSERA_GRAPH_THREAD, true),
    definitionCache: bool(env.TESSERA_DEFINITION_CACHE, true),
    vectorMemoryMaxVectors: int(env.VECTOR_MEMORY_MAX_VECTORS, 2_000_000, 'VECTOR_MEMORY_MAX_VECTORS'),
    inferenceAddresses: (env.INFERENCE_ADDRESSES ?? '')
      .split(',')
      .map((a) => a.trim())
      .filter(Boolean),
    inferenceWorkers: int(env.TESSERA_INFERENCE_WORKERS, defaultInferenceWorkers(availableParallelism()), 'TESSERA_INFERENCE_WORKERS'),
    taskLeaseMs: Math.max(300, int(env.TESSERA_TASK_LEASE_MS, 60_000, 'TESSERA_TASK_LEASE_MS')),
    taskConcurrency: Math.max(1, int(env.TESSERA_TASK_CONCURRENCY, 4, 'TESSERA_TASK_CONCURRENCY')),
    mediaProcesses: Math.max(1, int(env.TESSERA_MEDIA_PROCESSES, 2 * availableParallelism(), 'TESSERA_MEDIA_PROCESSES')),
    runTasks: env.TESSERA_RUN_TASKS === undefined ? true : !['0', 'false', 'no', 'off'].includes(env.TESSERA_RUN_TASKS.toLowerCase()),
    taskThread: env.TESSERA_TASK_THREAD === undefined ? true : !['0', 'false', 'no', 'off'].includes(env.TESSERA_TASK_THREAD.toLowerCase()),
    taskWaitWarnMs: int(env.TESSERA_TASK_WAIT_WARN_MS, 5_000, 'TESSERA_TASK_WAIT_WARN_MS'),
    batchChunkSize: Math.max(1, int(env.TESSERA_BATCH_CHUNK_SIZE, 512, 'TESSERA_BATCH_CHUNK_SIZE')),
    batchHealthIntervalMs: int(env.TESSERA_BATCH_HEALTH_INTERVAL_MS, 30_000, 'TESSERA_BATCH_HEALTH_INTERVAL_MS'),
    batchStallAfterMs: int(env.TESSERA_BATCH_STALL_AFTER_MS, 300_000, 'TESSERA_BATCH_STALL_AFTER_MS'),
  };
}
