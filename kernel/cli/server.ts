/**
 * The commands that run the service or work on its database directly: `serve`, `worker`, `inference`,
 * `orgs create`. Loaded only when one of them runs (see index.ts): they bring the whole kernel, its plugins
 * and native modules with them, which client commands never need.
 */
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { pino } from 'pino';
import { loadConfig, type Config } from '../config.js';
import { openKernelCore, startKernel, startWorker } from '../app.js';
import { importPluginModules } from '../plugins.js';
import type { NewOrganization } from '../auth/tenants.js';
import { Announcer, TenantStore } from '../tokens.js';
import { runInferenceCommand } from '../inference/index.js';
import { createLogger, resolveLogFormat, type Logger } from '../logger.js';
import { StartupError } from '../startup-errors.js';

// plugins/index.ts beside kernel/ (or plugins/index.js beside a built dist/kernel/).
const BUILTIN_PLUGINS = fileURLToPath(new URL(`../../plugins/index${path.extname(fileURLToPath(import.meta.url))}`, import.meta.url));

/** Built-ins first, then TESSERA_PLUGINS, each checked against its contract. */
function loadPlugins(extra: readonly string[]): Promise<Array<{ plugin: unknown; origin: string }>> {
  return importPluginModules([BUILTIN_PLUGINS, ...extra], process.cwd());
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

export async function serveCommand(): Promise<void> {
  const config = loadConfig();
  const log = processLogger(config);
  const signals = stopOnSignals(log, 'draining in-flight requests and shutting down');
  const showBootstrap = ({ organization, owner, adminKeyPlaintext }: NewOrganization) => {
    const shown = config.adminKey ? '(the value of TESSERA_ADMIN_KEY)' : adminKeyPlaintext;
    toOperator(
      config,
      `\nCreated organization '${organization.name}' (${organization.organization_id}) with owner ${owner.email}.\n` +
        `Its protected admin-key is shown this once; store it now:\n\n  ${shown}\n\n`,
    );
  };
  const kernel = await startKernel({
    config,
    plugins: await loadPlugins(config.plugins),
    inferencePlugins: [BUILTIN_PLUGINS, ...config.plugins],
    taskThreadPlugins: [BUILTIN_PLUGINS, ...config.plugins],
    // A kept database keeps the organization even if this start then fails: its key is shown at once. An
    // in-memory one dies with a failed start, so its key is shown once the service is up.
    ...(config.databaseInMemory ? {} : { onBootstrap: showBootstrap }),
    overrides: { logger: log },
  });
  signals.ready(() => kernel.stop());
  if (kernel.bootstrap && config.databaseInMemory) showBootstrap(kernel.bootstrap);
  // Logged as warnings too; a JSON log stream is not where a person at the terminal looks.
  if (resolveLogFormat(config.logFormat) === 'json' && process.stderr.isTTY) {
    for (const warning of kernel.warnings) process.stderr.write(`warning: ${warning}\n`);
  }
  const host = config.host === '0.0.0.0' ? 'localhost' : config.host;
  log.info({ port: kernel.port }, `Tessera listening on http://${host}:${kernel.port}`);
}

export async function workerCommand(): Promise<void> {
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

export async function createOrganization(name: string, options: { adminEmail: string; adminKey?: string }): Promise<void> {
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
    // Announced, never thrown: the organization exists now, and its admin key is printed only below.
    await core.services.get(Announcer).announce({
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


export async function inferenceCommand(options: { listen: string }): Promise<void> {
  const config = loadConfig();
  await runInferenceCommand({
    plugins: [BUILTIN_PLUGINS, ...config.plugins],
    address: options.listen,
    log: processLogger(config),
    shutdownGraceMs: config.shutdownGraceMs,
  });
  process.exit(0);
}

function print(value: unknown): void {
  process.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
}
