import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestKernel, type TestKernel } from '../support/kernel.js';
import { ensureBuiltCli } from './cli/built.js';

const run = promisify(execFile);
const cli = path.resolve(__dirname, '../../bin/tessera.js');

describe('the tessera CLI', () => {
  let t: TestKernel;
  beforeAll(async () => {
    await ensureBuiltCli();
    t = await startTestKernel();
  });
  afterAll(async () => {
    await t.stop();
  });

  const tessera = (args: string[], env: Record<string, string> = {}) =>
    run(process.execPath, [cli, ...args], {
      env: { ...process.env, TESSERA_URL: t.url, TESSERA_API_KEY: t.adminKey, ...env },
    });

  it('manages users and keys through the generated client', async () => {
    await tessera(['users', 'create', 'cli@example.test', '--name', 'CLI']);
    const created = JSON.parse((await tessera(['keys', 'create', '--user', 'cli@example.test', '--name', 'ci', '--permissions', 'read', '--json'])).stdout);
    expect(created.key).toMatch(/^svc_sk_/);
    expect(created.permissions).toEqual(['read']);

    const me = JSON.parse((await tessera(['me', '--json'], { TESSERA_API_KEY: created.key })).stdout);
    expect(me.key.name).toBe('ci');

    const rotated = JSON.parse((await tessera(['keys', 'rotate', '--user', 'cli@example.test', '--name', 'ci', '--json'])).stdout);
    expect(rotated.key).not.toBe(created.key);
    await expect(tessera(['me'], { TESSERA_API_KEY: created.key })).rejects.toMatchObject({ code: 1 });

    const listed = JSON.parse((await tessera(['keys', 'list', '--user', 'cli@example.test', '--json'])).stdout);
    expect(listed.total).toBe(1);
  });

  it('uploads a file into a bucket through a presigned URL and confirms it', async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'tessera-cli-upload-'));
    const file = path.join(dir, 'report.txt');
    await writeFile(file, 'quarterly numbers\n');
    await tessera(['namespaces', 'create', 'cli_ns']);
    await tessera(['buckets', 'create', 'docs', '--namespace', 'cli_ns']);
    const confirmed = JSON.parse((await tessera(['upload', 'docs', file, '--namespace', 'cli_ns', '--object-key', 'reports/q1', '--json'])).stdout);
    expect(confirmed).toMatchObject({ status: 'COMPLETED', file_size_bytes: 18 });
    const objects = JSON.parse((await tessera(['objects', 'docs', '--namespace', 'cli_ns', '--prefix', 'reports/', '--json'])).stdout);
    expect(objects.results.map((o: { key: string }) => o.key)).toEqual(['reports/q1']);
    await rm(dir, { recursive: true, force: true });
  });

  it('reports an error body and exits non-zero on a refused call', async () => {
    const failure = await tessera(['keys', 'list', '--user', 'nobody@example.test']).catch((err: { code: number; stderr: string }) => err);
    expect(failure).toMatchObject({ code: 1 });
    expect((failure as { stderr: string }).stderr).toContain('404');
  });
});

describe('tessera orgs create', () => {
  let home: string;
  beforeAll(async () => {
    home = await mkdtemp(path.join(os.tmpdir(), 'tessera-cli-'));
  });
  afterAll(async () => {
    await rm(home, { recursive: true, force: true });
  });

  it('creates an organization with its owner and protected admin-key, directly in the database', async () => {
    // Logs at info (the migrations it runs) go to stderr: stdout is the command's result alone.
    const env = { ...process.env, TESSERA_HOME: home, LOG_LEVEL: 'info', LOG_FORMAT: 'json' };
    const { stdout, stderr } = await run(process.execPath, [cli, 'orgs', 'create', 'acme', '--admin-email', 'owner@acme.test'], { env });
    expect(stderr).toContain('database migrated');
    const created = JSON.parse(stdout);
    expect(created).toMatchObject({ name: 'acme', owner_email: 'owner@acme.test' });
    expect(created.organization_id).toMatch(/^org_/);
    expect(created.admin_key).toMatch(/^svc_sk_/);
  });
});
