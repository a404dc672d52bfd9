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
  /**
   * The content of a small inline text or JSON blob, kept with the object: processing reads it from here,
   * not from the blob store, whose file for `storage_key` may not exist yet.
   */
  inline_text?: string;
  md5?: string;
  sha256?: string;
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
  /** The owner principal of each of `objectIds` that is an object of the bucket (unknown or foreign ids are absent). */
  owners(organizationId: string, bucketId: string, objectIds: readonly string[]): Promise<Map<string, string | null>>;
  /**
   * The fields a record of this bucket can have (its schema's metadata and blob properties, `object_id`
   * and `key`), or null when the bucket has no schema and its objects may have any field.
   */
  fieldsOf(organizationId: string, bucketId: string): Promise<string[] | null>;
}

/** A typed processing error as batches report it (TierTaskInfo.errors[]). */
export interface ProcessingError {
  error_type: 'validation' | 'dependency' | 'missing_input' | 'extraction' | 'internal';
  message: string;
  /** The extractor (or part) that failed. */
  component: string | null;
  /** The collection whose processing failed (null where no collection is known). */
  collection_id: string | null;
  collection_name: string | null;
  stage: 'fetch' | 'filter' | 'extract' | 'write' | null;
  traceback: string | null;
  timestamp: string;
  affected_document_ids: string[];
  affected_count: number;
  recovery_suggestion: string | null;
  metadata: Record<string, unknown>;
}

/** Time spent in one named stage of processing (summed over records), and when the stage was first and last busy. */
export interface StageSample {
  total_ms: number;
  max_ms: number;
  count: number;
  /** Epoch ms of the first start and the last end: with them, stages of overlapping chunks give a wall time. */
  first_started_ms?: number;
  last_ended_ms?: number;
}

/**
 * Why a record was skipped rather than processed: its input is a type the extractor does not accept
 * (an image for text_extractor), or it has no field the extractor reads. A skip is not a failure.
 */
export type SkipReason = 'unsupported_type' | 'no_input_field';

/**
 * What happened to one source record in one collection. `written`: every extractor ran (its documents
 * were written; possibly none); `skipped`: no extractor could read it; `filtered`: the source filter or
 * prefix left it out; `failed`: an extractor failed on it (nothing of it was written); `canceled`: the
 * batch was canceled before every extractor ran on it (nothing of it was written); `gone`: it no longer
 * exists. A record's documents are written only when all of the collection's extractors succeeded on it,
 * so running a failed or canceled record again never counts a document twice.
 */
export interface RecordResult {
  result: 'written' | 'skipped' | 'filtered' | 'failed' | 'canceled' | 'gone';
  documents: number;
  /** It reached at least one extractor. */
  submitted: boolean;
  skip_reason?: SkipReason;
}

export interface ExtractorOutcome {
  extractor_type: string;
  documents_written: number;
  /** Records this extractor could not read (it ran on the others). */
  documents_skipped: number;
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
  /** Source records no extractor of the collection could read, and why (not failures). */
  documents_skipped: number;
  skipped_reasons: Partial<Record<SkipReason, number>>;
  /** Source records that failed (their ids are in the errors). */
  records_failed: number;
  /** Source records left unprocessed because the work was canceled (see RecordResult). */
  records_canceled: number;
  /** Every requested record's result, by record id: what retries and counters across runs are computed from. */
  records: Record<string, RecordResult>;
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
   * dependency (inference, storage, database) throws so the task is retried. When `signal` aborts, no
   * further record is started; what finished is written and reported, the rest is `canceled`.
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
    documents_skipped: 0,
    skipped_reasons: {},
    records_failed: 0,
    records_canceled: 0,
    records: {},
    extractors: [],
    errors: [],
    stages: {},
  };
}
