/**
 * Starting and stopping real processes, as an operator (or docker, systemd, pm2) does: `npm start`,
 * `tessera serve`, signals, a second start on one TESSERA_HOME, and startup failures.
 */
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LOCK_FILE_NAME } from '../../kernel/db/home-lock.js';
import { duplicateKeys } from '../support/json-keys.js';
import {
  allGone,
  commandOf,
  killStarted,
  listeningUrl,
  npmStart,
  processTree,
  serverEnv,
  tessera,
  type RunningProcess,
} from '../support/processes.js';

const IN_USE = /^tessera: TESSERA_HOME .+ is in use by tessera pid (\d+) \(started [^)]+\)\. Stop it first, or set TESSERA_HOME to another folder\.$/;

function jsonLines(text: string): string[] {
  return text.split('\n').filter((line) => line.trim() !== '');
}

/** What a failed start printed: exactly one line on stderr, nothing that looks like a stack trace. */
function oneLine(process: RunningProcess): string {
  const lines = jsonLines(process.stderr());
  expect(lines, process.stderr()).toHaveLength(1);
  expect(process.stderr()).not.toMatch(/^\s+at /m);
  return lines[0]!;
}

describe('one TESSERA_HOME, started and stopped as an operator does', () => {
  let home: string;
  let server: RunningProcess | undefined;
  let url: string;
  const started: number[] = [];

  beforeAll(async () => {
    home = await mkdtemp(path.join(os.tmpdir(), 'tessera-process-'));
  });
  afterAll(async () => {
    killStarted(started);
    await rm(home, { recursive: true, force: true });
  });

  it('npm start serves; stdout is JSON lines without duplicate keys, and the admin-key banner goes to the terminal only', async () => {
    server = npmStart(serverEnv(home));
    started.push(server.pid);
    url = await listeningUrl(server);

    const adminKey = (await server.waitFor(/svc_sk_\w+/)).trim();
    expect(server.stderr()).toContain('Its protected admin-key is shown this once');
    expect(existsSync(path.join(home, LOCK_FILE_NAME))).toBe(true);

    expect((await fetch(`${url}/v1/health`)).status).toBe(200);
    const refused = await fetch(`${url}/v1/namespaces/nowhere`, { headers: { Authorization: `Bearer ${adminKey}` } });
    expect(refused.status).toBe(404);
    const token = `${randomBytes(24).toString('base64url')}.${randomBytes(16).toString('base64url')}`;
    expect((await fetch(`${url}/v1/storage/blobs/${token}`)).status).toBe(401);
    await server.waitFor(/"request refused"/);
    await server.waitFor(/\/v1\/storage\/blobs\/\[redacted\]/);

    // Not a TTY: JSON lines, each an object with no key twice, none carrying a secret.
    const lines = jsonLines(server.stdout());
    expect(lines.length).toBeGreaterThan(3);
    for (const line of lines) {
      expect(() => JSON.parse(line), line).not.toThrow();
      expect(duplicateKeys(line), line).toEqual([]);
    }
    expect(server.stdout()).not.toContain(adminKey);
    expect(server.stdout()).not.toContain(token);
    expect(server.stdout()).not.toContain('Its protected admin-key');
  });

  it('a second start on the same TESSERA_HOME is refused in one line, and the first keeps serving', async () => {
    const serverPid = processTree(server!.pid).find((pid) => commandOf(pid).includes('bin/tessera.js serve'))!;
    expect(serverPid).toBeDefined();

    const second = tessera(['serve'], serverEnv(home));
    started.push(second.pid);
    expect(await second.exited).toBe(1);
    expect(oneLine(second)).toMatch(IN_USE);
    expect(IN_USE.exec(oneLine(second))![1]).toBe(String(serverPid));

    const operator = tessera(['orgs', 'create', 'acme', '--admin-email', 'owner@acme.test'], serverEnv(home));
    started.push(operator.pid);
    expect(await operator.exited).toBe(1);
    expect(oneLine(operator)).toMatch(IN_USE);

    expect((await fetch(`${url}/v1/health`)).status).toBe(200);
  });

  it('SIGTERM to npm start ends every process it started and releases the lock', async () => {
    const tree = processTree(server!.pid);
    const commands = tree.map(commandOf);
    // npm, the server (npm's shell execs it, running the build in dist/) and its inference worker.
    expect(commands.some((c) => c.includes('bin/tessera.js serve')), commands.join('\n')).toBe(true);
    expect(commands.some((c) => c.includes('worker-main')), commands.join('\n')).toBe(true);
    // npm start builds dist/ first, so the server and its workers run JavaScript, without a TypeScript loader.
    expect(commands.some((c) => c.includes('dist/kernel/inference/worker-main.js')), commands.join('\n')).toBe(true);
    expect(commands.some((c) => c.includes('tsx')), commands.join('\n')).toBe(false);

    process.kill(server!.pid, 'SIGTERM');
    await server!.exited;
    await allGone(tree);
    expect(server!.stdout()).toContain('draining in-flight requests and shutting down');
    expect(existsSync(path.join(home, LOCK_FILE_NAME))).toBe(false);
  });

  it('a TESSERA_ADMIN_KEY other than the admin-key is reported; a SIGKILLed server takes its inference workers with it', async () => {
    const other = `svc_sk_${randomBytes(24).toString('hex')}`;
    const restarted = tessera(['serve'], serverEnv(home, { TESSERA_ADMIN_KEY: other }));
    started.push(restarted.pid);
    await listeningUrl(restarted);
    const warning = jsonLines(restarted.stdout()).find((line) => line.includes('TESSERA_ADMIN_KEY is not the admin-key'));
    expect(warning).toBeDefined();
    expect(JSON.parse(warning!)).toMatchObject({ level: 40 });
    expect(restarted.stdout()).not.toContain(other);

    const tree = processTree(restarted.pid);
    expect(tree.map(commandOf).some((c) => c.includes('worker-main'))).toBe(true);
    process.kill(restarted.pid, 'SIGKILL');
    await allGone(tree);
    // Killed, it could not remove its lock: the next start finds it stale.
    expect(existsSync(path.join(home, LOCK_FILE_NAME))).toBe(true);
  });

  it('the lock a killed server left is taken over with a log line; LOG_FORMAT=pretty writes readable lines', async () => {
    const next = tessera(['serve'], serverEnv(home, { LOG_FORMAT: 'pretty', TESSERA_INFERENCE_WORKERS: '0' }));
    started.push(next.pid);
    await listeningUrl(next);
    expect(next.stdout()).toMatch(/taking over a stale lock: pid \d+ is not running/);
    const lines = jsonLines(next.stdout());
    for (const line of lines) expect(() => JSON.parse(line), line).toThrow();

    process.kill(next.pid, 'SIGTERM');
    expect(await next.exited).toBe(0);
    expect(existsSync(path.join(home, LOCK_FILE_NAME))).toBe(false);
  });
});

describe('a start that cannot succeed says why in one line and exits 1', () => {
  let home: string;
  beforeAll(async () => {
    home = await mkdtemp(path.join(os.tmpdir(), 'tessera-process-'));
  });
  afterAll(async () => {
    await rm(home, { recursive: true, force: true });
  });

  const failedStart = async (extra: Record<string, string>): Promise<string> => {
    const attempt = tessera(['serve'], serverEnv(home, { TESSERA_INFERENCE_WORKERS: '0', ...extra }));
    expect(await attempt.exited).toBe(1);
    return oneLine(attempt);
  };

  it('bad configuration values', async () => {
    expect(await failedStart({ PORT: 'abc' })).toBe('tessera: PORT must be a whole number of 0 or more, got "abc"; fix or unset PORT.');
    expect(await failedStart({ LOG_FORMAT: 'xml' })).toMatch(/^tessera: LOG_FORMAT must be json or pretty, got "xml"/);
    expect(await failedStart({ TESSERA_ADMIN_KEY: 'short' })).toMatch(/^tessera: TESSERA_ADMIN_KEY must be 24 to 200 printable characters/);
  });

  it('an unreachable database', async () => {
    expect(await failedStart({ DATABASE_URL: 'postgres://postgres@127.0.0.1:1/tessera' })).toBe(
      'tessera: cannot reach PostgreSQL at postgres://postgres@127.0.0.1:1/tessera (connection refused). Start PostgreSQL, or fix DATABASE_URL (unset it to use the embedded database).',
    );
  });

  if (process.env.TEST_DATABASE_URL) {
    it('a database that does not exist', async () => {
      const missing = new URL(process.env.TEST_DATABASE_URL!);
      missing.pathname = `/tessera_missing_${randomBytes(4).toString('hex')}`;
      const line = await failedStart({ DATABASE_URL: missing.toString() });
      expect(line).toMatch(/^tessera: database "tessera_missing_\w+" does not exist on .+\. Create it \(createdb tessera_missing_\w+\) or fix DATABASE_URL\.$/);
    });
  }

  it('unreachable NATS', async () => {
    expect(await failedStart({ NATS_URL: 'nats://127.0.0.1:1', TESSERA_DB_IN_MEMORY: '1' })).toBe(
      'tessera: cannot reach NATS at nats://127.0.0.1:1 (connection refused). Start nats-server -js, or unset NATS_URL to use the in-process bus.',
    );
  });

  it("a first start on a port in use still shows the admin-key it created, and the next start serves it", async () => {
    const firstHome = await mkdtemp(path.join(os.tmpdir(), 'tessera-first-'));
    const holder = net.createServer();
    await new Promise<void>((resolve) => holder.listen(0, '127.0.0.1', resolve));
    const { port } = holder.address() as net.AddressInfo;
    let next: RunningProcess | undefined;
    try {
      const attempt = tessera(['serve'], serverEnv(firstHome, { TESSERA_INFERENCE_WORKERS: '0', PORT: String(port) }));
      expect(await attempt.exited).toBe(1);
      // The organization is kept in the home: its key was shown before the start failed, and the failure is the last line.
      const adminKey = /svc_sk_\w+/.exec(attempt.stderr())?.[0];
      expect(adminKey, attempt.stderr()).toBeDefined();
      expect(jsonLines(attempt.stderr()).at(-1)).toBe(`tessera: port ${port} is in use on 127.0.0.1; stop what uses it, or set PORT to another port (PORT=0 picks a free one).`);
      expect(attempt.stderr()).not.toMatch(/^\s+at /m);

      next = tessera(['serve'], serverEnv(firstHome, { TESSERA_INFERENCE_WORKERS: '0' }));
      const url = await listeningUrl(next);
      expect(next.stderr()).not.toContain('Created organization');
      expect((await fetch(`${url}/v1/me`, { headers: { Authorization: `Bearer ${adminKey}` } })).status).toBe(200);
    } finally {
      holder.close();
      if (next) killStarted([next.pid]);
      await next?.exited;
      await rm(firstHome, { recursive: true, force: true });
    }
  });

  it('a port in use', async () => {
    const holder = net.createServer();
    await new Promise<void>((resolve) => holder.listen(0, '127.0.0.1', resolve));
    const { port } = holder.address() as net.AddressInfo;
    try {
      expect(await failedStart({ PORT: String(port), TESSERA_DB_IN_MEMORY: '1' })).toBe(
        `tessera: port ${port} is in use on 127.0.0.1; stop what uses it, or set PORT to another port (PORT=0 picks a free one).`,
      );
    } finally {
      holder.close();
    }
  });
});
