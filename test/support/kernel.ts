/**
 * startTestKernel(): the real service on port 0 with real databases. PGlite (from the template the
 * global setup prepared) unless TEST_DATABASE_URL is set, in which case each kernel gets a fresh
 * PostgreSQL database; the in-process bus unless NATS_URL is set, in which case a private NATS stream.
 */
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { inject } from 'vitest';
import type { components } from '../../generated/openapi.js';
import pg from 'pg';
import { deleteTaskStream } from '../../kernel/tasks/jetstream.js';
import type { Logger } from 'pino';
import { startKernel, type Kernel } from '../../kernel/app.js';
import { loadConfig, type Config } from '../../kernel/config.js';
import type { Clock } from '../../kernel/clock.js';
import { NatsEventBus } from '../../kernel/events/nats.js';
import { createTesseraClient, type TesseraClient } from '../../generated/client.js';
import builtins from '../../plugins/index.js';
import { capturingLogger } from './logs.js';

export interface TestKernel {
  kernel: Kernel;
  url: string;
  /** The protected admin-key of the first organization. */
  adminKey: string;
  adminEmail: string;
  /** Every line the service logged. */
  logs: string[];
  config: Config;
  client(key?: string, namespace?: string): TesseraClient;
  /** Raw HTTP for requests the typed client would refuse to build (bad bodies, odd headers). */
  request(method: string, path: string, options?: RawRequest): Promise<RawResponse>;
  stop(): Promise<void>;
}

export interface RawRequest {
  key?: string;
  body?: unknown;
  headers?: Record<string, string>;
}

export interface RawResponse {
  status: number;
  headers: Headers;
  body: any;
  text: string;
}

export interface TestKernelOptions {
  plugins?: readonly unknown[];
  /** Plugin modules spawned inference workers load (none: the kernel runs no inference workers). */
  inferencePlugins?: readonly string[];
  /** Plugin modules of the task thread (embedded database only; none: tasks run on the HTTP thread). */
  taskThreadPlugins?: readonly string[];
  config?: Partial<Config>;
  clock?: Clock;
  logger?: Logger;
  /** Ignore NATS_URL: the in-process bus and the embedded task runner (tests of those defaults). */
  withoutNats?: boolean;
  /**
   * Ignore TEST_DATABASE_URL and NATS_URL: the embedded database and the in-process bus, for tests of what
   * only the embedded default has (the database and task threads), so they run in every suite run.
   */
  embedded?: boolean;
}

async function createPostgresDatabase(baseUrl: string): Promise<{ url: string; drop: () => Promise<void> }> {
  const name = `tessera_test_${randomBytes(6).toString('hex')}`;
  const admin = new pg.Client({ connectionString: baseUrl });
  await admin.connect();
  await admin.query(`create database ${name}`);
  await admin.end();
  const url = new URL(baseUrl);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    drop: async () => {
      const c = new pg.Client({ connectionString: baseUrl });
      await c.connect();
      await c.query(`drop database if exists ${name} with (force)`);
      await c.end();
    },
  };
}

export async function startTestKernel(options: TestKernelOptions = {}): Promise<TestKernel> {
  const adminKey = `svc_sk_test_${randomBytes(24).toString('hex')}`;
  const adminEmail = 'owner@example.test';
  const cleanups: Array<() => Promise<void>> = [];
  const base = loadConfig({});
  // Each kernel keeps its blobs and secrets in a folder of its own, removed when it stops.
  const home = await mkdtemp(path.join(os.tmpdir(), 'tessera-test-'));
  cleanups.push(() => rm(home, { recursive: true, force: true }));
  const config: Config = {
    ...base,
    home,
    port: 0,
    host: '127.0.0.1',
    adminKey,
    adminEmail,
    organizationName: 'test-org',
    databaseInMemory: true,
    validateResponses: true,
    logLevel: 'debug',
    // Every test client shares 127.0.0.1: the per-address limit on failed requests is tested on its own.
    unauthenticatedRateLimitPerMinute: 0,
    ...options.config,
  };
  if (process.env.TEST_DATABASE_URL && options.config?.databaseUrl === undefined && !options.embedded) {
    const database = await createPostgresDatabase(process.env.TEST_DATABASE_URL);
    config.databaseUrl = database.url;
    cleanups.push(database.drop);
  }
  if (process.env.NATS_URL && options.config?.natsUrl === undefined && !options.withoutNats && !options.embedded) {
    config.natsUrl = process.env.NATS_URL;
    config.natsPrefix = `t${randomBytes(5).toString('hex')}`;
    cleanups.push(() => NatsEventBus.deleteStream(config.natsUrl!, config.natsPrefix));
    cleanups.push(() => deleteTaskStream(config.natsUrl!, config.natsPrefix));
  }
  const captured = capturingLogger(config.logLevel);
  const template = inject('pgliteTemplate');
  let kernel: Kernel;
  try {
    kernel = await startKernel({
      config,
      plugins: (options.plugins ?? builtins).map((plugin) => ({ plugin, origin: 'test' })),
      ...(options.inferencePlugins ? { inferencePlugins: options.inferencePlugins } : {}),
      ...(options.taskThreadPlugins ? { taskThreadPlugins: options.taskThreadPlugins } : {}),
      overrides: {
        logger: options.logger ?? captured.logger,
        ...(options.clock ? { clock: options.clock } : {}),
        ...(template && !config.databaseUrl ? { pgliteTemplate: new Blob([template]) } : {}),
      },
    });
  } catch (err) {
    // A kernel that refuses to start (tests of boot-time checks) must not leave its database or stream behind.
    for (const cleanup of cleanups.reverse()) await cleanup().catch(() => {});
    throw err;
  }

  const request = async (method: string, path: string, opts: RawRequest = {}): Promise<RawResponse> => {
    const headers: Record<string, string> = { ...opts.headers };
    if (opts.key) headers.Authorization = `Bearer ${opts.key}`;
    let body: string | undefined;
    if (opts.body !== undefined) {
      headers['Content-Type'] ??= 'application/json';
      body = typeof opts.body === 'string' ? opts.body : JSON.stringify(opts.body);
    }
    const res = await fetch(`${kernel.url}${path}`, { method, headers, ...(body !== undefined ? { body } : {}) });
    const text = await res.text();
    let parsed: unknown = undefined;
    try {
      parsed = text ? JSON.parse(text) : undefined;
    } catch {
      parsed = undefined;
    }
    return { status: res.status, headers: res.headers, body: parsed, text };
  };

  return {
    kernel,
    url: kernel.url,
    adminKey,
    adminEmail,
    logs: captured.lines,
    config,
    client: (key = adminKey, namespace) =>
      createTesseraClient({ baseUrl: kernel.url, apiKey: key, ...(namespace ? { namespace } : {}) }),
    request,
    stop: async () => {
      await kernel.stop();
      for (const cleanup of cleanups.reverse()) await cleanup();
    },
  };
}

type MeAnswer = components['schemas']['MeResponse'] | components['schemas']['BoundKeyMeResponse'];

/** `GET /v1/me` as an organization key sees it (a key bound to one retriever gets the short form instead). */
export function organizationMe(data: MeAnswer | undefined): components['schemas']['MeResponse'] {
  if (!data || 'bound_retriever' in data) throw new Error(`expected an organization key's GET /v1/me answer, got ${JSON.stringify(data)}`);
  return data;
}
