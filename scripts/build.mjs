#!/usr/bin/env node
/**
 * `npm run build` (also run by `npm install`'s prepare step and before every `npm start`): the service as
 * plain JavaScript in dist/, so a server starts without a TypeScript loader.
 *
 * - dist/cli.js: the CLI, bundled (what bin/tessera.js runs).
 * - dist/kernel, dist/plugins, dist/generated: every module transpiled one to one (no bundling: the
 *   threads and worker processes start from their own files beside their callers), plus the plugins'
 *   asset files. `tessera serve`, `worker` and `inference` run this tree when it is current (see
 *   kernel/cli/server-build.ts), else the TypeScript sources through tsx. Measured on this project's
 *   2-core machine, the idle API process holds ~100–150 MB less without the TypeScript loader (its hooks
 *   run in a thread of their own, which sees every module's source).
 *
 * Takes about a second. Only files whose content changed are written, each to a temporary file renamed
 * into place, so a process starting meanwhile (tests start several) never reads half a file; the stamp
 * dist/server-build.stamp, written last, dates the sources the tree was built from.
 * Without esbuild (an `npm install --omit=dev`), nothing is built and the sources run through tsx.
 */
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, utimesSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const dist = path.join(root, 'dist');
/** The folders of the service's modules; kept in step with kernel/cli/server-build.ts. */
const SOURCE_DIRS = ['kernel', 'plugins', 'generated'];
const STAMP = 'server-build.stamp';

const say = (message) => process.stderr.write(`build: ${message}\n`);

function walk(dir, out = []) {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) walk(full, out);
    else if (entry.isFile()) out.push(full);
  }
  return out;
}

/** Writes `content` to `file` unless it already holds it, through a temporary file renamed into place. */
function writeIfChanged(file, content) {
  if (existsSync(file) && readFileSync(file).equals(content)) return false;
  mkdirSync(path.dirname(file), { recursive: true });
  const temporary = `${file}.${process.pid}.tmp`;
  writeFileSync(temporary, content);
  renameSync(temporary, file);
  return true;
}

let esbuild;
try {
  esbuild = await import('esbuild');
} catch {
  say('esbuild is not installed (npm install --omit=dev?): nothing built; the TypeScript sources run through tsx');
  process.exit(0);
}

// The stamp dates the sources as they were when the build started: an edit made meanwhile leaves it stale.
const started = new Date();
const files = SOURCE_DIRS.flatMap((dir) => walk(path.join(root, dir)));
const modules = files.filter((file) => file.endsWith('.ts') && !file.endsWith('.d.ts'));
const assets = files.filter((file) => !file.endsWith('.ts'));

const [server, cli] = await Promise.all([
  esbuild.build({
    entryPoints: modules,
    outdir: dist,
    outbase: root,
    format: 'esm',
    platform: 'node',
    target: 'node20',
    sourcemap: 'linked',
    write: false,
    logLevel: 'warning',
  }),
  esbuild.build({
    entryPoints: [path.join(root, 'kernel/cli.ts')],
    bundle: true,
    packages: 'external',
    outfile: path.join(dist, 'cli.js'),
    format: 'esm',
    platform: 'node',
    target: 'node20',
    write: false,
    logLevel: 'warning',
  }),
]);

let written = 0;
for (const output of server.outputFiles) if (writeIfChanged(output.path, Buffer.from(output.contents))) written++;
// bin/tessera.js dates the bundle against the CLI's sources: an unchanged bundle is dated now all the same.
const [bundle] = cli.outputFiles;
if (writeIfChanged(bundle.path, Buffer.from(bundle.contents))) written++;
else utimesSync(bundle.path, started, started);
for (const asset of assets) if (writeIfChanged(path.join(dist, path.relative(root, asset)), readFileSync(asset))) written++;
const stamp = path.join(dist, STAMP);
writeIfChanged(stamp, Buffer.from(`${modules.length} modules, ${assets.length} assets\n`));
utimesSync(stamp, started, started);
if (written > 0 && process.env.npm_lifecycle_event !== 'start') say(`${written} files written to dist/ (${modules.length} modules)`);
