/**
 * Turns source records into a collection's documents: fetch the records, apply the collection's source
 * filter, run each feature extractor (inference happens in the gRPC workers), then write documents and
 * their feature vectors. Everything written is keyed by (source record, extractor, draft key), so running
 * the same records again — a redelivered task, a retried batch — updates in place and never duplicates.
 *
 * A record that cannot be processed (bad input, missing field, an extractor failing on it) becomes a typed
 * error in the outcome; a dependency failing (inference unreachable, storage, database) throws, so the
 * task is retried as a whole.
 */
import { Readable } from 'node:stream';
import type { Knex } from 'knex';
import type { Logger } from 'pino';
import { BlobArtifactWriter, artifactPrefix } from '../../../../kernel/blobs/artifacts.js';
import { readBlobBytes, type BlobInfo, type BlobRead, type BlobStore, type ByteRange } from '../../../../kernel/blobs/blob-store.js';
import { ApiError, InputError, NotFoundError, RequestValidationError, ServiceUnavailableError } from '../../../../kernel/errors.js';
import type { Announcer } from '../../../../kernel/events/announcer.js';
import { matchesFilter, parseFilter } from '../../../../kernel/filters/filter.js';
import type { InferenceClient } from '../../../../kernel/inference/client.js';
import { ProcessSlots } from '../../../../kernel/media/process-slots.js';
import type { DocumentDraft, ExtractorContext, ExtractorPlugin, PluginRegistry } from '../../../../kernel/plugins.js';
import {
  emptyOutcome,
  type CollectionProcessor,
  type ExtractorOutcome,
  type ObjectCatalog,
  type ProcessingError,
  type ProcessingOutcome,
  type ProcessRequest,
  type SkipReason,
} from '../../../../kernel/processing.js';
import { featureIndexName } from '../../../../kernel/vectors/naming.js';
import type { VectorIndex, VectorRecord } from '../../../../kernel/vectors/vector-index.js';
import type { DocumentChanges } from '../document-changes.js';
import type { DocumentRow, DocumentStore, DocumentWrite } from '../document-store.js';
import type { CollectionRow, CollectionStore } from '../store.js';
import { vectorPayload } from '../vector-payload.js';
import { resolveTiers, type PlanNode } from './plan.js';
import { mapInputs, recordFromDocument, recordFromObject, type InlineBlob, type SourceRecord } from './records.js';
import { StageClock } from './stage-clock.js';

export interface DocumentProcessorDeps {
  db: Knex;
  collections: CollectionStore;
  documents: DocumentStore;
  plugins: PluginRegistry;
  blobs: BlobStore;
  vectors: VectorIndex;
  announcer: Announcer;
  /** Told of every committed write (retriever caches, `document.*` events); absent in tests of processing alone. */
  changes?: DocumentChanges;
  log: Logger;
  /** Bound by other parts of the kernel after this plugin's services: resolved when first needed. */
  objects: () => ObjectCatalog;
  inference: () => InferenceClient;
  /** Records of one group extracted at the same time (their inference calls overlap); by default 32, or 4 when an input is large. */
  concurrency?: number;
  /** ffmpeg processes this processor's extractors run at once, all records and tasks together (default: unbounded). */
  mediaProcesses?: number;
}

type ExtractorConfig = CollectionRow['feature_extractors'][number];

/** One extractor's drafts for one record, kept until every extractor ran on the record. */
interface Extracted {
  config: ExtractorConfig;
  extractor: ExtractorPlugin;
  drafts: DocumentDraft[];
  job: ExtractorOutcome;
}

/** One of the collection's extractors, with its outcome summed over the chunk's groups. */
interface ExtractorRun {
  config: ExtractorConfig;
  extractor: ExtractorPlugin;
  job: ExtractorOutcome;
}

/** How far one record of a group got: extractors run, their drafts, why any skipped it. */
interface RecordProgress {
  ran: number;
  extracted: Extracted[];
  skips: SkipReason[];
  submitted: boolean;
}

interface PendingWrite {
  write: DocumentWrite;
  features: Record<string, { vector: number[]; distance: 'cosine' | 'l2' | 'dot' }>;
}

const SUGGESTIONS: Record<ProcessingError['error_type'], string> = {
  validation: 'Fix or replace the affected inputs (see the message), then retry the batch.',
  missing_input: "Give the affected records the field the extractor reads, or set the collection's input_mapping, then retry the batch.",
  dependency: 'A service the extractor needs was unavailable; check GET /v1/health, then retry the batch.',
  extraction: 'The extractor failed on these inputs; check the message and the inputs, then retry the batch.',
  internal: 'An internal error stopped processing; retry the batch, and report it if it happens again.',
};

export class DocumentProcessor implements CollectionProcessor {
  private readonly ensured = new Set<string>();

  /** One bound for every record and task this processor runs (they share the process's cores). */
  private readonly mediaProcesses: ProcessSlots | undefined;

  constructor(private readonly deps: DocumentProcessorDeps) {
    this.mediaProcesses = deps.mediaProcesses !== undefined ? new ProcessSlots(deps.mediaProcesses) : undefined;
  }

  async plan(organizationId: string, bucketId: string) {
    const rows = (await this.deps.db('collections')
      .where({ organization_id: organizationId })
      .select('collection_id', 'enabled', 'source')) as Array<Pick<CollectionRow, 'collection_id' | 'enabled' | 'source'>>;
    const nodes: PlanNode[] = rows.map((r) => ({
      collection_id: r.collection_id,
      enabled: r.enabled,
      source_bucket_id: r.source.type === 'bucket' ? (r.source.bucket_id ?? null) : null,
      source_collection_id: r.source.type === 'collection' ? (r.source.collection_id ?? null) : null,
    }));
    return resolveTiers(bucketId, nodes);
  }

  async sourceRecords(organizationId: string, collectionId: string, rootObjectIds: readonly string[]): Promise<string[]> {
    const collection = await this.collection(organizationId, collectionId);
    if (collection.source.type === 'bucket') return [...rootObjectIds];
    return this.deps.documents.idsByRoots(organizationId, collection.source.collection_id!, rootObjectIds);
  }

  async process(request: ProcessRequest, signal?: AbortSignal): Promise<ProcessingOutcome> {
    const outcome = emptyOutcome();
    const clock = new StageClock();
    const collection = await this.collection(request.organizationId, request.collectionId);

    const records = await clock.time('fetch', () => this.fetch(collection, request, outcome));
    outcome.source_documents_fetched = records.length;

    const passing = clock.timeSync('filter', () => this.filter(collection, records));
    outcome.documents_after_source_filter = passing.length;
    const passed = new Set(passing.map((r) => r.id));
    for (const r of records) if (!passed.has(r.id)) outcome.records[r.id] = { result: 'filtered', documents: 0, submitted: false };

    // Small inline blobs came with their objects: extractors read them from memory, never from the blob store.
    const inline = new Map<string, InlineBlob>();
    for (const r of passing) for (const [key, blob] of r.inlineBlobs) inline.set(key, blob);

    const failed = new Set<string>();
    const extractors: ExtractorRun[] = [];
    for (const config of collection.feature_extractors) {
      const extractor = this.deps.plugins.extractors.get(config.feature_extractor_name);
      if (!extractor) {
        outcome.errors.push(
          this.error(collection, 'internal', `extractor '${config.feature_extractor_name}' is not registered in this deployment`, config.feature_extractor_name, 'extract', passing.map((r) => r.id)),
        );
        for (const r of passing) failed.add(r.id);
        continue;
      }
      extractors.push({ config, extractor, job: { extractor_type: extractor.name, documents_written: 0, documents_skipped: 0, duration_ms: 0, errors: [] } });
    }

    // A group of records is extracted while the previous group's documents are written: the models and the
    // database work at the same time instead of in turn. One write at a time, in group order.
    let written = 0;
    const writtenIds: WrittenIds = { created: [], updated: [] };
    let writing: Promise<{ count: number; error?: unknown }> | undefined;
    const settleWrite = async (): Promise<void> => {
      const done = await writing;
      writing = undefined;
      if (done?.error !== undefined) throw done.error;
      written += done?.count ?? 0;
    };
    try {
      for (let first = 0; first < passing.length; first += PIPELINE_GROUP) {
        const group = passing.slice(first, first + PIPELINE_GROUP);
        const progress = await this.extractGroup(collection, group, extractors, inline, failed, outcome, clock, signal);
        const settled = this.settleGroup(collection, group, progress, failed, outcome, request.processingTier);
        await settleWrite();
        // Never left rejected while the next group is extracted: settleWrite rethrows the error.
        writing = this.write(clock, collection, settled.pending, settled.records, inline, writtenIds).then(
          (count) => ({ count }),
          (error: unknown) => ({ count: 0, error }),
        );
      }
      await settleWrite();
      await this.announce(collection, writtenIds);
    } catch (err) {
      // The task is retried as a whole: a write still running finishes first, so none overlaps the retry.
      // What was written is announced all the same (the retry may never come).
      await writing;
      await this.announce(collection, writtenIds).catch((announceErr: unknown) =>
        this.deps.log.warn({ err: announceErr, collection_id: collection.collection_id }, 'could not announce the documents written before a failure'),
      );
      throw err;
    }

    outcome.extractors = extractors.map((e) => e.job);
    const results = Object.values(outcome.records);
    outcome.documents_skipped = results.filter((r) => r.result === 'skipped').length;
    outcome.documents_missing_input_fields = outcome.skipped_reasons.no_input_field ?? 0;
    outcome.documents_submitted_to_engine = results.filter((r) => r.submitted).length;
    outcome.records_canceled = results.filter((r) => r.result === 'canceled').length;
    outcome.documents_written = written;
    outcome.records_failed = results.filter((r) => r.result === 'failed' || r.result === 'gone').length;
    outcome.stages = clock.samples();
    await this.announceFailures(collection, outcome.errors);
    return outcome;
  }

  /** Runs every extractor over one group of records; per record, what each made of it. */
  private async extractGroup(
    collection: CollectionRow,
    group: SourceRecord[],
    extractors: readonly ExtractorRun[],
    inline: ReadonlyMap<string, InlineBlob>,
    failed: Set<string>,
    outcome: ProcessingOutcome,
    clock: StageClock,
    signal: AbortSignal | undefined,
  ): Promise<Map<string, RecordProgress>> {
    // Per record: what each extractor made of it. Its documents are written only once every extractor ran on it.
    const progress = new Map(group.map((r): [string, RecordProgress] => [r.id, { ran: 0, extracted: [], skips: [], submitted: false }]));
    for (const { config, extractor, job } of extractors) {
      if (signal?.aborted) break;
      const started = Date.now();
      const errorsBefore = outcome.errors.length;
      const mappedInputs = new Map(group.map((r) => [r.id, mapInputs(extractor, r, config.input_mapping as Record<string, string> | undefined)]));
      // The group's small input blobs read together first: the records then reach the model in the same
      // turns, so their calls coalesce into a few large requests instead of trickling in one by one.
      const inputs = [...mappedInputs.values()].filter((m) => !m.skip);
      const prefetched = await clock.time('fetch:blobs', () => this.prefetchBlobs(inputs, inline));
      const small = inputs.every((m) => inputBytes(m.fields) <= SMALL_INPUT_BYTES);
      const lanes = this.deps.concurrency ?? (small ? SMALL_INPUT_LANES : LARGE_INPUT_LANES);
      await this.forEach(group, lanes, async (record) => {
        if (failed.has(record.id) || signal?.aborted) return;
        const state = progress.get(record.id)!;
        const mapped = mappedInputs.get(record.id)!;
        if (mapped.skip) {
          state.skips.push(mapped.skip);
          state.ran += 1;
          job.documents_skipped += 1;
          return;
        }
        state.submitted = true;
        const drafts = await clock.time(`extract:${extractor.name}`, () => this.extract(extractor, collection, record, config, mapped.fields, mapped.mimeType, prefetched)).catch(
          (err: unknown) => {
            if (isDependencyFailure(err)) throw err;
            failed.add(record.id);
            const type = err instanceof InputError || err instanceof RequestValidationError || err instanceof NotFoundError ? 'validation' : 'extraction';
            this.addError(outcome, collection, type, messageOf(err), extractor.name, 'extract', record.id);
            return undefined;
          },
        );
        prefetched.forget(mapped.fields);
        if (!drafts) return;
        state.ran += 1;
        state.extracted.push({ config, extractor, drafts, job });
      });
      job.duration_ms += Date.now() - started;
      // addError merges a repeated error into the one an earlier group added: that one is listed already.
      for (const error of outcome.errors.slice(errorsBefore)) if (!job.errors.includes(error)) job.errors.push(error);
    }
    return progress;
  }

  /** Each record of the group gets its result; returns the documents of those every extractor ran on, and those records. */
  private settleGroup(
    collection: CollectionRow,
    group: SourceRecord[],
    progress: ReadonlyMap<string, RecordProgress>,
    failed: ReadonlySet<string>,
    outcome: ProcessingOutcome,
    tier: number,
  ): { pending: PendingWrite[]; records: SourceRecord[] } {
    const pending = new Map<string, PendingWrite>();
    const extractorCount = collection.feature_extractors.length;
    const writtenRecords: SourceRecord[] = [];
    for (const record of group) {
      const state = progress.get(record.id)!;
      if (failed.has(record.id)) {
        outcome.records[record.id] = { result: 'failed', documents: 0, submitted: state.submitted };
      } else if (state.ran < extractorCount) {
        outcome.records[record.id] = { result: 'canceled', documents: 0, submitted: state.submitted };
      } else if (extractorCount > 0 && state.extracted.length === 0) {
        const reason: SkipReason = state.skips.includes('unsupported_type') ? 'unsupported_type' : 'no_input_field';
        outcome.records[record.id] = { result: 'skipped', documents: 0, submitted: false, skip_reason: reason };
        outcome.skipped_reasons[reason] = (outcome.skipped_reasons[reason] ?? 0) + 1;
      } else {
        let documents = 0;
        for (const { config, extractor, drafts, job } of state.extracted) {
          const made = this.stage(pending, collection, config, extractor, record, drafts, tier);
          job.documents_written += made;
          documents += made;
        }
        outcome.records[record.id] = { result: 'written', documents, submitted: state.submitted };
        writtenRecords.push(record);
      }
    }
    return { pending: [...pending.values()], records: writtenRecords };
  }

  async featureIndexes(organizationId: string, collectionId: string): Promise<Array<{ feature: string; index: string }>> {
    const collection = await this.collection(organizationId, collectionId);
    return this.featuresOf(collection).map((feature) => ({ feature, index: featureIndexName(collectionId, feature) }));
  }

  /** Removes deleted documents' vectors from every feature index of their collection. */
  async forgetDocuments(collection: CollectionRow, documentIds: readonly string[]): Promise<void> {
    if (documentIds.length === 0) return;
    for (const feature of this.featuresOf(collection)) await this.deleteVectors(featureIndexName(collection.collection_id, feature), documentIds);
  }

  private async deleteVectors(index: string, documentIds: readonly string[]): Promise<void> {
    try {
      await this.deps.vectors.delete(index, [...documentIds]);
    } catch (err) {
      // A feature never written (e.g. OCR text of a collection with OCR off) has no index: nothing to forget.
      if (!(err instanceof NotFoundError)) throw err;
    }
  }

  /** A deleted collection's vector indexes and derived files (its documents go with its row). */
  async forgetCollection(collection: CollectionRow): Promise<void> {
    for (const feature of this.featuresOf(collection)) {
      const name = featureIndexName(collection.collection_id, feature);
      await this.deps.vectors.dropIndex(name);
      this.ensured.delete(name);
    }
    await this.deps.blobs.deletePrefix(artifactPrefix(collection.organization_id, collection.collection_id));
    await this.deps.documents.forgetCollection(collection.collection_id);
  }

  /** The output fields this collection's own extractors write vectors to (after output_mapping). */
  private featuresOf(collection: CollectionRow): string[] {
    return collection.feature_extractors.flatMap((config) => {
      const extractor = this.deps.plugins.extractors.get(config.feature_extractor_name);
      const mapping = config.output_mapping as Record<string, string> | undefined;
      return (extractor?.features ?? []).map((f) => mapping?.[f.name] ?? f.name);
    });
  }

  private async collection(organizationId: string, collectionId: string): Promise<CollectionRow> {
    const row = await this.deps.collections.findById(organizationId, collectionId);
    if (!row) throw new NotFoundError(`collection ${collectionId} no longer exists`, { collection_id: collectionId });
    return row;
  }

  private async fetch(collection: CollectionRow, request: ProcessRequest, outcome: ProcessingOutcome): Promise<SourceRecord[]> {
    const ids = request.recordIds;
    let records: SourceRecord[];
    if (collection.source.type === 'bucket') {
      const objects = await this.deps.objects().find(request.organizationId, collection.source.bucket_id!, ids);
      records = objects.map(recordFromObject);
    } else {
      const docs: DocumentRow[] = await this.deps.documents.findMany(request.organizationId, collection.source.collection_id!, ids);
      records = docs.map(recordFromDocument);
    }
    const found = new Set(records.map((r) => r.id));
    const gone = ids.filter((id) => !found.has(id));
    if (gone.length > 0) {
      outcome.errors.push(this.error(collection, 'validation', `${gone.length} source record(s) no longer exist (deleted after the batch was submitted)`, null, 'fetch', gone));
      for (const id of gone) outcome.records[id] = { result: 'gone', documents: 0, submitted: false };
    }
    const order = new Map(ids.map((id, i) => [id, i]));
    return records.sort((a, b) => order.get(a.id)! - order.get(b.id)!);
  }

  private filter(collection: CollectionRow, records: SourceRecord[]): SourceRecord[] {
    const prefix = collection.source.type === 'bucket' ? collection.source.prefix_key : undefined;
    const filter = collection.source.filters ? parseFilter(collection.source.filters) : undefined;
    return records.filter((r) => (!prefix || (r.key ?? '').startsWith(prefix)) && (!filter || matchesFilter(filter, r.filterView)));
  }

  private async extract(
    extractor: ExtractorPlugin,
    collection: CollectionRow,
    record: SourceRecord,
    config: ExtractorConfig,
    fields: Record<string, unknown>,
    mimeType: string,
    prefetched: PrefetchedBlobs,
  ): Promise<DocumentDraft[]> {
    const drafts: DocumentDraft[] = [];
    const parentLog = this.deps.log;
    let childLog: Logger | undefined;
    const ctx: ExtractorContext = {
      organizationId: collection.organization_id,
      namespace: { id: collection.namespace_id, name: '' },
      // A child logger per record costs more than small extractions do: made only if the extractor logs.
      get log() {
        return (childLog ??= parentLog.child({ collection_id: collection.collection_id, record_id: record.id, extractor: extractor.name }));
      },
      inference: this.deps.inference(),
      blobs: prefetched.store,
      artifacts: BlobArtifactWriter.forRecord(this.deps.blobs, collection.organization_id, collection.collection_id, record.id),
      mediaProcesses: this.mediaProcesses,
    };
    const input = { objectId: record.rootObjectId, mimeType, fields, parameters: (config.parameters ?? {}) as Record<string, unknown> };
    for await (const draft of extractor.extract(ctx, input)) drafts.push(draft);
    return drafts;
  }

  /** Queues the drafts' documents; returns how many distinct documents they make. */
  private stage(
    pending: Map<string, PendingWrite>,
    collection: CollectionRow,
    config: ExtractorConfig,
    extractor: ExtractorPlugin,
    record: SourceRecord,
    drafts: DocumentDraft[],
    tier: number,
  ): number {
    const rename = (name: string) => (config.output_mapping as Record<string, string> | undefined)?.[name] ?? name;
    const distance = new Map(extractor.features.map((f) => [f.name, f.distance]));
    const enrich = config.document_output_handling === 'enrich';
    let made = 0;
    for (const draft of enrich ? drafts.slice(0, 1) : drafts) {
      const sourceKey = enrich ? `${record.id}/enriched` : `${record.id}/${extractor.name}/${draft.key}`;
      let entry = pending.get(sourceKey);
      if (!entry) {
        entry = {
          write: {
            organizationId: collection.organization_id,
            namespaceId: collection.namespace_id,
            collectionId: collection.collection_id,
            sourceKey,
            rootObjectId: record.rootObjectId,
            sourceCollectionId: collection.source.type === 'collection' ? (collection.source.collection_id ?? null) : null,
            sourceDocumentId: record.sourceDocumentId,
            processingTier: tier,
            fields: { ...record.inherited },
            ownerPrincipal: record.ownerPrincipal,
            grants: record.grants,
          },
          features: {},
        };
        pending.set(sourceKey, entry);
        made += 1;
      }
      for (const [name, value] of Object.entries(draft.fields)) entry.write.fields[rename(name)] = value;
      for (const [name, vector] of Object.entries(draft.features ?? {})) {
        entry.features[rename(name)] = { vector, distance: distance.get(name) ?? 'cosine' };
      }
    }
    return made;
  }

  /**
   * Documents, then their vectors (timed apart: they are the two halves of the write stage), a slice at a
   * time: each statement stays short, so requests the API serves meanwhile never wait long behind one.
   * `records`: the records whose documents these are (every extractor ran on them).
   */
  private async write(
    clock: StageClock, collection: CollectionRow, pending: PendingWrite[], records: SourceRecord[], inline: ReadonlyMap<string, InlineBlob>, written: WrittenIds,
  ): Promise<number> {
    const referenced = this.referencedInlineBlobs(pending, inline);
    if (referenced.length > 0) await clock.time('write:blobs', () => this.storeInlineBlobs(referenced));
    const rows: DocumentRow[] = [];
    for (let first = 0; first < pending.length; first += WRITE_SLICE) {
      const slice = pending.slice(first, first + WRITE_SLICE);
      const written = await clock.time('write:documents', () => this.deps.documents.upsertMany(slice.map((p) => p.write)));
      await clock.time('write:vectors', () => this.writeVectors(collection, slice, written));
      rows.push(...written);
    }
    if (collection.feature_extractors.some((c) => c.document_output_handling === 'replace')) {
      await clock.time('write:vectors', () => this.removeStale(collection, pending, records));
    }
    for (const row of rows) (writtenFirstTime(row) ? written.created : written.updated).push(row.document_id);
    return rows.length;
  }

  /**
   * Tells retriever caches and event subscribers what the call wrote (DocumentChanges), once for all its
   * groups: per group, its statements waited behind the other tasks' writes as long as the write itself.
   */
  private async announce(collection: CollectionRow, written: WrittenIds): Promise<void> {
    if (!this.deps.changes) return;
    const { created, updated } = written;
    written.created = [];
    written.updated = [];
    await this.deps.changes.changed(collection, 'document.created', created);
    await this.deps.changes.changed(collection, 'document.updated', updated);
  }

  /**
   * A document that references an inline blob (a passthrough copies its input's reference) is given the
   * blob's file before it exists: a download URL for the reference needs one.
   */
  private referencedInlineBlobs(pending: PendingWrite[], inline: ReadonlyMap<string, InlineBlob>): InlineBlob[] {
    const referenced = new Map<string, InlineBlob>();
    if (inline.size === 0) return [];
    for (const p of pending) {
      for (const value of Object.values(p.write.fields)) {
        const ref = blobReferenceOf(value);
        const blob = ref && inline.get(ref.key);
        if (blob) referenced.set(ref.key, blob);
      }
    }
    return [...referenced.values()];
  }

  private async storeInlineBlobs(blobs: InlineBlob[]): Promise<void> {
    for (const { info, bytes } of blobs) {
      if (!(await this.deps.blobs.head(info.key))) await this.deps.blobs.put(info.key, bytes, { contentType: info.contentType });
    }
  }

  private async writeVectors(collection: CollectionRow, pending: PendingWrite[], rows: DocumentRow[]): Promise<void> {
    const idByKey = new Map(rows.map((r) => [r.source_key, r]));
    const byIndex = new Map<string, { spec: { dims: number; distance: 'cosine' | 'l2' | 'dot' }; records: VectorRecord[] }>();
    for (const p of pending) {
      const row = idByKey.get(p.write.sourceKey)!;
      for (const [feature, { vector, distance }] of Object.entries(p.features)) {
        const name = featureIndexName(collection.collection_id, feature);
        const entry = byIndex.get(name) ?? { spec: { dims: vector.length, distance }, records: [] };
        entry.records.push({ id: row.document_id, vector, payload: vectorPayload(row) });
        byIndex.set(name, entry);
      }
    }
    await this.dropAbsentFeatures(collection, pending, idByKey);
    for (const [name, { spec, records: vectors }] of byIndex) {
      if (!this.ensured.has(name)) {
        await this.deps.vectors.ensureIndex({ name, ...spec });
        this.ensured.add(name);
      }
      try {
        await this.deps.vectors.upsert(name, vectors);
      } catch (err) {
        // Another process may have dropped the index since this one made sure of it: make it again, once.
        if (!(err instanceof NotFoundError)) throw err;
        await this.deps.vectors.ensureIndex({ name, ...spec });
        await this.deps.vectors.upsert(name, vectors);
      }
    }
  }

  /**
   * A document written again without a feature it had (an optional one, absent this time) leaves that
   * feature's index: its old vector would keep it in that feature's searches, with what it held before.
   */
  private async dropAbsentFeatures(collection: CollectionRow, pending: PendingWrite[], rowByKey: ReadonlyMap<string, DocumentRow>): Promise<void> {
    const features = this.featuresOf(collection);
    const absent = new Map<string, string[]>();
    for (const p of pending) {
      const row = rowByKey.get(p.write.sourceKey)!;
      if (writtenFirstTime(row)) continue; // no vector to drop
      for (const feature of features) {
        if (feature in p.features) continue;
        const name = featureIndexName(collection.collection_id, feature);
        const ids = absent.get(name) ?? [];
        ids.push(row.document_id);
        absent.set(name, ids);
      }
    }
    for (const [name, ids] of absent) await this.deleteVectors(name, ids);
  }

  /** `replace`: documents a record produced before but not this time are removed, with their vectors. */
  private async removeStale(collection: CollectionRow, pending: PendingWrite[], records: SourceRecord[]): Promise<void> {
    const keep = pending.map((p) => p.write.sourceKey);
    for (const config of collection.feature_extractors.filter((c) => c.document_output_handling === 'replace')) {
      for (const record of records) {
        const prefix = `${record.id}/${config.feature_extractor_name}/`;
        const removed = await this.deps.documents.deleteStale(collection.collection_id, prefix, keep.filter((k) => k.startsWith(prefix)));
        if (removed.length === 0) continue;
        // From every feature index, whether or not this run wrote to it: a vector left behind would keep
        // a removed document in searches (answered from its payload where payloads stand for documents).
        await this.forgetDocuments(collection, removed);
        await this.deps.changes?.changed(collection, 'document.deleted', removed);
      }
    }
  }

  /**
   * Reads the blobs the mapped inputs point at (small ones, up to a budget per chunk), a few at a time,
   * and returns a blob store serving them from memory (everything else from the real store). Extractors
   * read through it exactly as before; a blob that cannot be read now is left to the extractor's own read,
   * so its error stays the extractor's.
   */
  private async prefetchBlobs(inputs: Array<{ fields: Record<string, unknown> }>, inline: ReadonlyMap<string, InlineBlob>): Promise<PrefetchedBlobs> {
    const wanted = new Map<string, number>();
    const held = new Map<string, { info: BlobInfo; bytes: Buffer }>();
    let budget = PREFETCH_BUDGET_BYTES;
    for (const { fields } of inputs) {
      for (const value of Object.values(fields)) {
        const ref = blobReferenceOf(value);
        if (!ref) continue;
        const inlined = inline.get(ref.key);
        if (inlined) held.set(ref.key, inlined);
        if (inlined || wanted.has(ref.key) || ref.size <= 0 || ref.size > PREFETCH_MAX_BLOB_BYTES || ref.size > budget) continue;
        budget -= ref.size;
        wanted.set(ref.key, ref.size);
      }
    }
    const keys = [...wanted.keys()];
    let next = 0;
    const lane = async () => {
      while (next < keys.length) {
        const key = keys[next++]!;
        try {
          const read = await this.deps.blobs.get(key);
          held.set(key, { info: read.info, bytes: await readBlobBytes(read) });
        } catch {
          // Left to the extractor, which reports it in its own words (or retries the task if it is a dependency failing).
        }
      }
    };
    await Promise.all(Array.from({ length: Math.min(PREFETCH_LANES, keys.length) }, lane));
    return new PrefetchedBlobs(this.deps.blobs, held);
  }

  /** Runs `work` over the records with bounded concurrency; the first thrown error stops the rest and is rethrown. */
  private async forEach(records: SourceRecord[], lanes: number, work: (record: SourceRecord) => Promise<void>): Promise<void> {
    let next = 0;
    let failure: unknown;
    const lane = async () => {
      while (failure === undefined && next < records.length) {
        const record = records[next++]!;
        try {
          await work(record);
        } catch (err) {
          failure ??= err;
        }
      }
    };
    await Promise.all(Array.from({ length: Math.min(lanes, records.length) }, lane));
    if (failure !== undefined) throw failure;
  }

  private addError(
    outcome: ProcessingOutcome,
    collection: CollectionRow,
    type: ProcessingError['error_type'],
    message: string,
    component: string | null,
    stage: ProcessingError['stage'],
    recordId: string,
  ): void {
    const same = outcome.errors.find((e) => e.error_type === type && e.message === message && e.component === component && e.stage === stage);
    if (same) {
      same.affected_document_ids.push(recordId);
      same.affected_count += 1;
      return;
    }
    outcome.errors.push(this.error(collection, type, message, component, stage, [recordId]));
  }

  private error(
    collection: CollectionRow,
    type: ProcessingError['error_type'],
    message: string,
    component: string | null,
    stage: ProcessingError['stage'],
    ids: string[],
  ): ProcessingError {
    return {
      error_type: type,
      message,
      component,
      collection_id: collection.collection_id,
      collection_name: collection.collection_name,
      stage,
      traceback: null,
      timestamp: new Date().toISOString(),
      affected_document_ids: [...ids],
      affected_count: ids.length,
      recovery_suggestion: SUGGESTIONS[type],
      metadata: {},
    };
  }

  private announceFailures(collection: CollectionRow, errors: ProcessingError[]): Promise<void> {
    return this.deps.announcer.announceAll(
      errors.filter((e) => e.stage === 'extract').map((error) => ({
        type: 'extractor.failure',
        organization_id: collection.organization_id,
        data: {
          collection_id: collection.collection_id,
          collection_name: collection.collection_name,
          namespace_id: collection.namespace_id,
          extractor: error.component,
          error_type: error.error_type,
          message: error.message,
          affected_document_ids: error.affected_document_ids.slice(0, 100),
          affected_count: error.affected_count,
        },
      })),
    );
  }
}

/** Documents (and their vectors) written per statement. */
const WRITE_SLICE = 128;
/**
 * Records of a group extracted at the same time. Small inputs (short texts, JSON, small pictures) are cheap
 * to hold and their model calls coalesce: many at once keep the models and the database busy. A group with
 * a large input (video, audio, a PDF, a photo) takes few, so decoded media never piles up in memory nor
 * starts more decoders than the cores can run.
 */
const SMALL_INPUT_LANES = 32;
const LARGE_INPUT_LANES = 4;
const SMALL_INPUT_BYTES = 256 * 1024;
/** Records extracted together before their documents are written (while the next group is extracted). */
const PIPELINE_GROUP = 128;

/** Blobs up to this size are read for a whole chunk before its extraction starts... */
const PREFETCH_MAX_BLOB_BYTES = 1 << 20;
/** ...up to this many bytes a chunk (larger inputs are read by the extractor as it needs them). */
const PREFETCH_BUDGET_BYTES = 64 << 20;
const PREFETCH_LANES = 16;

/** Bytes an extractor reads for one record: its blobs' sizes and its strings' lengths. */
function inputBytes(fields: Record<string, unknown>): number {
  let bytes = 0;
  for (const value of Object.values(fields)) {
    if (typeof value === 'string') bytes += value.length;
    else bytes += blobReferenceOf(value)?.size ?? 0;
  }
  return bytes;
}

function blobReferenceOf(value: unknown): { key: string; size: number } | undefined {
  if (!value || typeof value !== 'object' || Array.isArray(value)) return undefined;
  const { storage_key: key, size_bytes: size } = value as { storage_key?: unknown; size_bytes?: unknown };
  return typeof key === 'string' && key.length > 0 && typeof size === 'number' ? { key, size } : undefined;
}

/** A chunk's prefetched blobs, served as the blob store would (ranges included); the rest passes through. */
class PrefetchedBlobs {
  readonly store: BlobStore;

  constructor(
    real: BlobStore,
    private readonly held: Map<string, { info: BlobInfo; bytes: Buffer }>,
  ) {
    const get = async (key: string, range?: ByteRange): Promise<BlobRead> => {
      const blob = this.held.get(key);
      const size = blob?.bytes.length ?? 0;
      // Anything the real store would judge (empty blobs, ranges past the end) is left to it.
      if (!blob || size === 0 || (range && (range.start < 0 || range.start >= size || (range.end !== undefined && range.end < range.start)))) {
        return real.get(key, range);
      }
      const bytes = range ? blob.bytes.subarray(range.start, range.end === undefined ? size : Math.min(size, range.end + 1)) : blob.bytes;
      // The stream only for a reader that asks for it: most take the bytes (readBlobBytes).
      return {
        info: blob.info,
        bytes,
        get body() {
          return Readable.from([bytes]);
        },
      };
    };
    this.store = new Proxy(real, {
      get: (target, property, receiver) => {
        if (property === 'get') return get;
        if (property === 'head') return (key: string) => (this.held.has(key) ? Promise.resolve(this.held.get(key)!.info) : target.head(key));
        const value: unknown = Reflect.get(target, property, receiver);
        return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
      },
    });
  }

  /** A record's inputs are done with: their bytes need not be held any longer. */
  forget(fields: Record<string, unknown>): void {
    for (const value of Object.values(fields)) {
      const ref = blobReferenceOf(value);
      if (ref) this.held.delete(ref.key);
    }
  }
}

/** An upsert keeps a document's created_at: a row written now for the first time has it equal to updated_at. */
function writtenFirstTime(row: DocumentRow): boolean {
  return new Date(row.created_at).getTime() === new Date(row.updated_at).getTime();
}

/** Ids of the documents a call wrote, not yet announced. */
interface WrittenIds {
  created: string[];
  updated: string[];
}

/** Failures that say nothing about the record: the task is retried instead of the record being marked failed. */
function isDependencyFailure(err: unknown): boolean {
  if (err instanceof ServiceUnavailableError) return true;
  if (err instanceof ApiError) return false;
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' && /^(ECONNREFUSED|ECONNRESET|ETIMEDOUT|EPIPE|57P01|08006|08001|53300)$/.test(code);
}

function messageOf(err: unknown): string {
  return (err instanceof Error ? err.message : String(err)).slice(0, 2000);
}
