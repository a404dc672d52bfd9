/**
 * VectorIndex: the one interface every vector engine implements (pgvector in the database, LanceDB on
 * disk, Milvus as a server). Engines pass the same contract suite (test/kernel/vectors/contract.ts), so callers never care
 * which one runs. Filters are the shared filter language (kernel/filters/filter.ts); their fields are
 * paths into the record's payload (`metadata.category` reads `payload.metadata.category`).
 */
import { InputError } from '../errors.js';
import type { ParsedFilter } from '../filters/filter.js';

export type Distance = 'cosine' | 'l2' | 'dot';
export const DISTANCES: readonly Distance[] = ['cosine', 'l2', 'dot'];

export interface IndexSpec {
  /** e.g. `v_col_abc__text_embedding`; `[a-z0-9_]{1,63}` (used as a table name by both engines). */
  name: string;
  dims: number;
  distance: Distance;
}

export interface VectorRecord {
  id: string;
  vector: number[] | Float32Array;
  /** Filterable fields, e.g. organization_id, namespace_id, document_id, metadata. */
  payload: Record<string, unknown>;
}

export interface VectorQuery {
  vector: number[] | Float32Array;
  limit: number;
  filter?: ParsedFilter;
  /**
   * False: the caller reads only ids and scores (it loads the documents itself), so an engine may answer
   * with empty payloads, sparing their copy (the graph thread's hits cross a thread boundary). Default true.
   */
  payloads?: boolean;
}

export interface VectorHit {
  id: string;
  /** Higher is more similar: cosine similarity, negative L2 distance, or the dot product. */
  score: number;
  payload: Record<string, unknown>;
}

export type VectorEngine = 'pgvector' | 'lancedb' | 'milvus';
/** A durable engine, or the in-process HNSW index in front of one (hnsw-memory.ts). */
export type VectorIndexKind = VectorEngine | `memory+${VectorEngine}`;

export interface VectorIndex {
  readonly engine: VectorIndexKind;
  /** Idempotent; a different dims or distance for an existing name is a ConflictError. */
  ensureIndex(spec: IndexSpec): Promise<void>;
  /** Idempotent by id: re-upserting replaces, never duplicates. */
  upsert(name: string, records: VectorRecord[]): Promise<void>;
  delete(name: string, ids: string[]): Promise<number>;
  deleteWhere(name: string, filter: ParsedFilter): Promise<number>;
  search(name: string, query: VectorQuery): Promise<VectorHit[]>;
  get(name: string, ids: string[]): Promise<VectorRecord[]>;
  count(name: string, filter?: ParsedFilter): Promise<number>;
  /** Idempotent: dropping an unknown index is not an error. */
  dropIndex(name: string): Promise<void>;
  ping(): Promise<void>;
  close(): Promise<void>;
}

const NAME = /^[a-z0-9_]{1,63}$/;

/** Names become table names in both engines, so they are checked before they reach any SQL. */
export function checkIndexName(name: string): string {
  if (typeof name !== 'string' || !NAME.test(name)) {
    throw new InputError(`invalid vector index name '${String(name)}' (expected [a-z0-9_]{1,63})`, { name });
  }
  return name;
}

export function checkSpec(spec: IndexSpec): IndexSpec {
  checkIndexName(spec.name);
  if (!Number.isInteger(spec.dims) || spec.dims < 1 || spec.dims > 16_000) {
    throw new InputError(`vector dims must be an integer in 1..16000, got ${spec.dims}`, { dims: spec.dims });
  }
  if (!DISTANCES.includes(spec.distance)) {
    throw new InputError(`unknown distance '${String(spec.distance)}'`, { distance: spec.distance });
  }
  return spec;
}

/** Checks a vector against the index's dims and returns it as plain finite numbers. */
export function checkVector(vector: number[] | Float32Array, dims: number, id?: string): number[] {
  checkFloats(vector, dims, id);
  return Array.from(vector);
}

/**
 * `checkVector` answered as a Float32Array (the caller's own when it is one, not copied), for engines that
 * take float32 as it is: a batch's vectors are not turned into arrays of numbers and back on their way to
 * the store.
 */
export function checkFloats(vector: number[] | Float32Array, dims: number, id?: string): Float32Array {
  if (vector.length !== dims) {
    throw new InputError(`vector has ${vector.length} dimensions, the index expects ${dims}`, { ...(id ? { id } : {}), dims });
  }
  if (!(vector instanceof Float32Array) && !vector.every((v) => typeof v === 'number')) {
    throw new InputError('vector values must be finite numbers', id ? { id } : undefined);
  }
  const floats = vector instanceof Float32Array ? vector : Float32Array.from(vector);
  // Checked as float32: a number too large for one is no more storable than Infinity.
  for (let i = 0; i < floats.length; i++) {
    if (!Number.isFinite(floats[i]!)) throw new InputError('vector values must be finite numbers', id ? { id } : undefined);
  }
  return floats;
}

export function checkLimit(limit: number): number {
  if (!Number.isInteger(limit) || limit < 1 || limit > 10_000) {
    throw new InputError(`search limit must be an integer in 1..10000, got ${limit}`, { limit });
  }
  return limit;
}

/** Last write wins when a batch repeats an id (both engines refuse a duplicate key within one statement). */
export function dedupeById<T extends { id: string }>(records: readonly T[]): T[] {
  const byId = new Map<string, T>();
  for (const r of records) {
    if (typeof r.id !== 'string' || r.id.length === 0) throw new InputError('every vector record needs a non-empty string id');
    byId.delete(r.id);
    byId.set(r.id, r);
  }
  return [...byId.values()];
}
