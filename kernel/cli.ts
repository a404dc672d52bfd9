/**
 * The `tessera` entry point: `serve` (what `npm start` runs), operator commands that work on the
 * database directly (`orgs create`), and client commands over the generated, typed REST client.
 */
import { createReadStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { inspect } from 'node:util';
import { fileURLToPath } from 'node:url';
import { Command, Option } from 'commander';
import { createTesseraClient, type TesseraClient } from '../generated/client.js';
import { pino } from 'pino';
import { loadConfig, type Config } from './config.js';
import { openKernelCore, startKernel, startWorker } from './app.js';
import { loadPluginModules, PluginRegistry } from './plugins.js';
import { EventBus, TenantStore } from './tokens.js';
import { runInferenceCommand } from './inference/index.js';
import { createLogger, resolveLogFormat, type Logger } from './logger.js';
import { StartupError } from './startup-errors.js';

// plugins/index.ts beside kernel/ (or plugins/index.js beside a built dist/kernel/).
const BUILTIN_PLUGINS = fileURLToPath(new URL(`../plugins/index${path.extname(fileURLToPath(import.meta.url))}`, import.meta.url));

/** Built-ins first, then TESSERA_PLUGINS, each checked against its contract. */
async function loadPlugins(extra: readonly string[]): Promise<Array<{ plugin: unknown; origin: string }>> {
  const loaded: Array<{ plugin: unknown; origin: string }> = [];
  const collector = { add: (plugin: unknown, origin: string) => void loaded.push({ plugin, origin }) } as unknown as PluginRegistry;
  await loadPluginModules(collector, [BUILTIN_PLUGINS, ...extra], process.cwd());
  return loaded;
}

/** The process's logger: LOG_FORMAT, or pretty on a terminal and JSON lines otherwise. */
function processLogger(config: Config, destination?: pino.DestinationStream): Logger {
  return createLogger(config.logLevel, destination, resolveLogFormat(config.logFormat));
}

/**
 * SIGTERM (docker, systemd, pm2, `npm start` forwarding it), SIGINT (Ctrl-C) and SIGHUP (its terminal
 * closed) stop the process once:
 * before it is ready, at once (nothing is served yet; the exit releases the TESSERA_HOME lock and the
 * spawned inference workers see their parent go); after, by draining through `stop`. A repeated signal
 * is ignored: Ctrl-C under npm arrives twice (from the terminal and forwarded by npm).
 */
function stopOnSignals(log: Logger, draining: string): { ready(stop: () => Promise<void>): void } {
  let stop: (() => Promise<void>) | undefined;
  let stopping = false;
  const onSignal = (signal: NodeJS.Signals) => {
    if (stopping) return;
    stopping = true;
    if (!stop) {
      log.info({ signal }, 'stopped while starting');
      process.exit(128 + (os.constants.signals[signal] ?? 15));
    }
    log.info({ signal }, draining);
    stop().then(
      () => process.exit(0),
      (err: unknown) => {
        log.error({ err }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
  // The terminal it ran in closed.
  process.on('SIGHUP', onSignal);
  return { ready: (run) => void (stop = run) };
}

/**
 * What only the person starting the service should see (the admin-key): on stdout when it is a terminal
 * with pretty logs, otherwise on stderr, so a JSON log stream on stdout never carries it.
 */
function toOperator(config: Config, text: string): void {
  (resolveLogFormat(config.logFormat) === 'pretty' ? process.stdout : process.stderr).write(text);
}

async function serveCommand(): Promise<void> {
  const config = loadConfig();
  const log = processLogger(config);
  const signals = stopOnSignals(log, 'draining in-flight requests and shutting down');
  const kernel = await startKernel({
    config,
    plugins: await loadPlugins(config.plugins),
    inferencePlugins: [BUILTIN_PLUGINS, ...config.plugins],
    overrides: { logger: log },
  });
  signals.ready(() => kernel.stop());
  if (kernel.bootstrap) {
    const { organization, owner, adminKeyPlaintext } = kernel.bootstrap;
    const shown = config.adminKey ? '(the value of TESSERA_ADMIN_KEY)' : adminKeyPlaintext;
    toOperator(
      config,
      `\nCreated organization '${organization.name}' (${organization.organization_id}) with owner ${owner.email}.\n` +
        `Its protected admin-key is shown this once; store it now:\n\n  ${shown}\n\n`,
    );
  }
  // Logged as warnings too; a JSON log stream is not where a person at the terminal looks.
  if (resolveLogFormat(config.logFormat) === 'json' && process.stderr.isTTY) {
    for (const warning of kernel.warnings) process.stderr.write(`warning: ${warning}\n`);
  }
  const host = config.host === '0.0.0.0' ? 'localhost' : config.host;
  log.info({ port: kernel.port }, `Tessera listening on http://${host}:${kernel.port}`);
}

async function workerCommand(): Promise<void> {
  const config = loadConfig();
  if (!config.databaseUrl) {
    // PGlite serves one process: the server that holds it runs the tasks itself.
    throw new StartupError('tessera worker shares the database with the API: set DATABASE_URL (with the embedded database, tessera serve runs the tasks itself).');
  }
  const log = processLogger(config);
  const signals = stopOnSignals(log, 'finishing running tasks and shutting down');
  const worker = await startWorker({
    config,
    plugins: await loadPlugins(config.plugins),
    inferencePlugins: [BUILTIN_PLUGINS, ...config.plugins],
    overrides: { logger: log },
  });
  signals.ready(() => worker.stop());
  log.info(`Tessera worker running tasks (${config.natsUrl ? 'NATS JetStream work queue' : 'database task runner'})`);
}

async function createOrganization(name: string, options: { adminEmail: string; adminKey?: string }): Promise<void> {
  const config = loadConfig();
  // stdout carries the command's result: logs go to stderr.
  const log = processLogger(config, pino.destination({ fd: 2, sync: true }));
  const core = await openKernelCore({ config, plugins: await loadPlugins(config.plugins), overrides: { logger: log } });
  try {
    const created = await core.services.get(TenantStore).createOrganization({
      name,
      ownerEmail: options.adminEmail,
      adminKeyPlaintext: options.adminKey,
    });
    // Running API processes may remember an operator-chosen secret as unknown; this makes them forget it.
    await core.services.get(EventBus).publish({
      type: 'api_key.created',
      organization_id: created.organization.organization_id,
      data: { key_id: created.adminKey.key_id, name: created.adminKey.name },
    });
    print({
      organization_id: created.organization.organization_id,
      name: created.organization.name,
      owner_email: created.owner.email,
      admin_key: created.adminKeyPlaintext,
    });
  } finally {
    await core.stop();
  }
}

function print(value: unknown): void {
  process.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
}

/** Prints a client call's body, or its error body and a failing exit code. */
async function show(call: Promise<{ data?: unknown; error?: unknown; response: Response }>): Promise<void> {
  const { data, error, response } = await call;
  if (error !== undefined || !response.ok) {
    process.stderr.write(`${response.status} ${JSON.stringify(error ?? {}, null, 2)}\n`);
    process.exitCode = 1;
    return;
  }
  print(data);
}

const list = (value: string) => value.split(',').map((v) => v.trim()).filter(Boolean);

function clientCommand(program: Command, name: string, description: string): Command {
  return program
    .command(name)
    .description(description)
    .addOption(new Option('--url <url>', 'Tessera base URL').env('TESSERA_URL').default('http://localhost:8080'))
    .addOption(new Option('--key <key>', 'API key').env('TESSERA_API_KEY'))
    .addOption(new Option('--namespace <ns>', 'X-Namespace').env('TESSERA_NAMESPACE'));
}

function clientOf(options: { url: string; key?: string; namespace?: string }): TesseraClient {
  return createTesseraClient({
    baseUrl: options.url,
    ...(options.key ? { apiKey: options.key } : {}),
    ...(options.namespace ? { namespace: options.namespace } : {}),
  });
}

type ClientOptions = { url: string; key?: string; namespace?: string };

export function buildProgram(): Command {
  const program = new Command('tessera').description('Tessera: multimodal data processing and retrieval');

  program.command('serve').description('Run the API with its embedded defaults (what npm start runs)').action(serveCommand);

  program
    .command('worker')
    .description('Run background tasks (batch processing) without the API; needs DATABASE_URL (and NATS_URL to use the JetStream work queue)')
    .action(workerCommand);

  program
    .command('inference')
    .description('Serve the models of the built-in and TESSERA_PLUGINS plugins over gRPC (point INFERENCE_ADDRESSES at it)')
    .option('--listen <address>', 'host:port to listen on', '0.0.0.0:50051')
    .action(async (o: { listen: string }) => {
      const config = loadConfig();
      await runInferenceCommand({
        plugins: [BUILTIN_PLUGINS, ...config.plugins],
        address: o.listen,
        log: processLogger(config),
        shutdownGraceMs: config.shutdownGraceMs,
      });
      process.exit(0);
    });

  const orgs = program.command('orgs').description('Operator commands on the database (stop a PGlite-backed server first)');
  orgs
    .command('create <name>')
    .description('Create an organization with its owner and protected admin-key')
    .requiredOption('--admin-email <email>', 'Owner of the new organization')
    .option('--admin-key <plaintext>', 'Use this admin-key plaintext instead of generating one')
    .action(createOrganization);

  clientCommand(program, 'me', 'Show the calling key, its organization and capabilities').action((o: ClientOptions) =>
    show(clientOf(o).GET('/v1/me', {})),
  );
  clientCommand(program, 'health', 'Show the health of every backing component').action((o: ClientOptions) =>
    show(clientOf(o).GET('/v1/health', {})),
  );

  const users = program.command('users').description('Users of the organization');
  clientCommand(users, 'list', 'List users').action((o: ClientOptions) => show(clientOf(o).GET('/v1/organizations/users', {})));
  clientCommand(users, 'create', 'Add a user')
    .argument('<email>')
    .option('--name <name>')
    .action((email: string, o: ClientOptions & { name?: string }) =>
      show(clientOf(o).POST('/v1/organizations/users', { body: { email, ...(o.name ? { name: o.name } : {}) } })),
    );
  clientCommand(users, 'delete', 'Remove a user and revoke their keys')
    .argument('<email>')
    .action((email: string, o: ClientOptions) =>
      show(clientOf(o).DELETE('/v1/organizations/users/{user_email}', { params: { path: { user_email: email } } })),
    );

  const keys = program.command('keys').description("API keys of a user (needs an admin key)");
  clientCommand(keys, 'list', "List a user's keys")
    .requiredOption('--user <email>')
    .option('--include-revoked')
    .action((o: ClientOptions & { user: string; includeRevoked?: boolean }) =>
      show(
        clientOf(o).GET('/v1/organizations/users/{user_email}/api-keys', {
          params: { path: { user_email: o.user }, query: { include_revoked: Boolean(o.includeRevoked) } },
        }),
      ),
    );
  clientCommand(keys, 'create', 'Create a key; prints its secret once')
    .requiredOption('--user <email>')
    .requiredOption('--name <name>')
    .option('--description <text>')
    .option('--permissions <list>', 'comma-separated: read,write,delete,admin', list)
    .option('--origins <list>', 'comma-separated allowed origins', list)
    .option('--expires-at <iso>')
    .option('--principal-id <id>', 'makes a user-scoped usr_sk_ key')
    .option('--rate-limit <perMinute>', 'requests per minute', (v) => Number(v))
    .option('--scopes <json>', 'ResourceScope[] as JSON', (v) => JSON.parse(v) as unknown)
    .action(
      (
        o: ClientOptions & {
          user: string;
          name: string;
          description?: string;
          permissions?: Array<'read' | 'write' | 'delete' | 'admin'>;
          origins?: string[];
          expiresAt?: string;
          principalId?: string;
          rateLimit?: number;
          scopes?: never;
        },
      ) =>
        show(
          clientOf(o).POST('/v1/organizations/users/{user_email}/api-keys', {
            params: { path: { user_email: o.user } },
            body: {
              name: o.name,
              ...(o.description ? { description: o.description } : {}),
              ...(o.permissions ? { permissions: o.permissions } : {}),
              ...(o.origins ? { allowed_origins: o.origins } : {}),
              ...(o.expiresAt ? { expires_at: o.expiresAt } : {}),
              ...(o.principalId ? { principal_id: o.principalId } : {}),
              ...(o.rateLimit ? { rate_limit_override: o.rateLimit } : {}),
              ...(o.scopes ? { scopes: o.scopes } : {}),
            },
          }),
        ),
    );
  clientCommand(keys, 'rotate', 'Issue a new secret; the old one stops working at once')
    .requiredOption('--user <email>')
    .requiredOption('--name <name>')
    .action((o: ClientOptions & { user: string; name: string }) =>
      show(
        clientOf(o).POST('/v1/organizations/users/{user_email}/api-keys/{key_name}/rotate', {
          params: { path: { user_email: o.user, key_name: o.name } },
        }),
      ),
    );
  clientCommand(keys, 'revoke', 'Revoke a key')
    .requiredOption('--user <email>')
    .requiredOption('--name <name>')
    .option('--force', 'revoke even if the key was used recently')
    .action((o: ClientOptions & { user: string; name: string; force?: boolean }) =>
      show(
        clientOf(o).DELETE('/v1/organizations/users/{user_email}/api-keys/{key_name}', {
          params: { path: { user_email: o.user, key_name: o.name }, query: { force: Boolean(o.force) } },
        }),
      ),
    );

  const namespaces = program.command('namespaces').description('Namespaces');
  clientCommand(namespaces, 'list', 'List namespaces').action((o: ClientOptions) => show(clientOf(o).GET('/v1/namespaces', {})));
  clientCommand(namespaces, 'create', 'Create a namespace')
    .argument('<name>')
    .option('--description <text>')
    .action((name: string, o: ClientOptions & { description?: string }) =>
      show(
        clientOf(o).POST('/v1/namespaces', {
          body: { namespace_name: name, ...(o.description ? { description: o.description } : {}) },
        }),
      ),
    );
  clientCommand(namespaces, 'delete', 'Delete a namespace')
    .argument('<name>')
    .action((name: string, o: ClientOptions) =>
      show(clientOf(o).DELETE('/v1/namespaces/{name}', { params: { path: { name } } })),
    );
  const buckets = program.command('buckets').description('Buckets of a namespace (--namespace or TESSERA_NAMESPACE)');
  clientCommand(buckets, 'list', 'List buckets').action((o: ClientOptions) =>
    show(clientOf(o).GET('/v1/buckets', { params: { header: { 'X-Namespace': o.namespace ?? '' } } })),
  );
  clientCommand(buckets, 'create', 'Create a bucket')
    .argument('<name>')
    .option('--schema <json>', 'schema as JSON, e.g. {"properties":{"title":{"type":"string"}}}', (v) => JSON.parse(v) as unknown)
    .action((name: string, o: ClientOptions & { schema?: never }) =>
      show(
        clientOf(o).POST('/v1/buckets', {
          params: { header: { 'X-Namespace': o.namespace ?? '' } },
          body: { bucket_name: name, ...(o.schema ? { schema: o.schema } : {}) },
        }),
      ),
    );
  clientCommand(program, 'objects', 'List the objects of a bucket')
    .argument('<bucket>')
    .option('--prefix <prefix>')
    .action((bucket: string, o: ClientOptions & { prefix?: string }) =>
      show(
        clientOf(o).GET('/v1/buckets/{bucket_identifier}/objects', {
          params: {
            header: { 'X-Namespace': o.namespace ?? '' },
            path: { bucket_identifier: bucket },
            query: o.prefix ? { prefix: o.prefix } : {},
          },
        }),
      ),
    );
  clientCommand(program, 'upload', 'Upload a file into a bucket (presigned PUT, streamed) and confirm it')
    .argument('<bucket>')
    .argument('<file>')
    .option('--property <name>', 'the blob property the file fills')
    .option('--object-key <key>', 'the object key (default: its id)')
    .option('--async', 'confirm in the background')
    .action(async (bucket: string, file: string, o: ClientOptions & { property?: string; objectKey?: string; async?: boolean }) => {
      const client = clientOf(o);
      const header = { 'X-Namespace': o.namespace ?? '' };
      const size = (await stat(file)).size;
      const created = await client.POST('/v1/buckets/{bucket_identifier}/uploads', {
        params: { header, path: { bucket_identifier: bucket } },
        body: {
          filename: path.basename(file),
          file_size_bytes: size,
          ...(o.property ? { property: o.property } : {}),
          ...(o.objectKey ? { key: o.objectKey } : {}),
        },
      });
      if (!created.data) return show(Promise.resolve(created));
      const put = await fetch(created.data.presigned_url!, {
        method: 'PUT',
        headers: { ...created.data.headers, 'Content-Length': String(size) },
        body: Readable.toWeb(createReadStream(file)) as unknown as ReadableStream,
        duplex: 'half',
      } as RequestInit);
      if (!put.ok) {
        process.stderr.write(`PUT ${put.status} ${await put.text()}\n`);
        process.exitCode = 1;
        return;
      }
      const etag = ((await put.json()) as { etag: string }).etag;
      await show(
        client.POST('/v1/buckets/{bucket_identifier}/uploads/{upload_id}/confirm', {
          params: { header, path: { bucket_identifier: bucket, upload_id: created.data.upload_id }, query: { async: Boolean(o.async) } },
          body: { etag, file_size_bytes: size },
        }),
      );
    });
  return program;
}

/**
 * A command that cannot start says why in one line and exits 1. StartupErrors are written for
 * operators; anything else gets its message, and its stack only with LOG_LEVEL=debug (or trace).
 */
function reportFailure(err: unknown): void {
  const debug = ['debug', 'trace'].includes((process.env.LOG_LEVEL ?? '').toLowerCase());
  if (err instanceof StartupError) {
    process.stderr.write(`tessera: ${err.message}\n`);
  } else {
    const error = err instanceof Error ? err : new Error(String(err));
    const cause = error.cause instanceof Error ? `: ${error.cause.message}` : '';
    process.stderr.write(`tessera: ${error.message}${cause}${debug ? '' : ' (LOG_LEVEL=debug shows the stack trace)'}\n`);
  }
  // The whole error with its cause chain (a StartupError wraps the driver's error).
  if (debug) process.stderr.write(`${inspect(err, { depth: 4 })}\n`);
}

try {
  await buildProgram().parseAsync(process.argv);
} catch (err) {
  reportFailure(err);
  process.exit(1);
}
