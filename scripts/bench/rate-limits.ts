/**
 * `DATABASE_URL=postgres://... tsx scripts/bench/rate-limits.ts`: what a rate limit costs a request.
 * 1. The limiter alone: consume() per call for the in-process limiter and the shared one (counters in
 *    PostgreSQL, claimed in slices), with the round trips the shared one made; and one claim (a round trip).
 * 2. Through HTTP: unloaded p50 of GET /v1/me with a key that has a rate_limit_override beside the
 *    admin key (no limit), on PGlite (in-process limiter) and on PostgreSQL (shared limiter).
 * A throwaway database is created next to the one DATABASE_URL names, and dropped at the end.
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { pino } from 'pino';
import { startKernel, type Kernel } from '../../kernel/app.js';
import { InProcessRateLimiter, type RateLimiter } from '../../kernel/auth/rate-limiter.js';
import { SharedRateLimiter } from '../../kernel/auth/shared-rate-limiter.js';
import { systemClock } from '../../kernel/clock.js';
import { loadConfig } from '../../kernel/config.js';
import { createLogger } from '../../kernel/logger.js';
import { DatabaseHandle, RateLimiter as RateLimiterToken } from '../../kernel/tokens.js';
import builtins from '../../plugins/index.js';

const run = promisify(execFile);
const tsxCli = path.join(path.dirname(createRequire(import.meta.url).resolve('tsx/package.json')), 'dist', 'cli.mjs');
const probeScript = path.join(path.dirname(new URL(import.meta.url).pathname), 'latency-probe.ts');
const baseUrl = process.env.DATABASE_URL ?? process.env.TEST_DATABASE_URL;
if (!baseUrl) throw new Error('set DATABASE_URL (a PostgreSQL the bench may create a throwaway database in)');

async function throwawayDatabase(): Promise<{ url: string; drop: () => Promise<void> }> {
  const name = `tessera_bench_${randomBytes(5).toString('hex')}`;
  const admin = async (sql: string) => {
    const c = new pg.Client({ connectionString: baseUrl });
    await c.connect();
    await c.query(sql);
    await c.end();
  };
  await admin(`create database ${name}`);
  const url = new URL(baseUrl!);
  url.pathname = `/${name}`;
  return { url: url.toString(), drop: () => admin(`drop database if exists ${name} with (force)`) };
}

async function startBenchKernel(databaseUrl: string | undefined): Promise<{ kernel: Kernel; adminKey: string; stop: () => Promise<void> }> {
  const home = await mkdtemp(path.join(os.tmpdir(), 'tessera-bench-'));
  const adminKey = `svc_sk_bench_${randomBytes(24).toString('hex')}`;
  const config = {
    ...loadConfig({}),
    home,
    port: 0,
    host: '127.0.0.1',
    adminKey,
    databaseUrl,
    databaseInMemory: !databaseUrl,
    logLevel: 'info',
    planRateLimitPerMinute: 0,
  };
  const kernel = await startKernel({
    config,
    plugins: builtins.map((plugin) => ({ plugin, origin: 'builtin' })),
    overrides: { logger: createLogger('info', pino.destination({ dest: '/dev/null', sync: false })) },
  });
  return {
    kernel,
    adminKey,
    stop: async () => {
      await kernel.stop();
      await rm(home, { recursive: true, force: true });
    },
  };
}

/** Mean wall time of `times` sequential consume() calls, in microseconds. */
async function perCall(times: number, call: (i: number) => Promise<unknown>): Promise<number> {
  for (let i = 0; i < Math.min(1_000, times); i++) await call(i);
  const started = process.hrtime.bigint();
  for (let i = 0; i < times; i++) await call(i);
  return Number(process.hrtime.bigint() - started) / 1e3 / times;
}

async function micro(shared: SharedRateLimiter): Promise<void> {
  const local: RateLimiter = new InProcessRateLimiter(systemClock);
  const line = (label: string, us: number, extra = '') => process.stdout.write(`  ${label.padEnd(52)} ${us.toFixed(3).padStart(8)} µs/call ${extra}\n`);
  process.stdout.write('\nthe limiter alone (sequential awaits, one subject unless said otherwise)\n');
  line('in-process, limit 1e9/min', await perCall(200_000, () => local.consume('bench:local', 1e9)));
  for (const limit of [6_000, 60_000]) {
    const subject = `bench:sliced:${limit}:${randomBytes(4).toString('hex')}`;
    const calls = Math.floor(limit * 0.9) - 1_000;
    const before = shared.claims;
    const us = await perCall(calls, () => shared.consume(subject, limit));
    line(`shared, limit ${limit}/min (slices of ${limit / 50})`, us, `(${shared.claims - before} round trips for ${calls + 1_000} requests)`);
  }
  const full = `bench:full:${randomBytes(4).toString('hex')}`;
  for (let i = 0; i < 5; i++) await shared.consume(full, 5);
  line('shared, refusal once the window is full', await perCall(100_000, () => shared.consume(full, 5)));
  const exact = `bench:exact:${randomBytes(4).toString('hex')}`;
  line('shared, one claim (limit < 100: exact, per allowed request)', await perCall(3_000, (i) => shared.consume(`${exact}:${i}`, 50)));
}

async function probe(url: string, key: string): Promise<{ p50: number; p99: number }> {
  const { stdout } = await run(process.execPath, [tsxCli, probeScript, url, '3000', `authorization=Bearer ${key}`]);
  return JSON.parse(stdout) as { p50: number; p99: number };
}

async function http(label: string, databaseUrl: string | undefined): Promise<void> {
  const { kernel, adminKey, stop } = await startBenchKernel(databaseUrl);
  try {
    const limiter = kernel.services.get(RateLimiterToken).constructor.name;
    const created = await fetch(`${kernel.url}/v1/organizations/users/${kernel.config.adminEmail}/api-keys`, {
      method: 'POST',
      headers: { authorization: `Bearer ${adminKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'limited', rate_limit_override: 1_000_000 }),
    });
    const limited = ((await created.json()) as { key: string }).key;
    const url = `${kernel.url}/v1/me`;
    // Warm up (JIT, key cache), then alternate and keep the better of two.
    await probe(url, adminKey);
    await probe(url, limited);
    const none = [await probe(url, adminKey), await probe(url, adminKey)].sort((a, b) => a.p50 - b.p50)[0]!;
    const withLimit = [await probe(url, limited), await probe(url, limited)].sort((a, b) => a.p50 - b.p50)[0]!;
    process.stdout.write(
      `  ${label} (${limiter}): no limit p50 ${none.p50.toFixed(3)} ms p99 ${none.p99.toFixed(3)} ms; ` +
        `rate_limit_override 1e6/min p50 ${withLimit.p50.toFixed(3)} ms p99 ${withLimit.p99.toFixed(3)} ms; ` +
        `cost ${(withLimit.p50 - none.p50).toFixed(3)} ms at p50\n`,
    );
  } finally {
    await stop();
  }
}

async function main(): Promise<void> {
  process.stdout.write(`rate limits on ${os.cpus().length} cores, node ${process.version}\n`);
  const forMicro = await throwawayDatabase();
  try {
    const { kernel, stop } = await startBenchKernel(forMicro.url);
    try {
      await micro(new SharedRateLimiter(kernel.services.get(DatabaseHandle).db, systemClock));
    } finally {
      await stop();
    }
  } finally {
    await forMicro.drop();
  }
  process.stdout.write('\nGET /v1/me, 1 connection, 3000 sequential requests (best of 2)\n');
  await http('PGlite    ', undefined);
  const forHttp = await throwawayDatabase();
  try {
    await http('PostgreSQL', forHttp.url);
  } finally {
    await forHttp.drop();
  }
}

await main();
