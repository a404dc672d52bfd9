/**
 * The seams batch processing crosses between resource plugins. Plugins never import each other, so the
 * buckets plugin publishes its objects through `ObjectCatalog`, the collections plugin its collection
 * graph and document writing through `CollectionProcessor`, and the batches plugin drives both through
 * these kernel interfaces (bound in the container as tokens of kernel/tokens.ts).
 */

/** A stored blob of an object, as processing reads it. */
export interface SourceObjectBlob {
  property: string;
  storage_key: string;
  content_type: string;
  size_bytes: number;
  filename: string | null;
}

/** A bucket object as processing sees it: its key, metadata and blobs. */
export interface SourceObject {
  object_id: string;
  bucket_id: string;
  namespace_id: string;
  key: string;
  metadata: Record<string, unknown>;
  blobs: SourceObjectBlob[];
  /** Who created it (the creating key's user email). */
  created_by: string | null;
  /** The principal who owns it; documents made from it inherit it. */
  owner_principal: string | null;
  created_at: Date;
}

export interface ObjectCatalog {
  /** The objects of one bucket among `objectIds` (unknown or foreign ids are simply absent). */
  find(organizationId: string, bucketId: string, objectIds: readonly string[]): Promise<SourceObject[]>;
}

/** A typed processing error as batches report it (TierTaskInfo.errors[]). */
export interface ProcessingError {
  error_type: 'validation' | 'dependency' | 'missing_input' | 'extraction' | 'internal';
  message: string;
  component: string | null;
  stage: 'fetch' | 'filter' | 'extract' | 'write' | null;
  traceback: string | null;
  timestamp: string;
  affected_document_ids: string[];
  affected_count: number;
  recovery_suggestion: string | null;
  metadata: Record<string, unknown>;
}

/** Time spent in one named stage of processing (summed over records). */
export interface StageSample {
  total_ms: number;
  max_ms: number;
  count: number;
}

export interface ExtractorOutcome {
  extractor_type: string;
  documents_written: number;
  duration_ms: number;
  errors: ProcessingError[];
}

/** What processing a set of source records into one collection did. Counters add up across chunks. */
export interface ProcessingOutcome {
  source_documents_fetched: number;
  documents_after_source_filter: number;
  documents_missing_input_fields: number;
  documents_submitted_to_engine: number;
  documents_written: number;
  /** Source records that failed (their ids are in the errors). */
  records_failed: number;
  extractors: ExtractorOutcome[];
  errors: ProcessingError[];
  stages: Record<string, StageSample>;
}

export interface ProcessRequest {
  organizationId: string;
  collectionId: string;
  /** Tier 0: bucket object ids; later tiers: document ids of the source collection. */
  recordIds: readonly string[];
  processingTier: number;
  /** Why the work runs, for logs and events (e.g. the batch id). */
  origin: string;
}

export interface CollectionProcessor {
  /**
   * The collections a bucket feeds, tier by tier: tier 0 reads the bucket, tier N reads a collection of
   * tier N−1. Disabled collections and everything downstream of them are left out. A cycle is a ConflictError.
   */
  plan(organizationId: string, bucketId: string): Promise<{ tiers: string[][]; sources: Record<string, string | null> }>;
  /**
   * The source records of a collection for one batch: tier 0 the given objects (as ids; filtering happens
   * in `process`), later tiers the ids of the source collection's documents made from those objects.
   */
  sourceRecords(organizationId: string, collectionId: string, rootObjectIds: readonly string[]): Promise<string[]>;
  /**
   * Runs the collection's extractors over the records and writes their documents and vectors. Writes are
   * idempotent (keyed by source record, extractor and draft key), so running the same records twice never
   * duplicates. A record that cannot be processed is reported in the outcome, not thrown; a failure of a
   * dependency (inference, storage, database) throws so the task is retried.
   */
  process(request: ProcessRequest, signal?: AbortSignal): Promise<ProcessingOutcome>;
  /** The vector indexes a collection's features are written to, by output field name. */
  featureIndexes(organizationId: string, collectionId: string): Promise<Array<{ feature: string; index: string }>>;
}

export function emptyOutcome(): ProcessingOutcome {
  return {
    source_documents_fetched: 0,
    documents_after_source_filter: 0,
    documents_missing_input_fields: 0,
    documents_submitted_to_engine: 0,
    documents_written: 0,
    records_failed: 0,
    extractors: [],
    errors: [],
    stages: {},
  };
}
