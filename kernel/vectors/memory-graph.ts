/**
 * One vector index held in process: an HNSW graph (hnswlib-node) beside the vectors themselves (a flat
 * Float32Array, for exact scans and exact scores) and the payloads (for filters and hits). Everything
 * here is synchronous; hnsw-memory.ts keeps it in step with the durable store.
 *
 * Search plan, per query (the measurements behind it are in DESIGN.md and scripts/bench/retrieval.ts):
 * - the filter is evaluated over the payloads (compiled once; its matching set is cached until the next
 *   write), giving the exact number of matching vectors;
 * - few matches (at most `exactScanMax`, or `exactScanRatio` of the index): an exact scan over just
 *   those vectors — recall 1.0 and well under a millisecond for a 1% subset of 100,000;
 * - a narrow filter (at most `postFilterMaxShare` of the index): first an unfiltered walk for enough
 *   neighbours that about `POST_FILTER_OVERSAMPLE` × limit of them should match, then the filter; when
 *   at least `limit` match, those are the answer (hnswlib's filtered walk calls back into JavaScript for
 *   every node it visits and must visit ~1/share as many: 5–15 ms at 10% of 100,000 vectors, against
 *   ~0.5 ms this way). A filter that matches few of the query's neighbours (it is correlated with
 *   the vectors) leaves fewer than `limit`: then an exact scan of the matches, up to `exactFallbackMax`
 *   of them (~2–3 ms per 10,000 at 384 dimensions, where the filtered walk is slowest), else the
 *   filtered walk;
 * - otherwise the HNSW graph, with the filter checked inside the graph walk (hnswlib keeps walking
 *   until `ef` matching candidates are found) and `ef` raised as the filter narrows;
 * - no filter (or one that every vector passes): the graph with the configured `ef`, or an exact scan of
 *   an index of at most `exactScanMaxUnfiltered` vectors.
 * Every hit's score is recomputed from the stored vector, so both plans give the same scores.
 */
import hnswlib from 'hnswlib-node';

type Hnsw = InstanceType<typeof hnswlib.HierarchicalNSW>;
import { compileFilter } from '../filters/predicate.js';
import type { ParsedFilter } from '../filters/filter.js';
import type { Distance, IndexSpec, VectorHit, VectorRecord } from './vector-index.js';

export interface MemoryGraphOptions {
  /** HNSW links per node (memory and build time grow with it). */
  m: number;
  efConstruction: number;
  /**
   * ef for unfiltered searches (at least the limit). 64: recall@10 1.000 on the retrieval bench's 100,000
   * clustered vectors, ~20% less walk than 96 (the walk is a third of a search's time through HTTP).
   */
  efSearch: number;
  /** Filters matching at most this many vectors are answered by an exact scan... */
  exactScanMax: number;
  /** ... as are filters matching at most this share of the index. */
  exactScanRatio: number;
  /**
   * Searches without a filter scan exactly only up to this many vectors: past it the graph walk (native,
   * SIMD distances) costs less than a scan in JavaScript, with the same hits at these sizes.
   */
  exactScanMaxUnfiltered: number;
  /** Filters matching at most this share of the index try an unfiltered walk and the filter after it first. */
  postFilterMaxShare: number;
  /** When that finds too few, matches up to this many are scanned exactly instead of walked. */
  exactFallbackMax: number;
}

export const DEFAULT_GRAPH_OPTIONS: MemoryGraphOptions = {
  m: 16, efConstruction: 100, efSearch: 64, exactScanMax: 3_000, exactScanRatio: 0.03, exactScanMaxUnfiltered: 1_000, postFilterMaxShare: 0.3, exactFallbackMax: 20_000,
};

export type GraphPlan = 'exact' | 'ann' | 'ann_filtered' | 'ann_post_filtered' | 'empty';

/** A graph's sizes, as it reports them after each change. */
export interface GraphStats {
  /** Slots in use, deleted ones included. */
  size: number;
  dead: number;
  /** Dead slots outnumber live ones: a fresh copy is smaller and faster. */
  wasteful: boolean;
  bytesPerSlot: number;
  capacityBytes: number;
}

const SPACE: Record<Distance, 'cosine' | 'l2' | 'ip'> = { cosine: 'cosine', l2: 'l2', dot: 'ip' };
/** How many matching neighbours, per hit asked for, the unfiltered walk of a narrow filter expects to find. */
const POST_FILTER_OVERSAMPLE = 3;
/** Most neighbours that walk asks for (past it the filtered walk or the exact scan answer). */
const POST_FILTER_MAX_CANDIDATES = 2_000;
/** Filter results kept per index (each a byte per vector), dropped at the next write. */
const FILTER_CACHE_SIZE = 16;

interface FilterMatch {
  epoch: number;
  /** 1 where the label's vector passes. */
  mask: Uint8Array;
  labels: Int32Array;
}

export class MemoryGraph {
  private graph: Hnsw;
  private capacity: number;
  /** Vectors by label (normalized for cosine, so a dot product is the similarity). */
  private vectors: Float32Array;
  private readonly ids: string[] = [];
  private readonly payloads: Array<Record<string, unknown> | undefined> = [];
  private alive: Uint8Array;
  private readonly labels = new Map<string, number>();
  private readonly filterCache = new Map<string, FilterMatch>();
  private readonly interned = new Map<string, string>();
  /** Bumped by every change: cached filter results older than it are stale. */
  private epoch = 0;
  /** Deleted labels (their slots stay in the graph, marked deleted). */
  dead = 0;
  /** Slots of replaced vectors: marked deleted in the graph, no longer any id's label. */
  private retired = 0;
  /** Last search's plan (tests and the benchmark report it). */
  lastPlan: GraphPlan = 'empty';

  constructor(
    readonly spec: IndexSpec,
    private readonly options: MemoryGraphOptions = DEFAULT_GRAPH_OPTIONS,
    capacity = 1_024,
  ) {
    this.capacity = Math.max(16, capacity);
    this.graph = new hnswlib.HierarchicalNSW(SPACE[spec.distance], spec.dims);
    this.graph.initIndex({ maxElements: this.capacity, m: options.m, efConstruction: options.efConstruction, randomSeed: 100 });
    this.vectors = new Float32Array(this.capacity * spec.dims);
    this.alive = new Uint8Array(this.capacity);
  }

  get size(): number {
    return this.labels.size;
  }

  /** Dead slots outnumber live ones: a fresh copy is smaller and faster. */
  get wasteful(): boolean {
    const unused = this.dead + this.retired;
    return unused > 10_000 && unused > this.labels.size;
  }

  get stats(): GraphStats {
    return { size: this.size + this.retired, dead: this.dead + this.retired, wasteful: this.wasteful, bytesPerSlot: this.bytesPerSlot, capacityBytes: this.capacityBytes };
  }

  /**
   * Approximate bytes per vector slot, payload aside: the vector twice (hnswlib's copy and ours, float32),
   * hnswlib's base-layer links (2·M) and header, the upper layers' share, the alive byte.
   */
  get bytesPerSlot(): number {
    return this.spec.dims * 4 * 2 + (this.options.m * 2 + 1) * 4 + 8 + Math.ceil(((this.options.m + 1) * 4) / Math.log(this.options.m)) + 1;
  }

  /** Approximate bytes held by the allocated slots (capacity grows by doubling), payloads aside. */
  get capacityBytes(): number {
    return this.capacity * this.bytesPerSlot;
  }

  put(record: VectorRecord): void {
    const dims = this.spec.dims;
    const values = Array.from(record.vector);
    let label = this.labels.get(record.id);
    if (label !== undefined && this.alive[label] === 1) {
      const stored = Float32Array.from(values);
      if (this.spec.distance === 'cosine') normalize(stored);
      if (sameValues(stored, this.vectors.subarray(label * dims, (label + 1) * dims))) {
        // The same vector again (a document's fields or metadata changed): only its payload is new.
        this.payloads[label] = this.compact(record.payload ?? {});
        this.epoch++;
        return;
      }
      // A changed vector goes in as a new point, and the old one is marked deleted: hnswlib updates a point in
      // place by repairing every neighbour's links, about ten times the cost of an insert.
      this.graph.markDelete(label);
      this.alive[label] = 0;
      this.payloads[label] = undefined;
      this.retired += 1;
      label = undefined;
    }
    if (label === undefined) {
      label = this.ids.length;
      if (label >= this.capacity) this.grow(Math.max(this.capacity * 2, label + 1));
      this.ids.push(record.id);
      this.payloads.push(undefined);
      this.labels.set(record.id, label);
    } else {
      // A removed id written again: its label is revived (re-adding a deleted label updates and unmarks it).
      this.dead -= 1;
    }
    const slot = this.vectors.subarray(label * dims, (label + 1) * dims);
    slot.set(values);
    if (this.spec.distance === 'cosine') normalize(slot);
    this.graph.addPoint(values, label);
    this.alive[label] = 1;
    this.payloads[label] = this.compact(record.payload ?? {});
    this.epoch++;
  }

  remove(id: string): boolean {
    const label = this.labels.get(id);
    if (label === undefined || this.alive[label] === 0) return false;
    this.graph.markDelete(label);
    this.alive[label] = 0;
    this.payloads[label] = undefined;
    this.dead += 1;
    this.epoch++;
    return true;
  }

  has(id: string): boolean {
    const label = this.labels.get(id);
    return label !== undefined && this.alive[label] === 1;
  }

  /** Ids of the live vectors whose payload passes the filter. */
  matchingIds(filter: ParsedFilter): string[] {
    const { labels } = this.match(filter);
    return Array.from(labels, (label) => this.ids[label]!);
  }

  search(query: ArrayLike<number>, limit: number, filter?: ParsedFilter): VectorHit[] {
    const live = this.labels.size - this.dead;
    if (live === 0) {
      this.lastPlan = 'empty';
      return [];
    }
    const q = Float32Array.from(query);
    if (this.spec.distance === 'cosine') normalize(q);
    const match = filter ? this.match(filter) : undefined;
    const matching = match ? match.labels.length : live;
    if (matching === 0) {
      this.lastPlan = 'empty';
      return [];
    }
    const small = match
      ? matching <= this.options.exactScanMax || matching <= this.options.exactScanRatio * live || limit * 4 >= matching
      : live <= this.options.exactScanMaxUnfiltered || limit * 4 >= live;
    if (small) {
      this.lastPlan = 'exact';
      return this.exact(q, limit, match?.labels);
    }
    const all = matching === live;
    const k = Math.min(limit, matching);
    // hnswlib takes the query as a plain array.
    const walkQuery = Array.from(query);
    if (!all && match) {
      const share = matching / live;
      const wanted = Math.ceil((POST_FILTER_OVERSAMPLE * k) / share);
      if (share <= this.options.postFilterMaxShare && wanted <= Math.min(POST_FILTER_MAX_CANDIDATES, live)) {
        this.graph.setEf(Math.max(wanted, this.options.efSearch));
        const mask = match.mask;
        const candidates = this.graph.searchKnn(walkQuery, wanted).neighbors.filter((label) => mask[label] === 1);
        if (candidates.length >= k) {
          this.lastPlan = 'ann_post_filtered';
          return this.exact(q, limit, Int32Array.from(candidates));
        }
        if (matching <= this.options.exactFallbackMax) {
          this.lastPlan = 'exact';
          return this.exact(q, limit, match.labels);
        }
      }
    }
    // A narrower filter leaves fewer matching neighbours per node visited: widen the walk with it.
    const widen = all ? 1 : Math.min(4, Math.sqrt(live / matching));
    this.graph.setEf(Math.min(2_000, Math.max(k, Math.ceil(this.options.efSearch * widen))));
    const mask = match?.mask;
    const found = all || !mask ? this.graph.searchKnn(walkQuery, k) : this.graph.searchKnn(walkQuery, k, (label) => mask[label] === 1);
    this.lastPlan = all ? 'ann' : 'ann_filtered';
    const hits = found.neighbors.map((label) => ({ label, score: this.score(q, label) }));
    hits.sort((a, b) => b.score - a.score || compareIds(this.ids[a.label]!, this.ids[b.label]!));
    return hits.map((h) => this.hit(h.label, h.score));
  }

  private hit(label: number, score: number): VectorHit {
    return { id: this.ids[label]!, score, payload: this.payloads[label]! };
  }

  /** Exact top `limit` over the given labels (all live ones when absent). */
  private exact(q: Float32Array, limit: number, subset: Int32Array | undefined): VectorHit[] {
    // The best `limit` so far, sorted best first (limit is small next to the subset).
    const topLabels: number[] = [];
    const topScores: number[] = [];
    const consider = (label: number) => {
      const score = this.score(q, label);
      const n = topLabels.length;
      if (n === limit && !(score > topScores[n - 1]! || (score === topScores[n - 1] && compareIds(this.ids[label]!, this.ids[topLabels[n - 1]!]!) < 0))) return;
      let at = n;
      while (at > 0 && (topScores[at - 1]! < score || (topScores[at - 1] === score && compareIds(this.ids[topLabels[at - 1]!]!, this.ids[label]!) > 0))) at--;
      topLabels.splice(at, 0, label);
      topScores.splice(at, 0, score);
      if (topLabels.length > limit) {
        topLabels.pop();
        topScores.pop();
      }
    };
    if (subset) for (const label of subset) consider(label);
    else for (let label = 0; label < this.ids.length; label++) if (this.alive[label] === 1) consider(label);
    return topLabels.map((label, i) => this.hit(label, topScores[i]!));
  }

  private score(q: Float32Array, label: number): number {
    const dims = this.spec.dims;
    const v = this.vectors;
    const base = label * dims;
    if (this.spec.distance === 'l2') {
      let sum = 0;
      for (let i = 0; i < dims; i++) {
        const d = q[i]! - v[base + i]!;
        sum += d * d;
      }
      return -Math.sqrt(sum);
    }
    // Four running sums: independent additions V8 can overlap (about twice the speed of one sum).
    let a = 0;
    let b = 0;
    let c = 0;
    let d = 0;
    let i = 0;
    for (; i + 3 < dims; i += 4) {
      a += q[i]! * v[base + i]!;
      b += q[i + 1]! * v[base + i + 1]!;
      c += q[i + 2]! * v[base + i + 2]!;
      d += q[i + 3]! * v[base + i + 3]!;
    }
    for (; i < dims; i++) a += q[i]! * v[base + i]!;
    return a + b + c + d;
  }

  private match(filter: ParsedFilter): FilterMatch {
    const key = JSON.stringify(filter);
    const cached = this.filterCache.get(key);
    if (cached && cached.epoch === this.epoch) {
      // Most recently used last.
      this.filterCache.delete(key);
      this.filterCache.set(key, cached);
      return cached;
    }
    const test = compileFilter(filter);
    const mask = new Uint8Array(this.ids.length);
    const found: number[] = [];
    for (let label = 0; label < this.ids.length; label++) {
      if (this.alive[label] === 1 && test(this.payloads[label]!)) {
        mask[label] = 1;
        found.push(label);
      }
    }
    const match: FilterMatch = { epoch: this.epoch, mask, labels: Int32Array.from(found) };
    this.filterCache.delete(key);
    this.filterCache.set(key, match);
    while (this.filterCache.size > FILTER_CACHE_SIZE) this.filterCache.delete(this.filterCache.keys().next().value!);
    return match;
  }

  private grow(capacity: number): void {
    this.graph.resizeIndex(capacity);
    const vectors = new Float32Array(capacity * this.spec.dims);
    vectors.set(this.vectors);
    this.vectors = vectors;
    const alive = new Uint8Array(capacity);
    alive.set(this.alive);
    this.alive = alive;
    this.capacity = capacity;
  }

  /**
   * Payloads of one index repeat the same few strings (organization, namespace, collection, owner):
   * one shared copy of each short top-level string instead of one per vector. Values that differ from
   * one document to the next (ids, keys, timestamps) are not interned: they would fill the table.
   */
  private compact(original: Record<string, unknown>): Record<string, unknown> {
    const payload = { ...original };
    for (const [key, value] of Object.entries(payload)) {
      if (typeof value !== 'string' || value.length > 64 || !SHARED_PAYLOAD_KEYS.has(key)) continue;
      const shared = this.interned.get(value);
      if (shared !== undefined) payload[key] = shared;
      else if (this.interned.size < 10_000) this.interned.set(value, value);
    }
    return payload;
  }
}

/** Top-level payload keys whose values many vectors of an index share. */
const SHARED_PAYLOAD_KEYS = new Set(['organization_id', 'namespace_id', 'collection_id', 'owner_principal', 'source_collection_id']);

function normalize(v: Float32Array): void {
  let sum = 0;
  for (let i = 0; i < v.length; i++) sum += v[i]! * v[i]!;
  const norm = Math.sqrt(sum);
  if (norm > 0) for (let i = 0; i < v.length; i++) v[i] = v[i]! / norm;
}

function compareIds(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

function sameValues(a: Float32Array, b: Float32Array): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}
