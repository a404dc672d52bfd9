/**
 * The CLI tests run what users run: bin/tessera.js over the bundle `npm install` builds (prepare →
 * `npm run build`, scripts/build.mjs). When the bundle is missing or older than its sources (a checkout
 * whose sources changed since install), it is built first by the same script, which writes each file
 * through a temporary file renamed into place, so a test that spawns bin/tessera.js meanwhile never reads
 * half a file.
 */
import { execFile } from 'node:child_process';
import { existsSync, readdirSync, statSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';

export const repoRoot = path.resolve(__dirname, '../../..');
export const cliBin = path.join(repoRoot, 'bin/tessera.js');
export const bundle = path.join(repoRoot, 'dist/cli.js');

function sources(): string[] {
  const dir = path.join(repoRoot, 'kernel/cli');
  return [path.join(repoRoot, 'kernel/cli.ts'), path.join(repoRoot, 'generated/client.ts'), ...readdirSync(dir).map((name) => path.join(dir, name))];
}

export function bundleIsCurrent(): boolean {
  if (!existsSync(bundle)) return false;
  const built = statSync(bundle).mtimeMs;
  return sources().every((source) => statSync(source).mtimeMs <= built);
}

/** Builds dist/ (and so dist/cli.js) with `npm run build`'s script unless the bundle is current. */
export async function ensureBuiltCli(): Promise<void> {
  if (bundleIsCurrent()) return;
  await promisify(execFile)(process.execPath, [path.join(repoRoot, 'scripts/build.mjs')], { cwd: repoRoot });
}
