/**
 * Sequential requests over one keep-alive connection, timed with hrtime: an unloaded latency
 * distribution with microsecond resolution (autocannon rounds to whole milliseconds).
 * Usage: tsx scripts/bench/latency-probe.ts <url> <count> [header=value ...]; prints JSON {p50, p99, mean} in ms.
 */
import http from 'node:http';

const [url, countArg, ...headerArgs] = process.argv.slice(2);
if (!url) throw new Error('usage: latency-probe <url> <count> [header=value ...]');
const count = Number(countArg ?? 2000);
const headers = Object.fromEntries(headerArgs.map((h) => [h.slice(0, h.indexOf('=')), h.slice(h.indexOf('=') + 1)]));
const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });

function once(): Promise<number> {
  return new Promise((resolve, reject) => {
    const started = process.hrtime.bigint();
    const req = http.get(url!, { agent, headers }, (res) => {
      res.resume();
      res.on('end', () => {
        if (res.statusCode !== 200) reject(new Error(`status ${res.statusCode}`));
        else resolve(Number(process.hrtime.bigint() - started) / 1e6);
      });
    });
    req.on('error', reject);
  });
}

const samples: number[] = [];
for (let i = 0; i < count; i++) samples.push(await once());
samples.sort((a, b) => a - b);
const at = (q: number) => samples[Math.min(samples.length - 1, Math.floor(q * samples.length))]!;
process.stdout.write(JSON.stringify({ p50: at(0.5), p99: at(0.99), mean: samples.reduce((a, b) => a + b, 0) / samples.length }));
agent.destroy();
