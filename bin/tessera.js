#!/usr/bin/env node
// Runs dist/cli.js, the CLI bundled by esbuild (`npm install`'s `prepare` step and `npm start` run
// `npm run build`, scripts/build.mjs), so a client command starts without compiling anything. Falls back to
// the TypeScript entry through tsx (compiled at every call: seconds, not milliseconds) when the bundle is
// missing (prepare did not run) or older than the CLI's sources (they were edited since; `npm run build`
// rebuilds it). The bundle's `serve`, `worker` and `inference` run the server's JavaScript build in dist/
// when it is current (kernel/cli/server-build.ts).
import { existsSync, readdirSync, statSync } from 'node:fs';

const root = new URL('../', import.meta.url);
const bundle = new URL('dist/cli.js', root);

function bundleIsCurrent() {
  if (!existsSync(bundle)) return false;
  const built = statSync(bundle).mtimeMs;
  const sources = [new URL('kernel/cli.ts', root), new URL('generated/client.ts', root)];
  for (const name of readdirSync(new URL('kernel/cli/', root))) sources.push(new URL(`kernel/cli/${name}`, root));
  return sources.every((source) => !existsSync(source) || statSync(source).mtimeMs <= built);
}

if (bundleIsCurrent()) {
  await import(bundle.href);
} else {
  if (existsSync(bundle)) process.stderr.write('tessera: dist/cli.js is older than kernel/cli/; running the sources (npm run build rebuilds it)\n');
  const { register } = await import('tsx/esm/api');
  register();
  await import('../kernel/cli.ts');
}
