/**
 * Imported first by the benches that run the service in their own process (ingest.ts, retrieval.ts,
 * execute-trace.ts): when this process lacks the V8 flags a server is started with (kernel/node-flags.ts), the
 * bench runs again in a child process that has them and exits with its status, so the figures are those of
 * the service as `npm start` runs it. BENCH_DEFAULT_GC=1 keeps V8's default collector instead (the comparison).
 */
import { spawnSync } from 'node:child_process';
import { SERVER_NODE_FLAGS } from '../../kernel/node-flags.js';

const missing = SERVER_NODE_FLAGS.filter((flag) => !process.execArgv.includes(flag));
if (missing.length > 0 && !process.env.BENCH_DEFAULT_GC) {
  const run = spawnSync(process.execPath, [...missing, ...process.execArgv, ...process.argv.slice(1)], { stdio: 'inherit' });
  process.exit(run.status ?? 1);
}
console.log(missing.length > 0 ? "garbage collection: V8's default (BENCH_DEFAULT_GC)" : `node flags as a server's: ${SERVER_NODE_FLAGS.join(' ')}`);
