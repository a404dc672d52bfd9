/**
 * Picks and builds the vector engine. pgvector whenever the database has it (one store, transactional
 * with the documents); LanceDB otherwise, e.g. on a PostgreSQL server without the extension. Milvus
 * only when asked for (VECTOR_ENGINE=milvus with MILVUS_ADDRESS).
 */
import type { Logger } from 'pino';
import { InputError } from '../errors.js';
import type { Database, DatabaseNotices } from '../db/database.js';
import { DEFAULT_MAX_VECTORS, HnswMemoryIndex, type DurableVectorIndex } from './hnsw-memory.js';
import type { MemoryGraphOptions } from './memory-graph.js';
import { LanceDbIndex, type LanceDbOptions } from './lancedb.js';
import { MilvusIndex, type MilvusSettings } from './milvus.js';
import { PgvectorIndex, type PgvectorOptions } from './pgvector.js';
import type { VectorEngine, VectorIndex } from './vector-index.js';

export * from './vector-index.js';
export { LanceDbIndex } from './lancedb.js';
export { MilvusIndex, type MilvusSettings } from './milvus.js';
export { PgvectorIndex, payloadFieldResolver } from './pgvector.js';
export { HnswMemoryIndex, type DurableVectorIndex, type HnswMemoryOptions } from './hnsw-memory.js';

export function chooseEngine(options: { requested?: VectorEngine | undefined; hasPgvector: boolean }): VectorEngine {
  if (options.requested === 'pgvector' && !options.hasPgvector) {
    throw new InputError('VECTOR_ENGINE=pgvector, but the database has no pgvector extension (use lancedb)');
  }
  return options.requested ?? (options.hasPgvector ? 'pgvector' : 'lancedb');
}

export interface CreateVectorIndexOptions {
  engine: VectorEngine;
  /** Required for pgvector. */
  db?: Database;
  /** Folder or URI of the LanceDB data; required for lancedb. */
  lanceDir?: string;
  pgvector?: PgvectorOptions;
  lancedb?: Omit<LanceDbOptions, 'uri'>;
  /** Required for milvus. */
  milvus?: MilvusSettings | undefined;
  /**
   * Put the in-process HNSW index (hnsw-memory.ts) in front of the engine; needs the database for its
   * change log. `lockDuringWrites`: true when several processes may share the database (PostgreSQL).
   */
  memory?: {
    db: Database; lockDuringWrites: boolean; sharedDatabase?: boolean; log?: Logger; maxVectors?: number; buildInBackgroundAbove?: number;
    notices?: DatabaseNotices; keepGraphs?: boolean; graphThread?: boolean;
    graph?: Partial<MemoryGraphOptions>;
  };
}

export function createVectorIndex(options: CreateVectorIndexOptions): VectorIndex {
  const durable = createDurableIndex(options);
  const memory = options.memory;
  if (!memory) return durable;
  return new HnswMemoryIndex(durable, memory.db, {
    lockDuringWrites: memory.lockDuringWrites,
    ...(memory.sharedDatabase !== undefined ? { sharedDatabase: memory.sharedDatabase } : {}),
    ...(memory.log ? { log: memory.log } : {}),
    ...(memory.maxVectors !== undefined ? { maxVectors: memory.maxVectors } : {}),
    ...(memory.buildInBackgroundAbove !== undefined ? { buildInBackgroundAbove: memory.buildInBackgroundAbove } : {}),
    ...(memory.graph ? { graph: memory.graph } : {}),
    ...(memory.notices ? { notices: memory.notices } : {}),
    ...(memory.keepGraphs !== undefined ? { keepGraphs: memory.keepGraphs } : {}),
    ...(memory.graphThread !== undefined ? { graphThread: memory.graphThread } : {}),
  });
}

function createDurableIndex(options: CreateVectorIndexOptions): DurableVectorIndex {
  if (options.engine === 'pgvector') {
    if (!options.db) throw new InputError('the pgvector engine needs a database');
    // In front of PGlite (one process, every write through it), the in-process index answers every search it
    // can hold: pgvector's own HNSW is built only for an index past that memory budget.
    const memoryFronted = options.memory && options.memory.sharedDatabase === false;
    return new PgvectorIndex(options.db, {
      ...(memoryFronted ? { annIndexAbove: options.memory!.maxVectors ?? DEFAULT_MAX_VECTORS } : {}),
      ...options.pgvector,
    });
  }
  if (options.engine === 'milvus') {
    if (!options.milvus) throw new InputError('VECTOR_ENGINE=milvus needs MILVUS_ADDRESS (host:port of the Milvus server, e.g. 127.0.0.1:19530)');
    return new MilvusIndex(options.milvus);
  }
  if (!options.lanceDir) throw new InputError('the lancedb engine needs a data folder (lanceDir)');
  return new LanceDbIndex({ ...options.lancedb, uri: options.lanceDir });
}
