/**
 * The benchmarks' HTTP client, in a worker thread: requests are timed on another event loop than the
 * service's (which the benches start in their own process), the way a separate client would see them,
 * and the client's own work (serializing, parsing) is not charged to the service. Bodies are serialized
 * before timing starts; connections are kept alive, one per client.
 */
import { Worker } from 'node:worker_threads';

export interface LatencyRun {
  p50: number;
  p95: number;
  /** Per request, the numbers read at `pick` from each returned document. */
  found: number[][];
  /** Each request's latency (ms), in the order sent. */
  times: number[];
}

/** Runs in the worker: plain JavaScript (no TypeScript loader in worker threads). */
const WORKER = `
const { parentPort } = require('node:worker_threads');
const http = require('node:http');
const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });
function send(url, headers, body, method = 'POST') {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method, agent, headers: body === undefined ? headers : { ...headers, 'Content-Length': Buffer.byteLength(body) } }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        if (res.statusCode !== 200) reject(new Error('HTTP ' + res.statusCode + ': ' + text.slice(0, 300)));
        else resolve(text);
      });
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(body);
  });
}
function pickAll(text, path) {
  const out = JSON.parse(text);
  if (out.status && out.status !== 'completed') throw new Error('execution ' + out.status + ': ' + JSON.stringify(out.error));
  return out.documents.map((d) => path.reduce((v, k) => (v == null ? v : v[k]), d));
}
let sampling;
parentPort.on('message', async (job) => {
  try {
    if (job.kind === 'sample') {
      // GET requests one at a time, a pause between them, until 'stop-sample': latency as a light client sees it.
      const times = [];
      sampling = { stopped: false };
      const run = sampling;
      parentPort.postMessage({ ok: true, started: true });
      while (!run.stopped) {
        const t0 = performance.now();
        await send(job.url, job.headers, undefined, 'GET');
        times.push(performance.now() - t0);
        await new Promise((r) => setTimeout(r, job.intervalMs));
      }
      run.resolve({ ok: true, times });
      return;
    }
    if (job.kind === 'stop-sample') {
      const run = sampling;
      sampling = undefined;
      if (!run) throw new Error('no sampling running');
      run.resolve = (message) => parentPort.postMessage(message);
      run.stopped = true;
      return;
    }
    if (job.kind === 'poll') {
      // GET every intervalMs until the body's status is one of job.until: the last body, as text.
      for (;;) {
        const text = await send(job.url, job.headers, undefined, 'GET');
        if (job.until.includes(JSON.parse(text).status)) {
          parentPort.postMessage({ ok: true, text });
          return;
        }
        await new Promise((r) => setTimeout(r, job.intervalMs));
      }
    }
    if (job.kind === 'latencies') {
      const times = [], found = [];
      for (const body of job.bodies) {
        const t0 = performance.now();
        const text = await send(job.url, job.headers, body);
        times.push(performance.now() - t0);
        found.push(pickAll(text, job.pick));
      }
      parentPort.postMessage({ ok: true, times, found });
    } else {
      let done = 0;
      const until = performance.now() + job.seconds * 1000;
      await Promise.all(Array.from({ length: job.clients }, async (_, c) => {
        for (let i = c; performance.now() < until; i += job.clients) {
          await send(job.url, job.headers, job.bodies[i % job.bodies.length]);
          done++;
        }
      }));
      parentPort.postMessage({ ok: true, done });
    }
  } catch (err) {
    parentPort.postMessage({ ok: false, error: String(err && err.stack || err) });
  }
});
`;

const pct = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;

export class HttpLoad {
  private readonly worker = new Worker(WORKER, { eval: true });

  constructor(
    private readonly baseUrl: string,
    private readonly headers: Record<string, string>,
  ) {}

  /** One request at a time, each body once, in order. `pick` is the path of the number read from each document. */
  async latencies(route: string, bodies: readonly unknown[], pick: readonly string[]): Promise<LatencyRun> {
    const out = await this.run<{ times: number[]; found: number[][] }>({ kind: 'latencies', ...this.job(route, bodies), pick });
    const times = [...out.times].sort((a, b) => a - b);
    return { p50: pct(times, 50), p95: pct(times, 95), found: out.found.map((row) => row.map(Number)), times: out.times };
  }

  /** Requests per second with `clients` requests in flight for `seconds`, cycling through the bodies. */
  async throughput(route: string, bodies: readonly unknown[], clients: number, seconds: number): Promise<number> {
    const out = await this.run<{ done: number }>({ kind: 'throughput', ...this.job(route, bodies), clients, seconds });
    return out.done / seconds;
  }

  /**
   * Starts timing `GET route` one request at a time with `intervalMs` between them (in the worker thread,
   * so a busy service event loop delays the answers, not the client), until `stopSampling`.
   */
  async startSampling(route: string, intervalMs: number): Promise<void> {
    await this.run<{ started: true }>({ kind: 'sample', url: `${this.baseUrl}${route}`, headers: this.headers, intervalMs });
  }

  /** Stops the sampling started last; its latencies (ms), in the order taken. */
  async stopSampling(): Promise<number[]> {
    return (await this.run<{ times: number[] }>({ kind: 'stop-sample' })).times;
  }

  /**
   * `GET route` every `intervalMs` until its JSON `status` is one of `until`; the last body. Polled from the
   * worker thread, so parsing each answer is not charged to the service's event loop.
   */
  async pollUntil(route: string, until: readonly string[], intervalMs: number): Promise<Record<string, unknown>> {
    const out = await this.run<{ text: string }>({ kind: 'poll', url: `${this.baseUrl}${route}`, headers: this.headers, until, intervalMs });
    return JSON.parse(out.text) as Record<string, unknown>;
  }

  async close(): Promise<void> {
    await this.worker.terminate();
  }

  private job(route: string, bodies: readonly unknown[]) {
    return {
      url: `${this.baseUrl}${route}`,
      headers: { ...this.headers, 'Content-Type': 'application/json' },
      bodies: bodies.map((b) => JSON.stringify(b)),
    };
  }

  private run<T>(job: Record<string, unknown>): Promise<T> {
    return new Promise((resolve, reject) => {
      this.worker.once('message', (msg: { ok: boolean; error?: string } & T) => (msg.ok ? resolve(msg) : reject(new Error(msg.error))));
      this.worker.postMessage(job);
    });
  }
}
