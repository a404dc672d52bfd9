/**
 * `npm run bench` (or `tsx scripts/bench/http-overhead.ts [seconds] [connections]`):
 * requests/s and p50/p99 latency of an authenticated GET /v1/me through the full Tessera stack
 * (auth + OpenAPI validation + logging + request log) beside a bare express handler returning the same
 * JSON, measured in one run by autocannon in a separate process on the same machine.
 * Target: the full stack costs < 1 ms per request at p50 and keeps ≥ 60% of bare express throughput.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { createRequire } from 'node:module';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import express from 'express';
import { pino } from 'pino';
import { startKernel } from '../../kernel/app.js';
import { loadConfig } from '../../kernel/config.js';
import { createLogger } from '../../kernel/logger.js';
import builtins from '../../plugins/index.js';

const run = promisify(execFile);
const seconds = Number(process.argv[2] ?? 10);
const connections = Number(process.argv[3] ?? 10);
const tsxCli = path.join(path.dirname(createRequire(import.meta.url).resolve('tsx/package.json')), 'dist', 'cli.mjs');
const probeScript = path.join(path.dirname(new URL(import.meta.url).pathname), 'latency-probe.ts');
const autocannonBin = path.join(path.dirname(createRequire(import.meta.url).resolve('autocannon/package.json')), 'autocannon.js');

interface Figures {
  label: string;
  rps: number;
  p50: number;
  p99: number;
  errors: number;
  non2xx: number;
}

async function load(label: string, url: string, headers: Record<string, string>): Promise<Figures> {
  const args = [autocannonBin, '-j', '-c', String(connections), '-d', String(seconds)];
  for (const [k, v] of Object.entries(headers)) args.push('-H', `${k}=${v}`);
  args.push(url);
  const { stdout } = await run(process.execPath, args, { maxBuffer: 64 * 1024 * 1024 });
  const r = JSON.parse(stdout) as {
    requests: { average: number };
    latency: { p50: number; p99: number };
    errors: number;
    non2xx: number;
  };
  return { label, rps: r.requests.average, p50: r.latency.p50, p99: r.latency.p99, errors: r.errors, non2xx: r.non2xx };
}

/** Unloaded latency: one connection, sequential requests, microsecond timing, in a separate process. */
async function latency(url: string, headers: Record<string, string>): Promise<{ p50: number; p99: number }> {
  const args = [tsxCli, probeScript, url, '3000', ...Object.entries(headers).map(([k, v]) => `${k}=${v}`)];
  const { stdout } = await run(process.execPath, args);
  return JSON.parse(stdout) as { p50: number; p99: number };
}

async function main(): Promise<void> {
  const home = await mkdtemp(path.join(os.tmpdir(), 'tessera-bench-'));
  const adminKey = `svc_sk_bench_${'x'.repeat(47)}`;
  // DATABASE_URL / NATS_URL from the environment are honoured, so the same figures can be taken on PostgreSQL.
  const config = {
    ...loadConfig(process.env),
    home,
    port: 0,
    host: '127.0.0.1',
    adminKey,
    logLevel: 'info',
    planRateLimitPerMinute: 0,
  };
  // The full stack logs every request at info, as in production; to /dev/null so the terminal is not the bottleneck.
  const kernel = await startKernel({
    config,
    plugins: builtins.map((plugin) => ({ plugin, origin: 'builtin' })),
    overrides: { logger: createLogger('info', pino.destination({ dest: '/dev/null', sync: false })) },
  });
  const meUrl = `${kernel.url}/v1/me`;
  const auth = { Authorization: `Bearer ${adminKey}` };
  const sample = await (await fetch(meUrl, { headers: auth })).json();

  const bare = express();
  bare.get('/v1/me', (_req, res) => {
    res.json(sample);
  });
  const bareServer = await new Promise<import('node:http').Server>((resolve) => {
    const s = bare.listen(0, '127.0.0.1', () => resolve(s));
  });
  const bareUrl = `http://127.0.0.1:${(bareServer.address() as AddressInfo).port}/v1/me`;

  // Warm both up (JIT, key cache), then measure bare, full, bare, full and keep the better of each pair.
  const warm = seconds;
  process.stdout.write(`warming up (${Math.max(2, Math.round(warm / 3))} s each)\n`);
  await load('warm', bareUrl, auth).catch(() => undefined);
  await load('warm', meUrl, auth).catch(() => undefined);
  const results: Figures[] = [];
  for (let round = 0; round < 2; round++) {
    results.push(await load('bare express', bareUrl, auth));
    results.push(await load('tessera full stack', meUrl, auth));
  }
  const best = (label: string) => results.filter((r) => r.label === label).sort((a, b) => b.rps - a.rps)[0]!;
  const b = best('bare express');
  const f = best('tessera full stack');
  const bareLatency = await latency(bareUrl, auth);
  const fullLatency = await latency(meUrl, auth);

  process.stdout.write(
    `\nGET /v1/me on ${os.cpus().length} cores, node ${process.version}, database ${config.databaseUrl ? 'PostgreSQL' : 'PGlite (embedded)'}\n`,
  );
  process.stdout.write(`throughput: autocannon, ${connections} connections, ${seconds} s per run (best of 2)\n`);
  for (const r of [b, f]) {
    process.stdout.write(
      `  ${r.label.padEnd(20)} ${r.rps.toFixed(0).padStart(7)} req/s   p50 ${r.p50} ms  p99 ${r.p99} ms (loaded)   errors ${r.errors}  non-2xx ${r.non2xx}\n`,
    );
  }
  process.stdout.write(`unloaded latency: 1 connection, 3000 sequential requests\n`);
  process.stdout.write(`  ${'bare express'.padEnd(20)} p50 ${bareLatency.p50.toFixed(3)} ms   p99 ${bareLatency.p99.toFixed(3)} ms\n`);
  process.stdout.write(`  ${'tessera full stack'.padEnd(20)} p50 ${fullLatency.p50.toFixed(3)} ms   p99 ${fullLatency.p99.toFixed(3)} ms\n`);
  process.stdout.write(
    `\nthroughput kept: ${((f.rps / b.rps) * 100).toFixed(1)}% of bare express (target ≥ 60%)\n` +
      `p50 cost of the full stack: ${(fullLatency.p50 - bareLatency.p50).toFixed(3)} ms per request (target < 1 ms)\n` +
      `service time per request: bare ${(1000 / b.rps).toFixed(3)} ms, full ${(1000 / f.rps).toFixed(3)} ms\n`,
  );

  bareServer.close();
  await kernel.stop();
  await rm(home, { recursive: true, force: true });
}

await main();
