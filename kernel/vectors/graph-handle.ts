/**
 * A graph as the in-process index (hnsw-memory.ts) uses it, wherever the graph lives: in the calling thread
 * (LocalGraph, below) or in the graph thread (graph-thread.ts), where searches and inserts run beside the
 * HTTP thread instead of on it.
 */
import type { ParsedFilter } from '../filters/filter.js';
import type { GraphPlan, GraphStats, MemoryGraph } from './memory-graph.js';
import type { IndexSpec, VectorHit, VectorRecord } from './vector-index.js';

export interface GraphHandle {
  readonly spec: IndexSpec;
  /** The change-log version and generation this copy reflects (the index's bookkeeping). */
  version: number;
  generation: string;
  /** Sizes as of the last change. */
  readonly stats: GraphStats;
  /** The plan of the last search. */
  readonly lastPlan: GraphPlan;
  /** False once the graph is gone (released, or its thread ended): the index builds another. */
  readonly usable: boolean;
  putAll(records: readonly VectorRecord[]): Promise<void>;
  removeAll(ids: readonly string[]): Promise<void>;
  /** `payloads` false: hits may come with empty payloads (VectorQuery.payloads). */
  search(query: ArrayLike<number>, limit: number, filter?: ParsedFilter, payloads?: boolean): Promise<VectorHit[]>;
  matchingIds(filter: ParsedFilter): Promise<string[]>;
  /** Frees the graph's memory; it is not used after. Idempotent. */
  release(): void;
}

/**
 * Longest stretch of graph inserts between yields to the event loop: an insert of a 384-d vector takes
 * ~0.2 ms, so a fixed count (256 were ~50 ms) held requests (or, in the graph thread, searches) behind a
 * batch's writes.
 */
export const YIELD_AFTER_MS = 4;

/** Puts records into a graph in slices of at most YIELD_AFTER_MS, yielding between them; `stopped` ends it early. */
export async function putInSlices(graph: MemoryGraph, records: readonly VectorRecord[], stopped: () => boolean): Promise<void> {
  let sliceStart = performance.now();
  for (let i = 0; i < records.length; i++) {
    if (stopped()) throw new Error('the graph was closed before the insert ended');
    graph.put(records[i]!);
    if (performance.now() - sliceStart >= YIELD_AFTER_MS) {
      await new Promise<void>((resolve) => setImmediate(resolve));
      sliceStart = performance.now();
    }
  }
}

/** A graph in the calling thread. */
export class LocalGraph implements GraphHandle {
  private released = false;

  constructor(
    private readonly graph: MemoryGraph,
    public version: number,
    public generation: string,
    /** True once the index closed: a build stops at its next record. */
    private readonly closed: () => boolean,
  ) {}

  get spec(): IndexSpec {
    return this.graph.spec;
  }
  get stats(): GraphStats {
    return this.graph.stats;
  }
  get lastPlan(): GraphPlan {
    return this.graph.lastPlan;
  }
  get usable(): boolean {
    return !this.released;
  }

  putAll(records: readonly VectorRecord[]): Promise<void> {
    return putInSlices(this.graph, records, this.closed);
  }

  async removeAll(ids: readonly string[]): Promise<void> {
    for (const id of ids) this.graph.remove(id);
  }

  async search(query: ArrayLike<number>, limit: number, filter?: ParsedFilter): Promise<VectorHit[]> {
    return this.graph.search(query, limit, filter);
  }

  async matchingIds(filter: ParsedFilter): Promise<string[]> {
    return this.graph.matchingIds(filter);
  }

  release(): void {
    this.released = true;
  }
}
