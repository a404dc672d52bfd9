/**
 * The benchmarks' HTTP client, in a worker thread: requests are timed on another event loop than the
 * service's (which the benches start in their own process), the way a separate client would see them,
 * and the client's own work (serializing, parsing) is not charged to the service. Each request's bytes are
 * built before timing starts; connections are kept alive, one per client, with a minimal HTTP/1.1 client
 * (the same two cores run the service: the lighter the client, the more of them the service gets).
 */
import { Worker } from 'node:worker_threads';
import { nameThread } from './thread-cpu.js';

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
const net = require('node:net');
// First message: this thread's Linux id, so CPU-by-thread listings can name it.
let tid;
try {
  tid = require('node:fs').readlinkSync('/proc/thread-self').split('/').pop();
} catch {}
parentPort.postMessage({ tid });
// A minimal HTTP/1.1 keep-alive client over one socket: the request's bytes are built once, the response
// is read by its Content-Length (or chunks). Node's http client spent ~0.3 ms of CPU per request here, on
// the same two cores as the service it measures; this one a fraction of that (what wrk-style clients do).
class Connection {
  constructor(url) {
    const u = new URL(url);
    this.host = u.hostname;
    this.port = Number(u.port || 80);
    this.socket = undefined;
    this.waiting = undefined;
    this.received = [];
  }
  open() {
    return new Promise((resolve, reject) => {
      const socket = net.connect({ host: this.host, port: this.port });
      socket.setNoDelay(true);
      socket.once('connect', () => { socket.removeListener('error', reject); resolve(); });
      socket.once('error', reject);
      socket.on('data', (chunk) => { this.received.push(chunk); this.parse(); });
      socket.on('error', (err) => this.fail(err));
      socket.on('close', () => { this.socket = undefined; this.fail(new Error('connection closed by the server')); });
      this.socket = socket;
    });
  }
  fail(err) {
    const waiting = this.waiting;
    this.waiting = undefined;
    this.received = [];
    if (waiting) waiting.reject(err);
  }
  parse() {
    if (!this.waiting) return;
    const data = this.received.length === 1 ? this.received[0] : Buffer.concat(this.received);
    this.received = [data];
    const end = data.indexOf('\\r\\n\\r\\n');
    if (end < 0) return;
    const head = data.toString('latin1', 0, end).split('\\r\\n');
    const status = Number(head[0].split(' ')[1]);
    let length = -1, chunked = false, close = false;
    for (let i = 1; i < head.length; i++) {
      const colon = head[i].indexOf(':');
      const name = head[i].slice(0, colon).trim().toLowerCase();
      const value = head[i].slice(colon + 1).trim().toLowerCase();
      if (name === 'content-length') length = Number(value);
      else if (name === 'transfer-encoding') chunked = value.includes('chunked');
      else if (name === 'connection') close = value === 'close';
    }
    let body, used;
    if (chunked) {
      const parts = [];
      let at = end + 4;
      for (;;) {
        const lineEnd = data.indexOf('\\r\\n', at);
        if (lineEnd < 0) return;
        const size = parseInt(data.toString('latin1', at, lineEnd), 16);
        if (data.length < lineEnd + 2 + size + 2) return;
        if (size === 0) { used = lineEnd + 4; break; }
        parts.push(data.subarray(lineEnd + 2, lineEnd + 2 + size));
        at = lineEnd + 2 + size + 2;
      }
      body = Buffer.concat(parts);
    } else {
      if (length < 0) length = 0;
      if (data.length < end + 4 + length) return;
      body = data.subarray(end + 4, end + 4 + length);
      used = end + 4 + length;
    }
    this.received = used < data.length ? [data.subarray(used)] : [];
    const waiting = this.waiting;
    this.waiting = undefined;
    if (close) this.socket.destroy();
    waiting.resolve({ status, text: body.toString('utf8') });
  }
  async request(bytes) {
    if (!this.socket) await this.open();
    const answer = await new Promise((resolve, reject) => {
      this.waiting = { resolve, reject };
      this.socket.write(bytes);
    });
    if (answer.status < 200 || answer.status > 299) throw new Error('HTTP ' + answer.status + ': ' + answer.text.slice(0, 300));
    return answer.text;
  }
  close() {
    this.socket?.destroy();
  }
}
/** The bytes of one request (built before any timing). */
function requestBytes(url, headers, body, method = 'POST') {
  const u = new URL(url);
  let head = method + ' ' + u.pathname + u.search + ' HTTP/1.1\\r\\nHost: ' + u.host + '\\r\\nConnection: keep-alive\\r\\n';
  for (const [name, value] of Object.entries(headers)) head += name + ': ' + value + '\\r\\n';
  if (body !== undefined) head += 'Content-Length: ' + Buffer.byteLength(body) + '\\r\\n';
  return Buffer.concat([Buffer.from(head + '\\r\\n', 'latin1'), Buffer.from(body ?? '', 'utf8')]);
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
      const connection = new Connection(job.url);
      const bytes = requestBytes(job.url, job.headers, undefined, 'GET');
      parentPort.postMessage({ ok: true, started: true });
      while (!run.stopped) {
        const t0 = performance.now();
        await connection.request(bytes);
        times.push(performance.now() - t0);
        await new Promise((r) => setTimeout(r, job.intervalMs));
      }
      connection.close();
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
      const connection = new Connection(job.url);
      const bytes = requestBytes(job.url, job.headers, undefined, 'GET');
      for (;;) {
        const text = await connection.request(bytes);
        if (job.until.includes(JSON.parse(text).status)) {
          connection.close();
          parentPort.postMessage({ ok: true, text });
          return;
        }
        await new Promise((r) => setTimeout(r, job.intervalMs));
      }
    }
    if (job.kind === 'posts') {
      // Each body once, job.inFlight at a time: the seconds from the first request to the last answer, and
      // the values at job.pick of each answer's results, in the order of the bodies.
      const requests = job.bodies.map((body) => requestBytes(job.url, job.headers, body));
      const found = new Array(requests.length);
      let next = 0;
      const t0 = performance.now();
      await Promise.all(Array.from({ length: Math.min(job.inFlight, requests.length) }, async () => {
        const connection = new Connection(job.url);
        while (next < requests.length) {
          const i = next++;
          const text = await connection.request(requests[i]);
          found[i] = JSON.parse(text).results.map((r) => job.pick.reduce((v, k) => (v == null ? v : v[k]), r));
        }
        connection.close();
      }));
      parentPort.postMessage({ ok: true, seconds: (performance.now() - t0) / 1000, found });
      return;
    }
    if (job.kind === 'latencies') {
      const times = [], found = [];
      const connection = new Connection(job.url);
      const requests = job.bodies.map((body) => requestBytes(job.url, job.headers, body));
      for (const bytes of requests) {
        const t0 = performance.now();
        const text = await connection.request(bytes);
        times.push(performance.now() - t0);
        found.push(pickAll(text, job.pick));
      }
      connection.close();
      parentPort.postMessage({ ok: true, times, found });
    } else {
      let done = 0;
      const requests = job.bodies.map((body) => requestBytes(job.url, job.headers, body));
      const until = performance.now() + job.seconds * 1000;
      await Promise.all(Array.from({ length: job.clients }, async (_, c) => {
        const connection = new Connection(job.url);
        for (let i = c; performance.now() < until; i += job.clients) {
          await connection.request(requests[i % requests.length]);
          done++;
        }
        connection.close();
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
  /** The worker's first message names its thread (thread-cpu.ts lists it as `client`). */
  private readonly started = new Promise<void>((resolve) =>
    this.worker.once('message', (msg: { tid?: string }) => {
      if (msg.tid) nameThread(msg.tid, 'client');
      resolve();
    }),
  );

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

  /**
   * Each body posted once, `inFlight` requests at a time: the seconds from the first request to the last
   * answer (timed in the worker), and for each body the values at `pick` of its answer's `results`.
   */
  async posts(route: string, bodies: readonly unknown[], inFlight: number, pick: readonly string[]): Promise<{ seconds: number; found: unknown[][] }> {
    return this.run<{ seconds: number; found: unknown[][] }>({ kind: 'posts', ...this.job(route, bodies), inFlight, pick });
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

  private async run<T>(job: Record<string, unknown>): Promise<T> {
    await this.started;
    return new Promise((resolve, reject) => {
      this.worker.once('message', (msg: { ok: boolean; error?: string } & T) => (msg.ok ? resolve(msg) : reject(new Error(msg.error))));
      this.worker.postMessage(job);
    });
  }
}
