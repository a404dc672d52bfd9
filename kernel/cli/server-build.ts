/**
 * Which code `tessera serve`, `worker` and `inference` run: the JavaScript tree `npm run build` writes to
 * dist/ (scripts/build.mjs) when it is current, else the TypeScript sources through tsx. The tree is
 * current when its stamp is at least as new as every file under kernel/, plugins/ and generated/.
 * TESSERA_PLUGINS also means the sources: a plugin module loaded from the sources imports the kernel's
 * sources (its errors, its helpers), which must be the very modules the server runs.
 */
import { existsSync, readdirSync, statSync } from 'node:fs';
import path from 'node:path';

const SOURCE_DIRS = ['kernel', 'plugins', 'generated'];
export const SERVER_BUILD_STAMP = 'dist/server-build.stamp';

function newestBelow(dir: string, since: number): boolean {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory() ? newestBelow(full, since) : statSync(full).mtimeMs > since) return true;
  }
  return false;
}

/** Whether dist/ holds a build of the current sources of the project at `root`. */
export function serverBuildIsCurrent(root: string): boolean {
  const stamp = path.join(root, SERVER_BUILD_STAMP);
  if (!existsSync(stamp)) return false;
  const built = statSync(stamp).mtimeMs;
  return !SOURCE_DIRS.some((dir) => existsSync(path.join(root, dir)) && newestBelow(path.join(root, dir), built));
}

export type ServerCode = { kind: 'build'; entry: string } | { kind: 'sources'; entry: string; reason?: string };

/** The server module to run for the project at `root`, and why the sources when it is them. */
export function serverCode(root: string, env: NodeJS.ProcessEnv): ServerCode {
  const sources = path.join(root, 'kernel', 'cli', 'server.ts');
  if ((env.TESSERA_PLUGINS ?? '').trim() !== '') return { kind: 'sources', entry: sources };
  if (!serverBuildIsCurrent(root)) {
    const reason = existsSync(path.join(root, SERVER_BUILD_STAMP))
      ? 'dist/ is older than the sources; running the sources (npm run build rebuilds it)'
      : undefined;
    return { kind: 'sources', entry: sources, reason };
  }
  return { kind: 'build', entry: path.join(root, 'dist', 'kernel', 'cli', 'server.js') };
}
