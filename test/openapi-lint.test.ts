/**
 * The contract is clean: Redocly's recommended rules (redocly.yaml) find nothing, and no description was
 * split by YAML into junk keys (a plain scalar with ", " inside a flow mapping becomes extra null keys).
 */
import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { isScalar, parseDocument, visit } from 'yaml';
import { describe, expect, it } from 'vitest';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const DOCUMENT = 'openapi/openapi.yaml';

/** Keys whose value may legitimately be null in an OpenAPI document. */
const NULL_ALLOWED = new Set(['default', 'const', 'example']);

describe('openapi/openapi.yaml', () => {
  it('passes `redocly lint` with the committed config, offline', async () => {
    const run = promisify(execFile)(process.execPath, [path.join(root, 'node_modules/@redocly/cli/bin/cli.js'), 'lint', DOCUMENT, '--format=stylish'], {
      cwd: root,
      // No telemetry and no update check: the lint must not reach the network.
      env: { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true', NO_COLOR: '1' },
    });
    const outcome = await run.then(
      () => ({ failed: false, output: '' }),
      (err: { stdout?: string; stderr?: string }) => ({ failed: true, output: `${err.stdout ?? ''}${err.stderr ?? ''}` }),
    );
    expect(outcome.failed, outcome.output).toBe(false);
  }, 60_000);

  it('has no key without a value (a description split at a comma)', async () => {
    const text = await readFile(path.join(root, DOCUMENT), 'utf8');
    const doc = parseDocument(text);
    expect(doc.errors).toEqual([]);
    const junk: string[] = [];
    visit(doc, {
      Pair(_, pair) {
        const key = isScalar(pair.key) ? String(pair.key.value) : String(pair.key);
        const empty = pair.value === null || (isScalar(pair.value) && pair.value.value === null);
        if (!empty || NULL_ALLOWED.has(key)) return;
        const offset = isScalar(pair.key) ? (pair.key.range?.[0] ?? 0) : 0;
        junk.push(`line ${text.slice(0, offset).split('\n').length}: ${JSON.stringify(key)}`);
      },
    });
    expect(junk).toEqual([]);
  });
});
