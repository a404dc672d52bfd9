/**
 * The in-process index's graphs in a thread of their own. A search's graph walk (~0.3-0.5 ms at 100,000
 * 384-d vectors) and every insert (~0.2 ms each, thousands after a batch) then run beside the HTTP thread,
 * whose share of a search shrinks to posting the query and reading the hits.
 *
 * The thread starts with the first graph and holds every graph of the index (hnsw-memory.ts) that made it.
 * Requests are answered in order per graph: a search sent after an insert's answer sees the insert. If the
 * thread ends (a crash), its graphs are lost: each says so (`usable` false), the index searches the durable
 * engine and builds a new graph, in a new thread, on the next search.
 */
import { Worker } from 'node:worker_threads';
import { threadEntrySource } from '../thread-entry.js';
import type { Logger } from 'pino';
import { regexOf, type FilterNode, type Group, type ParsedFilter } from '../filters/filter.js';
import type { GraphHandle } from './graph-handle.js';
import type { GraphReply, GraphRequest, PlainFilter, PlainGroup, PlainNode } from './graph-thread-main.js';
import type { GraphPlan, GraphStats, MemoryGraphOptions } from './memory-graph.js';
import type { IndexSpec, VectorHit, VectorRecord } from './vector-index.js';

/** The graph thread ended (crashed, or its index closed): the graphs it held are gone. */
export class GraphThreadEndedError extends Error {
  constructor() {
    super('the vector graph thread has ended');
    this.name = 'GraphThreadEndedError';
  }
}

type Request = GraphRequest extends infer R ? (R extends GraphRequest ? Omit<R, 'id'> : never) : never;

interface Running {
  worker: Worker;
  ready: Promise<void>;
  pending: Map<number, { resolve: (value: unknown) => void; reject: (error: Error) => void }>;
  /** Set when the thread ended: every graph it held is lost. */
  ended: boolean;
}

export class GraphThread {
  private running: Running | undefined;
  private nextRequest = 1;
  private nextGraph = 1;
  private closed = false;
  /** Threads started so far (one, unless a thread ended and graphs were made again). */
  starts = 0;

  constructor(private readonly log?: Pick<Logger, 'warn'>) {}

  /** A new, empty graph in the thread (started on first use). */
  async create(spec: IndexSpec, version: number, generation: string, options: MemoryGraphOptions, capacity: number): Promise<GraphHandle> {
    const running = this.start();
    await running.ready;
    const graph = this.nextGraph++;
    const stats = (await this.call(running, { op: 'create', graph, spec, options, capacity: Math.max(16, capacity) })) as GraphStats;
    return new RemoteGraph(this, running, graph, spec, version, generation, stats);
  }

  /** Ends the thread (its graphs with it). */
  async close(): Promise<void> {
    this.closed = true;
    await this.terminate();
  }

  /** Ends the running thread as a crash would: its graphs are lost, and the next graph starts another thread. */
  async terminate(): Promise<void> {
    const running = this.running;
    this.running = undefined;
    if (running && !running.ended) await running.worker.terminate();
  }

  /** @internal RemoteGraph's way to the thread. */
  call(running: Running, request: Request, transfer: ArrayBuffer[] = []): Promise<unknown> {
    if (running.ended) return Promise.reject(new GraphThreadEndedError());
    const id = this.nextRequest++;
    return new Promise((resolve, reject) => {
      // Kept alive while it owes an answer, so a caller awaiting one is not cut short by the process exiting.
      if (running.pending.size === 0) running.worker.ref();
      running.pending.set(id, { resolve, reject });
      running.worker.postMessage({ ...request, id }, transfer);
    });
  }

  private start(): Running {
    if (this.closed) throw new Error('the vector index is closed');
    if (this.running && !this.running.ended) return this.running;
    const worker = new Worker(threadEntrySource(import.meta.url, 'graph-thread-main'), { eval: true, name: 'tessera-vector-graphs' });
    this.starts++;
    const pending: Running['pending'] = new Map();
    let ready!: () => void;
    let failed!: (error: Error) => void;
    const running: Running = { worker, pending, ended: false, ready: new Promise<void>((resolve, reject) => ((ready = resolve), (failed = reject))) };
    worker.on('message', (message: GraphReply | { ready: true }) => {
      if ('ready' in message) {
        // Idle, the thread does not keep the process alive: an index closes it, and a process exiting takes it along.
        if (pending.size === 0) worker.unref();
        return ready();
      }
      const waiting = pending.get(message.id);
      if (!waiting) return;
      pending.delete(message.id);
      if (pending.size === 0) worker.unref();
      if (message.ok) waiting.resolve(message.value);
      else waiting.reject(Object.assign(new Error(message.error.message), { name: message.error.name }));
    });
    worker.on('error', (err) => {
      if (!this.closed) this.log?.warn({ err }, 'the vector graph thread failed; its graphs are rebuilt on the next searches');
    });
    worker.on('exit', () => {
      running.ended = true;
      const error = new GraphThreadEndedError();
      failed(error);
      for (const waiting of pending.values()) waiting.reject(error);
      pending.clear();
      if (this.running === running) this.running = undefined;
    });
    this.running = running;
    return running;
  }
}

/**
 * `filter` as plain data for the thread (PlainFilter): compiled regexes left out, each regex condition
 * carrying the pattern regexOf matches it with in this thread — the compiled one, or the value recompiled
 * for the filter's case sensitivity. regexOf also checks a hand-built pattern here, so a bad one is the
 * caller's RequestValidationError (a 422), not an error relayed from the thread.
 */
export function plainFilter(filter: ParsedFilter): PlainFilter {
  const node = (n: FilterNode): PlainNode => {
    if (n.kind === 'group') return group(n);
    const value = n.operator === 'regex' ? regexOf(n, filter.caseSensitive).pattern : n.value;
    return { kind: 'condition', field: n.field, operator: n.operator, value };
  };
  const group = (g: Group): PlainGroup => ({ kind: 'group', and: g.and.map(node), or: g.or.map(node), not: g.not.map(node) });
  return { root: group(filter.root), caseSensitive: filter.caseSensitive };
}

/** A graph held by the graph thread. */
class RemoteGraph implements GraphHandle {
  lastPlan: GraphPlan = 'empty';
  private released = false;

  constructor(
    private readonly thread: GraphThread,
    private readonly running: Running,
    private readonly graph: number,
    readonly spec: IndexSpec,
    public version: number,
    public generation: string,
    public stats: GraphStats,
  ) {}

  get usable(): boolean {
    return !this.released && !this.running.ended;
  }

  async putAll(records: readonly VectorRecord[]): Promise<void> {
    if (records.length === 0) return;
    const dims = this.spec.dims;
    // One buffer for every vector, moved to the thread rather than copied.
    const vectors = new Float32Array(records.length * dims);
    records.forEach((record, i) => {
      if (record.vector.length !== dims) throw new Error(`vector '${record.id}' has ${record.vector.length} dimensions, the index ${dims}`);
      vectors.set(record.vector, i * dims);
    });
    const request: Request = { op: 'put', graph: this.graph, ids: records.map((r) => r.id), payloads: records.map((r) => r.payload ?? {}), vectors };
    this.stats = (await this.thread.call(this.running, request, [vectors.buffer as ArrayBuffer])) as GraphStats;
  }

  async removeAll(ids: readonly string[]): Promise<void> {
    if (ids.length === 0) return;
    this.stats = (await this.thread.call(this.running, { op: 'remove', graph: this.graph, ids: [...ids] })) as GraphStats;
  }

  async search(query: ArrayLike<number>, limit: number, filter?: ParsedFilter, payloads = true): Promise<VectorHit[]> {
    const request: Request = { op: 'search', graph: this.graph, query: Float32Array.from(query), limit, payloads, ...(filter ? { filter: plainFilter(filter) } : {}) };
    const { hits, plan } = (await this.thread.call(this.running, request)) as { hits: VectorHit[]; plan: GraphPlan };
    this.lastPlan = plan;
    return hits;
  }

  async matchingIds(filter: ParsedFilter): Promise<string[]> {
    // async: a pattern plainFilter refuses comes back as a rejection, like any failure of the call.
    return this.thread.call(this.running, { op: 'match', graph: this.graph, filter: plainFilter(filter) }) as Promise<string[]>;
  }

  release(): void {
    if (this.released) return;
    this.released = true;
    if (!this.running.ended) void this.thread.call(this.running, { op: 'release', graph: this.graph }).catch(() => undefined);
  }
}
