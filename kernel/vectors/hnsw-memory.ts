/**
 * The in-process vector index: an HNSW graph per index held in the API process (memory-graph.ts) — in the
 * graph thread (graph-thread.ts) or in the calling thread (graph-handle.ts: LocalGraph) — in front of a
 * durable engine (pgvector tables in the database, or LanceDB when the database has no
 * pgvector), which stays the source of truth.
 *
 * - Writes go to the durable engine first, then into the change log in the database (kernel/db/
 *   change-log.ts: which ids each write touched, under the index's lock — or, on one connection, in one
 *   statement whose version bump holds the key — so versions follow the order of the writes), then into
 *   this process's graph.
 * - Before every search the index's head is read (one indexed row); a copy behind it replays the ids
 *   changed since, re-reading them from the durable engine. So a write acknowledged by any API process
 *   sharing the database is seen by the next search of every process.
 * - A graph is built from the durable engine on an index's first search in a process (the build time is
 *   logged), or kept from creation when the index is created here. A small index is built before that
 *   search answers; a large one (a restarted process, 100,000 vectors: tens of seconds) is built in the
 *   background while the durable engine answers, then brought up to date from the change log and used.
 * - `get` and `count` read the durable engine; a process keeps at most `maxVectors` vectors in memory
 *   (least recently searched indexes go first; a larger index is searched in the durable engine).
 */
import type { Knex } from 'knex';
import type { Logger } from 'pino';
import { NotFoundError } from '../errors.js';
import { ChangeLog, type ChangeLogHead } from '../db/change-log.js';
import type { DatabaseNotices } from '../db/database.js';
import type { ParsedFilter } from '../filters/filter.js';
import { LocalGraph, type GraphHandle } from './graph-handle.js';
import { GraphThread, GraphThreadEndedError } from './graph-thread.js';
import { DEFAULT_GRAPH_OPTIONS, MemoryGraph, type GraphPlan, type MemoryGraphOptions } from './memory-graph.js';
import {
  checkIndexName, checkLimit, checkSpec, checkVector, dedupeById,
  type IndexSpec, type VectorEngine, type VectorHit, type VectorIndex, type VectorQuery, type VectorRecord,
} from './vector-index.js';

/** What the in-process index needs of the engine behind it, beyond VectorIndex. */
export interface DurableVectorIndex extends VectorIndex {
  readonly engine: VectorEngine;
  describe(name: string): Promise<IndexSpec>;
  scan(name: string): AsyncIterable<VectorRecord[]>;
  /**
   * An engine in the change log's own database (pgvector): the upsert as one statement, which the change
   * log runs in its own (undefined when the records need more than one). `written` runs after it.
   */
  upsertStatement?(name: string, records: VectorRecord[]): Promise<{ sql: string; bindings: unknown[]; written(): Promise<void> } | undefined>;
}

export interface HnswMemoryOptions {
  /**
   * Hold the index's change-log lock while writing to the durable engine, so versions follow the order
   * of the writes across processes. Needs a second database connection: false on PGlite (one process,
   * one connection), where writes are ordered in-process instead.
   */
  lockDuringWrites: boolean;
  /**
   * Other processes may write to the same database (default true). False for PGlite, which one process
   * opens alone: every write then passes through this instance, so a loaded graph is current and searches
   * skip reading the change log (one query fewer on PGlite's single connection).
   */
  sharedDatabase?: boolean;
  /**
   * With `sharedDatabase` false: the other threads of this process that write the same embedded database
   * (kernel/db/pglite-thread.ts). Each write here tells them, and a notice from them makes the next search
   * read the change log, so a graph skips that read only while no other thread wrote its index.
   */
  notices?: DatabaseNotices;
  /**
   * Keep graphs in this instance (default true). False where nothing searches (the task thread): writes
   * still reach the durable engine and the change log, for the graphs other threads or processes keep.
   */
  keepGraphs?: boolean;
  /**
   * Hold the graphs in a thread of their own (graph-thread.ts; default false): searches and inserts then run
   * beside the caller's event loop instead of on it.
   */
  graphThread?: boolean;
  log?: Pick<Logger, 'info' | 'warn'>;
  graph?: Partial<MemoryGraphOptions>;
  /** Vectors held in memory at most, over all indexes (default 2,000,000). */
  maxVectors?: number;
  /**
   * An index with more vectors than this is built in the background on a process's first search, the
   * durable engine answering until it is ready (default 20,000: about a second or two of building).
   */
  buildInBackgroundAbove?: number;
}

/** The notice a write sends the other threads sharing the embedded database: the index's name. */
const VECTOR_WRITE_NOTICE = 'vectors.written';

/** Vectors held in memory at most, over all indexes, unless configured. */
export const DEFAULT_MAX_VECTORS = 2_000_000;

/** More changed ids than this (or a quarter of the index) since a copy's version: reload instead of replaying. */
const MAX_REPLAY = 5_000;

export class HnswMemoryIndex implements VectorIndex {
  readonly engine: `memory+${VectorEngine}`;
  private readonly changes: ChangeLog;
  private readonly graphs = new Map<string, GraphHandle>();
  /** The thread holding the graphs, when they are held in one. */
  readonly graphThread: GraphThread | undefined;
  /** Per index: writes run one at a time; graph changes (local writes, catch-ups, loads) one at a time. */
  private readonly writeChains = new Map<string, Promise<unknown>>();
  private readonly graphChains = new Map<string, Promise<unknown>>();
  private readonly options: MemoryGraphOptions;
  private readonly maxVectors: number;
  private readonly buildInBackgroundAbove: number;
  /** Graphs being built in the background, by index. */
  private readonly builds = new Map<string, Promise<void>>();
  private closed = false;
  /** Indexes another thread wrote since this instance last read their change-log head. */
  private readonly writtenElsewhere = new Set<string>();
  private readonly stopListening: (() => void) | undefined;

  constructor(
    private readonly durable: DurableVectorIndex,
    db: Knex,
    private readonly settings: HnswMemoryOptions,
  ) {
    this.engine = `memory+${durable.engine}`;
    this.changes = new ChangeLog(db, { prefix: 'vector_log' });
    this.options = { ...DEFAULT_GRAPH_OPTIONS, ...settings.graph };
    this.maxVectors = settings.maxVectors ?? DEFAULT_MAX_VECTORS;
    this.buildInBackgroundAbove = settings.buildInBackgroundAbove ?? 20_000;
    this.graphThread = settings.graphThread && settings.keepGraphs !== false ? new GraphThread(settings.log) : undefined;
    this.stopListening = settings.notices?.onNotice((topic, payload) => {
      if (topic === VECTOR_WRITE_NOTICE) this.writtenElsewhere.add(payload as string);
    });
  }

  /** Resolves when no graph of the index is being built in the background (tests). */
  async built(name: string): Promise<void> {
    await this.builds.get(name);
  }

  /** The plan of the last search of an index in this process (tests, benchmark). */
  lastPlan(name: string): GraphPlan | undefined {
    return this.graphs.get(name)?.lastPlan;
  }

  /** Vectors and approximate bytes held in memory for an index (undefined when not loaded here). */
  memory(name: string): { vectors: number; bytesPerVector: number; allocatedBytes: number } | undefined {
    const graph = this.graphs.get(name);
    return graph ? { vectors: graph.stats.size - graph.stats.dead, bytesPerVector: graph.stats.bytesPerSlot, allocatedBytes: graph.stats.capacityBytes } : undefined;
  }

  async ensureIndex(spec: IndexSpec): Promise<void> {
    checkSpec(spec);
    await this.durable.ensureIndex(spec);
    const known = this.graphs.get(spec.name);
    if (known || this.settings.keepGraphs === false) return;
    const head = await this.changes.open(spec.name);
    // A new, empty index: keep its graph from the start, so loading it builds the graph as it goes.
    if (head.version === 0 && (await this.durable.count(spec.name)) === 0) {
      await this.exclusive(spec.name, async () => {
        if (!this.graphs.has(spec.name)) this.remember(await this.newGraph(spec, 0, head.generation, 1_024));
      });
    }
  }

  upsert(name: string, records: VectorRecord[]): Promise<void> {
    checkIndexName(name);
    const unique = dedupeById(records);
    if (unique.length === 0) return this.durable.upsert(name, unique);
    const ids = unique.map((r) => r.id);
    const upsertStatement = this.settings.lockDuringWrites ? undefined : this.durable.upsertStatement?.bind(this.durable);
    return this.writing(name, async () => {
      // One connection (PGlite): the vectors and their change-log record in one statement, one round trip.
      const statement = await upsertStatement?.(name, unique);
      if (!statement) return this.recorded(name, ids, () => this.durable.upsert(name, unique));
      const head = await this.changes.writeInStatement(name, ids, statement);
      await statement.written();
      return { result: undefined, head };
    }, (graph) => graph.putAll(unique));
  }

  async delete(name: string, ids: string[]): Promise<number> {
    checkIndexName(name);
    const unique = [...new Set(ids)];
    if (unique.length === 0) return this.durable.delete(name, unique);
    return this.writing(name, () => this.recorded(name, unique, () => this.durable.delete(name, unique)), (graph) => graph.removeAll(unique));
  }

  async deleteWhere(name: string, filter: ParsedFilter): Promise<number> {
    checkIndexName(name);
    const graph = await this.current(name).catch((err: unknown) => {
      if (err instanceof NotFoundError) return undefined;
      throw err;
    });
    if (!graph) {
      // No copy here to say which ids the filter selects: every process's copy reloads.
      return this.serialize(this.writeChains, name, async () => {
        const { result } = await this.changes.write(name, [], () => this.durable.deleteWhere(name, filter), this.settings.lockDuringWrites, true);
        this.settings.notices?.notify(VECTOR_WRITE_NOTICE, name);
        return result;
      });
    }
    const ids = await graph.matchingIds(filter);
    return this.writing(name, () => this.recorded(name, ids, () => this.durable.deleteWhere(name, filter)), (g) => g.removeAll(ids));
  }

  async search(name: string, query: VectorQuery): Promise<VectorHit[]> {
    checkIndexName(name);
    const limit = checkLimit(query.limit);
    const optimistic = await this.searchHeldWhileCheckingHead(name, query, limit);
    if (optimistic) return optimistic;
    const graph = await this.current(name);
    if (!graph) return this.durable.search(name, query);
    const vector = checkVector(query.vector, graph.spec.dims);
    try {
      return await graph.search(vector, limit, query.filter, query.payloads !== false);
    } catch (err) {
      // The graph went away under the search (evicted, or its thread ended): the durable engine answers.
      if (graph.usable) throw err;
      this.forget(name, graph);
      return this.durable.search(name, query);
    }
  }

  get(name: string, ids: string[]): Promise<VectorRecord[]> {
    return this.durable.get(name, ids);
  }

  count(name: string, filter?: ParsedFilter): Promise<number> {
    return this.durable.count(name, filter);
  }

  async dropIndex(name: string): Promise<void> {
    checkIndexName(name);
    await this.serialize(this.writeChains, name, async () => {
      await this.durable.dropIndex(name);
      await this.changes.drop(name);
      await this.exclusive(name, async () => void this.forget(name));
      this.settings.notices?.notify(VECTOR_WRITE_NOTICE, name);
    });
  }

  ping(): Promise<void> {
    return this.durable.ping();
  }

  async close(): Promise<void> {
    this.closed = true;
    this.stopListening?.();
    this.graphs.clear();
    // A background build stops at its next slice (putAll), before the durable engine closes under it.
    await Promise.all(this.builds.values());
    await this.graphThread?.close();
    await this.durable.close();
  }

  /**
   * One write: the durable engine and the change log (`write`: ChangeLog.write or writeInStatement), then this process's graph,
   * when the graph was current just before it (otherwise the next search replays the write).
   */
  private writing<T>(name: string, write: () => Promise<{ result: T; head: ChangeLogHead }>, apply: (graph: GraphHandle) => Promise<void>): Promise<T> {
    return this.serialize(this.writeChains, name, async () => {
      const { result, head } = await write();
      this.settings.notices?.notify(VECTOR_WRITE_NOTICE, name);
      await this.exclusive(name, async () => {
        const graph = this.graphs.get(name);
        if (!graph) return;
        if (graph.generation !== head.generation || graph.version !== head.version - 1) return;
        try {
          await apply(graph);
        } catch (err) {
          // The write is stored; a graph lost meanwhile is rebuilt from the store on the next search.
          if (graph.usable) throw err;
          this.forget(name, graph);
          return;
        }
        graph.version = head.version;
      });
      return result;
    });
  }

  /** `work` on the durable engine, recorded in the change log (ChangeLog.write). */
  private recorded<T>(name: string, ids: readonly string[], work: () => Promise<T>): Promise<{ result: T; head: ChangeLogHead }> {
    return this.changes.write(name, ids, work, this.settings.lockDuringWrites);
  }

  /**
   * Where the change-log head must be read before a search (a shared database, or another thread wrote), the
   * graph this process holds is searched while the head is read, instead of after: when the head shows the
   * graph was current as the search began, its hits are the answer (one database round trip off each search).
   * Undefined when there is no such graph or it was behind: the caller catches up and searches again.
   */
  private async searchHeldWhileCheckingHead(name: string, query: VectorQuery, limit: number): Promise<VectorHit[] | undefined> {
    if (this.settings.keepGraphs === false) return undefined;
    const held = this.graphs.get(name);
    if (!held || !held.usable) return undefined;
    if (this.heldIsCurrent(name)) return undefined;
    const vector = checkVector(query.vector, held.spec.dims);
    const { version, generation } = held;
    // Cleared before the read, as current() does: a notice arriving after it marks the index again.
    const marked = this.writtenElsewhere.delete(name);
    const [head, hits] = await Promise.all([
      this.changes.head(name),
      held.search(vector, limit, query.filter, query.payloads !== false).catch(() => undefined),
    ]);
    if (!hits || !head || !held.usable || head.generation !== generation || version < head.version) {
      // Not answered here: current() must read the head again and catch up, as if this had not run.
      if (marked) this.writtenElsewhere.add(name);
      return undefined;
    }
    this.touch(name, held);
    return hits;
  }

  /** True when no other writer can have changed the index since this process's graph saw it: no head to read. */
  private heldIsCurrent(name: string): boolean {
    return this.settings.sharedDatabase === false && !this.writtenElsewhere.has(name);
  }

  /** The index's graph, brought up to date with the change log; undefined when it is searched in the durable engine. */
  private async current(name: string): Promise<GraphHandle | undefined> {
    if (this.settings.keepGraphs === false) return undefined;
    const held = this.graphs.get(name);
    if (held && !held.usable) this.forget(name, held);
    if (this.heldIsCurrent(name)) {
      const graph = this.graphs.get(name);
      if (graph) return graph;
    }
    // Cleared before the read: a notice arriving after it marks the index again.
    this.writtenElsewhere.delete(name);
    const head = await this.changes.head(name);
    if (!head) {
      // Dropped by another process since this one built its graph.
      if (this.forget(name)) throw new NotFoundError(`vector index '${name}' not found`, { name });
      // Never written through this layer: the durable engine answers (NotFound when there is no such index).
      return undefined;
    }
    const graph = this.graphs.get(name);
    if (graph && graph.generation === head.generation && graph.version >= head.version) {
      this.touch(name, graph);
      return graph;
    }
    return this.exclusive(name, () => this.catchUp(name, head));
  }

  private async catchUp(name: string, head: ChangeLogHead): Promise<GraphHandle | undefined> {
    let graph = this.graphs.get(name);
    if (graph && graph.usable && graph.generation === head.generation && graph.version >= head.version) return graph;
    // A graph whose thread ends during the replay is rebuilt like any other that cannot be replayed.
    const replayed = async (g: GraphHandle) => this.replay(name, g).catch((err: unknown) => (g.usable ? Promise.reject(err) : false));
    if (graph && (!graph.usable || graph.generation !== head.generation || graph.stats.wasteful || !(await replayed(graph)))) {
      graph = undefined;
      this.forget(name);
    }
    if (!graph) {
      if (this.builds.has(name)) return undefined;
      const total = await this.durable.count(name);
      if (total > this.buildInBackgroundAbove) {
        this.buildInBackground(name);
        return undefined;
      }
      graph = await this.load(name, total).catch((err: unknown) => {
        // The thread ended during the build: the durable engine answers; the next search builds again.
        if (err instanceof GraphThreadEndedError && !this.closed) return undefined;
        throw err;
      });
    }
    if (graph) this.remember(graph);
    return graph;
  }

  /**
   * Builds the index's graph outside the graph chain (searches meanwhile go to the durable engine, writes
   * go on), then, in the chain, replays what changed since the build began and puts the graph in use. A
   * build overtaken by a change it cannot replay (a new generation, a filtered delete) is dropped: the
   * next search starts another.
   */
  private buildInBackground(name: string): void {
    const build = (async () => {
      const graph = await this.load(name);
      if (!graph || this.closed) return;
      await this.exclusive(name, async () => {
        const head = await this.changes.head(name);
        if (!head || head.generation !== graph.generation || this.graphs.has(name) || !graph.usable) return graph.release();
        if (graph.version < head.version && !(await this.replay(name, graph))) return graph.release();
        this.remember(graph);
      });
    })()
      .catch((err: unknown) => {
        if (!this.closed) this.settings.log?.warn({ err, index: name }, 'building the in-process vector index failed; the durable engine answers');
      })
      .finally(() => this.builds.delete(name));
    this.builds.set(name, build);
  }

  /** Re-reads the ids changed since the graph's version from the durable engine; false when reloading is cheaper. */
  private async replay(name: string, graph: GraphHandle): Promise<boolean> {
    const changed = await this.changes.since(name, graph.version, graph.generation);
    if (!changed) return false;
    if (changed.ids.length > Math.max(MAX_REPLAY, graph.stats.size / 4)) return false;
    for (let i = 0; i < changed.ids.length; i += 1_000) {
      const ids = changed.ids.slice(i, i + 1_000);
      const found = await this.durable.get(name, ids);
      await graph.putAll(found);
      const present = new Set(found.map((r) => r.id));
      await graph.removeAll(ids.filter((id) => !present.has(id)));
    }
    graph.version = changed.head.version;
    return true;
  }

  /**
   * A fresh graph from the durable engine (undefined when the index is larger than the memory budget);
   * `total` is the index's vector count when the caller has just read it.
   */
  private async load(name: string, total?: number): Promise<GraphHandle | undefined> {
    const started = performance.now();
    const head = await this.changes.head(name);
    if (!head) return undefined;
    const spec = await this.durable.describe(name);
    total ??= await this.durable.count(name);
    if (total > this.maxVectors) {
      this.settings.log?.warn({ index: name, vectors: total, maxVectors: this.maxVectors }, 'vector index larger than the in-memory budget: searched in the durable engine');
      return undefined;
    }
    const graph = await this.newGraph(spec, head.version, head.generation, Math.ceil(total * 1.1) + 16);
    try {
      for await (const page of this.durable.scan(name)) await graph.putAll(page);
    } catch (err) {
      graph.release();
      throw err;
    }
    this.settings.log?.info(
      { index: name, vectors: graph.stats.size, ms: Math.round(performance.now() - started), bytes: graph.stats.capacityBytes },
      'built in-process vector index from the durable store',
    );
    return graph;
  }

  /** An empty graph, in the graph thread when there is one. */
  private async newGraph(spec: IndexSpec, version: number, generation: string, capacity: number): Promise<GraphHandle> {
    if (this.closed) throw new Error('the vector index is closed');
    if (this.graphThread) {
      try {
        return await this.graphThread.create(spec, version, generation, this.options, capacity);
      } catch (err) {
        if (this.closed) throw err;
        // Searches must not fail for want of a thread: this graph stays in the calling thread.
        this.settings.log?.warn({ err, index: spec.name }, 'the vector graph thread could not take a graph; it is kept in this thread');
      }
    }
    return new LocalGraph(new MemoryGraph(spec, this.options, capacity), version, generation, () => this.closed);
  }

  /** Stops using the index's graph (only `graph`, when given) and frees it; true when there was one. */
  private forget(name: string, graph?: GraphHandle): boolean {
    const held = this.graphs.get(name);
    if (!held || (graph && held !== graph)) return false;
    this.graphs.delete(name);
    held.release();
    return true;
  }

  private remember(graph: GraphHandle): void {
    this.touch(graph.spec.name, graph);
    let held = 0;
    for (const g of this.graphs.values()) held += g.stats.size;
    // Least recently searched first; the graph just used stays.
    for (const [name, g] of this.graphs) {
      if (held <= this.maxVectors || g === graph) break;
      this.forget(name);
      held -= g.stats.size;
    }
  }

  private touch(name: string, graph: GraphHandle): void {
    if (this.graphs.get(name) === graph && [...this.graphs.keys()].at(-1) === name) return;
    this.graphs.delete(name);
    this.graphs.set(name, graph);
  }

  private exclusive<T>(name: string, work: () => Promise<T>): Promise<T> {
    return this.serialize(this.graphChains, name, work);
  }

  private serialize<T>(chains: Map<string, Promise<unknown>>, name: string, work: () => Promise<T>): Promise<T> {
    const previous = chains.get(name) ?? Promise.resolve();
    const next = previous.then(work, work);
    const settled = next.catch(() => undefined);
    chains.set(name, settled);
    void settled.then(() => {
      if (chains.get(name) === settled) chains.delete(name);
    });
    return next;
  }
}
