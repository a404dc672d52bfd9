/**
 * The V8 flags of a server process (kernel/node-flags.ts) are on every command line that starts one: npm start,
 * the Procfile, the Dockerfile's entrypoint (a flag missing from one of them runs that deployment with V8's
 * default collector, silently), and processes a server starts inherit them.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { inheritedNodeFlags, SERVER_NODE_FLAGS } from '../../kernel/node-flags.js';

const root = path.resolve(import.meta.dirname, '../..');
const read = (file: string) => readFileSync(path.join(root, file), 'utf8');

describe('server node flags', () => {
  it('are a flag Node accepts on its command line', () => {
    expect(SERVER_NODE_FLAGS).toEqual(['--single-threaded-gc']);
  });

  it('npm start runs the server with them', () => {
    const start = (JSON.parse(read('package.json')) as { scripts: Record<string, string> }).scripts.start!;
    expect(start).toContain(`exec node ${SERVER_NODE_FLAGS.join(' ')} bin/tessera.js serve`);
  });

  it('every Procfile process runs with them', () => {
    const lines = read('Procfile').split('\n').filter((line) => line.trim() !== '');
    expect(lines.map((line) => line.split(':')[0])).toEqual(['api', 'worker', 'inference']);
    for (const line of lines) expect(line, line).toContain(`node ${SERVER_NODE_FLAGS.join(' ')} bin/tessera.js `);
  });

  it("the Dockerfile's entrypoint runs with them (compose.yaml's services use that image)", () => {
    const entrypoint = read('Dockerfile').split('\n').find((line) => line.startsWith('ENTRYPOINT'))!;
    expect(JSON.parse(entrypoint.slice('ENTRYPOINT'.length))).toEqual(['node', ...SERVER_NODE_FLAGS, 'bin/tessera.js']);
  });

  it('a process started by a server gets the ones its server has, and no other flag', () => {
    expect(inheritedNodeFlags(['--single-threaded-gc', '--inspect', '--import', 'tsx'])).toEqual(['--single-threaded-gc']);
    expect(inheritedNodeFlags(['--import', 'tsx'])).toEqual([]);
  });
});
