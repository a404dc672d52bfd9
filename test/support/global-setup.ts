/**
 * Runs once per `npm test`: builds dist/ (`npm run build`: the tests that start real processes run what
 * `npm start` runs, the current code as JavaScript), and prepares a migrated PGlite data directory that
 * every test file starts from (opening a fresh PGlite and running initdb takes seconds; loading a dump
 * takes about one).
 */
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import type { TestProject } from 'vitest/node';
import { loadConfig } from '../../kernel/config.js';
import { openKernelCore } from '../../kernel/app.js';
import { DatabaseHandle } from '../../kernel/tokens.js';
import builtins from '../../plugins/index.js';
import { silentLogger } from './logs.js';

declare module 'vitest' {
  export interface ProvidedContext {
    pgliteTemplate: ArrayBuffer | null;
  }
}

export default async function setup(project: TestProject): Promise<void> {
  await promisify(execFile)(process.execPath, [fileURLToPath(new URL('../../scripts/build.mjs', import.meta.url))]);
  if (process.env.TEST_DATABASE_URL) {
    project.provide('pgliteTemplate', null);
    return;
  }
  const config = { ...loadConfig({}), databaseInMemory: true, logLevel: 'silent' };
  const core = await openKernelCore({
    config,
    plugins: builtins.map((plugin) => ({ plugin, origin: 'builtin' })),
    overrides: { logger: silentLogger() },
  });
  try {
    const dump = await core.services.get(DatabaseHandle).dump!();
    project.provide('pgliteTemplate', await dump.arrayBuffer());
  } finally {
    await core.stop();
  }
}
