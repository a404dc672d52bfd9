/**
 * The CLI tests run what users run: bin/tessera.js over the bundle `npm install` builds (prepare →
 * build:cli). When the bundle is missing or older than its sources (a checkout whose sources changed
 * since install), it is built first, into a temporary file renamed into place, so a test that spawns
 * bin/tessera.js meanwhile never reads half a file.
 */
import { execFile } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, renameSync, statSync } from 'node:fs';
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

/** Builds dist/cli.js with package.json's build:cli command unless it is current. */
export async function ensureBuiltCli(): Promise<void> {
  if (bundleIsCurrent()) return;
  const script = (JSON.parse(readFileSync(path.join(repoRoot, 'package.json'), 'utf8')) as { scripts: Record<string, string> }).scripts['build:cli']!;
  const temporary = `${bundle}.${process.pid}.tmp`;
  const args = script.split(/\s+/).slice(1).map((arg) => (arg.startsWith('--outfile=') ? `--outfile=${temporary}` : arg));
  await promisify(execFile)(path.join(repoRoot, 'node_modules/.bin/esbuild'), args, { cwd: repoRoot });
  renameSync(temporary, bundle);
}
