/**
 * The `tessera` program. Client commands (everything that talks to a running server) are plain modules
 * over the generated client and start fast; the commands that run the service (`serve`, `worker`,
 * `inference`, `orgs create`) live in server.ts and are loaded only when one of them runs.
 */
import { inspect } from 'node:util';
import { fileURLToPath, pathToFileURL } from 'node:url';
import path from 'node:path';
import { Command } from 'commander';
import { registerAccount } from './account.js';
import { registerBatches } from './batches.js';
import { registerBuckets } from './buckets.js';
import { registerCollections } from './collections.js';
import { registerDocuments } from './documents.js';
import { CliError } from './errors.js';
import { registerExtractors } from './extractors.js';
import { registerIngest } from './ingest.js';
import { registerRetrievers } from './retrievers.js';
import { serverCode } from './server-build.js';

type ServerCommands = typeof import('./server.js');

/**
 * server.ts, loaded on demand. From TypeScript sources (tsx, vitest) or the dist/ tree it sits beside this
 * file. From the esbuild bundle (dist/cli.js) it is dist/kernel/cli/server.js when that build is current,
 * else the TypeScript sources through tsx (./server-build.ts), so the bundle itself never holds (or loads)
 * the kernel, plugins or native modules. The specifiers are computed so esbuild leaves them out of the bundle.
 */
async function serverCommands(): Promise<ServerCommands> {
  const here = fileURLToPath(import.meta.url);
  const bundled = path.basename(here) === 'cli.js' && path.basename(path.dirname(here)) === 'dist';
  let target: string;
  if (bundled) {
    const code = serverCode(path.join(path.dirname(here), '..'), process.env);
    if (code.kind === 'sources') {
      if (code.reason) process.stderr.write(`tessera: ${code.reason}\n`);
      const tsx = 'tsx/esm/api';
      const { register } = (await import(tsx)) as { register: () => void };
      register();
    }
    target = code.entry;
  } else {
    target = path.join(path.dirname(here), `server${path.extname(here)}`);
  }
  return (await import(pathToFileURL(target).href)) as ServerCommands;
}

export function buildProgram(): Command {
  const program = new Command('tessera')
    .description('Tessera: multimodal data processing and retrieval')
    .showHelpAfterError('(add --help for usage)');

  program
    .command('serve')
    .description('Run the API with its embedded defaults (what npm start runs)')
    .action(async () => (await serverCommands()).serveCommand());

  program
    .command('worker')
    .description('Run background tasks (batch processing) without the API; needs DATABASE_URL (and NATS_URL to use the JetStream work queue)')
    .action(async () => (await serverCommands()).workerCommand());

  program
    .command('inference')
    .description('Serve the models of the built-in and TESSERA_PLUGINS plugins over gRPC (point INFERENCE_ADDRESSES at it)')
    .option('--listen <address>', 'host:port to listen on', '0.0.0.0:50051')
    .action(async (o: { listen: string }) => (await serverCommands()).inferenceCommand(o));

  const orgs = program.command('orgs').description('Operator commands on the database (stop a PGlite-backed server first)');
  orgs
    .command('create <name>')
    .description('Create an organization with its owner and protected admin-key')
    .requiredOption('--admin-email <email>', 'Owner of the new organization')
    .option('--admin-key <plaintext>', 'Use this admin-key plaintext instead of generating one')
    .action(async (name: string, o: { adminEmail: string; adminKey?: string }) => (await serverCommands()).createOrganization(name, o));

  registerAccount(program);
  registerBuckets(program);
  registerCollections(program);
  registerExtractors(program);
  registerBatches(program);
  registerDocuments(program);
  registerRetrievers(program);
  registerIngest(program);
  return program;
}

/**
 * A command that fails says why in one line and exits 1: a CliError with its next step, a StartupError
 * (written for operators) as it is; anything else gets its message, and its stack only with
 * LOG_LEVEL=debug (or trace).
 */
function reportFailure(err: unknown, json: boolean): void {
  const debug = ['debug', 'trace'].includes((process.env.LOG_LEVEL ?? '').toLowerCase());
  if (err instanceof CliError) {
    process.stderr.write(`tessera: ${err.message}\n${err.hint ? `  ${err.hint}\n` : ''}`);
    if (json && err.body !== undefined) process.stderr.write(`${JSON.stringify(err.body, null, 2)}\n`);
  } else if (err instanceof Error && err.name === 'StartupError') {
    // By name: server.ts (run through tsx) has its own copy of the class.
    process.stderr.write(`tessera: ${err.message}\n`);
  } else {
    const error = err instanceof Error ? err : new Error(String(err));
    const cause = error.cause instanceof Error ? `: ${error.cause.message}` : '';
    process.stderr.write(`tessera: ${error.message}${cause}${debug ? '' : ' (LOG_LEVEL=debug shows the stack trace)'}\n`);
  }
  // The whole error with its cause chain (a StartupError wraps the driver's error).
  if (debug) process.stderr.write(`${inspect(err, { depth: 4 })}\n`);
}

export async function main(argv: string[]): Promise<void> {
  try {
    await buildProgram().parseAsync(argv);
  } catch (err) {
    reportFailure(err, argv.includes('--json'));
    process.exit(1);
  }
}
