/**
 * Which server code `tessera serve` runs (kernel/cli/server-build.ts): the dist/ build when its stamp is at
 * least as new as every source file, else the sources (saying why when a build exists but is older); always
 * the sources when TESSERA_PLUGINS names plugin modules. And scripts/build.mjs writes a tree that qualifies.
 */
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { SERVER_BUILD_STAMP, serverBuildIsCurrent, serverCode } from '../../../kernel/cli/server-build.js';
import { repoRoot } from './built.js';

const project = mkdtempSync(path.join(os.tmpdir(), 'tessera-server-build-'));
const at = (seconds: number) => new Date(1_700_000_000_000 + seconds * 1000);
function file(relative: string, seconds: number): void {
  const full = path.join(project, relative);
  mkdirSync(path.dirname(full), { recursive: true });
  writeFileSync(full, '');
  utimesSync(full, at(seconds), at(seconds));
}

describe('the server code tessera serve runs', () => {
  afterAll(() => rmSync(project, { recursive: true, force: true }));

  it('runs the sources, saying nothing, before anything was built', () => {
    file('kernel/cli/server.ts', 10);
    file('plugins/resources/search-page/assets/search-page.css', 10);
    file('generated/openapi.json', 10);
    expect(serverBuildIsCurrent(project)).toBe(false);
    expect(serverCode(project, {})).toEqual({ kind: 'sources', entry: path.join(project, 'kernel/cli/server.ts'), reason: undefined });
  });

  it('runs the build once its stamp is as new as every source file', () => {
    file(SERVER_BUILD_STAMP, 10);
    expect(serverCode(project, {})).toEqual({ kind: 'build', entry: path.join(project, 'dist/kernel/cli/server.js') });
    expect(serverCode(project, { TESSERA_PLUGINS: ' ' })).toMatchObject({ kind: 'build' });
  });

  it('runs the sources when TESSERA_PLUGINS names plugins, which import the kernel from its sources', () => {
    expect(serverCode(project, { TESSERA_PLUGINS: 'plugins/models/tesseract-ocr/index.ts' })).toEqual({
      kind: 'sources',
      entry: path.join(project, 'kernel/cli/server.ts'),
    });
  });

  it('runs the sources, saying how to rebuild, once any source file (or asset) is newer than the build', () => {
    file('plugins/resources/search-page/assets/search-page.css', 11);
    expect(serverCode(project, {})).toEqual({
      kind: 'sources',
      entry: path.join(project, 'kernel/cli/server.ts'),
      reason: 'dist/ is older than the sources; running the sources (npm run build rebuilds it)',
    });
    file(SERVER_BUILD_STAMP, 12);
    file('generated/client.ts', 13);
    expect(serverBuildIsCurrent(project)).toBe(false);
  });

  it('npm run build leaves this checkout with a current build', async () => {
    await promisify(execFile)(process.execPath, [path.join(repoRoot, 'scripts/build.mjs')], { cwd: repoRoot });
    expect(serverBuildIsCurrent(repoRoot)).toBe(true);
    expect(serverCode(repoRoot, {})).toEqual({ kind: 'build', entry: path.join(repoRoot, 'dist/kernel/cli/server.js') });
  });
});
