/**
 * `tsx scripts/bench/auth-refusals.ts [seconds] [connections]`: what refusing bad keys costs, beside
 * an authenticated GET /v1/me, in one run (autocannon in a separate process, as http-overhead.ts):
 * - a valid key (cached after its first use);
 * - a fresh random key on every request (never cached: one database lookup each, the worst case);
 * - one unknown key repeated (remembered as unknown after its first lookup);
 * - fresh random keys with the per-address limit on (after the limit: 429, no lookup).
 * The database lookups each case made are counted from the key store.
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { pino } from 'pino';
import { startKernel, type Kernel } from '../../kernel/app.js';
import { loadConfig, type Config } from '../../kernel/config.js';
import { createLogger } from '../../kernel/logger.js';
import { KeyStore } from '../../kernel/tokens.js';
import builtins from '../../plugins/index.js';

const run = promisify(execFile);
const tsxCli = path.join(path.dirname(createRequire(import.meta.url).resolve('tsx/package.json')), 'dist', 'cli.mjs');
const self = new URL(import.meta.url).pathname;

type Mode = 'valid' | 'random' | 'repeated';

interface Figures {
  rps: number;
  p50: number;
  p99: number;
  statuses: Record<string, number>;
}

/** Child process: autocannon with a fresh Authorization header per request where the mode asks for it. */
async function loadChild(url: string, mode: Mode, key: string, seconds: number, connections: number): Promise<void> {
  const { default: autocannon } = await import('autocannon');
  const header = (value: string) => ({ authorization: `Bearer ${value}` });
  const result = await autocannon({
    url,
    connections,
    duration: seconds,
    requests: [
      {
        method: 'GET',
        setupRequest: (request) => ({
          ...request,
          headers: { ...request.headers, ...header(mode === 'random' ? `svc_sk_${randomBytes(26).toString('hex')}` : key) },
        }),
      },
    ],
  });
  const statuses: Record<string, number> = {};
  for (const [code, count] of Object.entries(result.statusCodeStats ?? {})) statuses[code] = (count as { count: number }).count;
  const figures: Figures = { rps: result.requests.average, p50: result.latency.p50, p99: result.latency.p99, statuses };
  process.stdout.write(JSON.stringify(figures));
}

async function load(url: string, mode: Mode, key: string, seconds: number, connections: number): Promise<Figures> {
  const { stdout } = await run(process.execPath, [tsxCli, self, '--load', url, mode, key, String(seconds), String(connections)], {
    maxBuffer: 16 * 1024 * 1024,
  });
  return JSON.parse(stdout) as Figures;
}

async function startBenchKernel(home: string, adminKey: string, perAddressLimit: number): Promise<Kernel> {
  const config: Config = {
    ...loadConfig(process.env),
    home,
    port: 0,
    host: '127.0.0.1',
    adminKey,
    logLevel: 'info',
    planRateLimitPerMinute: 0,
    unauthenticatedRateLimitPerMinute: perAddressLimit,
  };
  return startKernel({
    config,
    plugins: builtins.map((plugin) => ({ plugin, origin: 'builtin' })),
    overrides: { logger: createLogger('info', pino.destination({ dest: '/dev/null', sync: false })) },
  });
}

async function main(seconds: number, connections: number): Promise<void> {
  const rows: Array<{ label: string; figures: Figures; lookups: number }> = [];
  const measure = async (kernel: Kernel, label: string, mode: Mode, key: string) => {
    const keys = kernel.services.get(KeyStore);
    const before = keys.lookups;
    const figures = await load(`${kernel.url}/v1/me`, mode, key, seconds, connections);
    rows.push({ label, figures, lookups: keys.lookups - before });
  };

  const home = await mkdtemp(path.join(os.tmpdir(), 'tessera-bench-'));
  const adminKey = `svc_sk_bench_${'x'.repeat(47)}`;
  const unknownKey = `svc_sk_${randomBytes(26).toString('hex')}`;
  try {
    const open = await startBenchKernel(home, adminKey, 0);
    await load(`${open.url}/v1/me`, 'valid', adminKey, Math.max(1, Math.round(seconds / 3)), connections); // warm-up
    await measure(open, 'valid key', 'valid', adminKey);
    await measure(open, 'random invalid keys', 'random', '');
    await measure(open, 'one unknown key repeated', 'repeated', unknownKey);
    await open.stop();
    // A new kernel on the same data: the per-address limit at its default.
    const limited = await startBenchKernel(home, adminKey, loadConfig({}).unauthenticatedRateLimitPerMinute);
    await measure(limited, 'random keys, limit on', 'random', '');
    await limited.stop();
  } finally {
    await rm(home, { recursive: true, force: true });
  }

  const database = process.env.DATABASE_URL ? 'PostgreSQL' : 'PGlite (embedded)';
  process.stdout.write(`\nGET /v1/me on ${os.cpus().length} cores, node ${process.version}, database ${database}\n`);
  process.stdout.write(`autocannon, ${connections} connections, ${seconds} s per case\n`);
  for (const { label, figures, lookups } of rows) {
    const statuses = Object.entries(figures.statuses).map(([code, count]) => `${code}×${count}`).join(' ');
    process.stdout.write(
      `  ${label.padEnd(26)} ${figures.rps.toFixed(0).padStart(7)} req/s   p50 ${figures.p50} ms  p99 ${figures.p99} ms   db lookups ${String(lookups).padStart(7)}   ${statuses}\n`,
    );
  }
}

if (process.argv[2] === '--load') {
  const [, , , url, mode, key, seconds, connections] = process.argv;
  await loadChild(url!, mode as Mode, key ?? '', Number(seconds), Number(connections));
} else {
  await main(Number(process.argv[2] ?? 5), Number(process.argv[3] ?? 10));
}
