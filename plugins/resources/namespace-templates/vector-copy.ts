/**
 * Copies the vectors of the source's documents into the copies' indexes, through the VectorIndex interface
 * (so every engine — pgvector, LanceDB, the in-process graph in front of either — works alike). The payload
 * beside each vector mirrors its document: its identity fields are rewritten to the copy's ids, the rest
 * (fields, metadata, owner, grants, timestamps) is the document's own and stays.
 */
import { NotFoundError } from '../../../kernel/errors.js';
import type { PluginRegistry } from '../../../kernel/plugins.js';
import type { VectorIndex, VectorRecord } from '../../../kernel/vectors/vector-index.js';
import { collectionFeatures, indexOf } from './features.js';
import type { IdMap } from './id-map.js';
import type { CollectionRow, DocumentRow } from './source.js';

/** Vectors read and written per call (a few MB of floats at 384 dims; fewer, larger writes index faster). */
const CHUNK = 2_000;

/** Payload fields holding ids (or a source key, which embeds them). */
const ID_FIELDS = ['namespace_id', 'collection_id', 'document_id', 'source_key', 'source_collection_id', 'source_document_id'] as const;

export class VectorCopier {
  /** Indexes this copy created, to drop if the instantiation fails. */
  readonly created: string[] = [];
  copied = 0;

  constructor(
    private readonly vectors: VectorIndex,
    private readonly plugins: PluginRegistry,
    private readonly ids: IdMap,
  ) {}

  async copyCollection(collection: CollectionRow, documents: readonly DocumentRow[]): Promise<void> {
    if (documents.length === 0) return;
    const copyId = this.ids.of(collection.collection_id);
    for (const feature of collectionFeatures(collection, this.plugins)) {
      const from = indexOf(collection.collection_id, feature);
      const to = indexOf(copyId, feature);
      for (let at = 0; at < documents.length; at += CHUNK) {
        const ids = documents.slice(at, at + CHUNK).map((d) => d.document_id);
        const records = await this.read(from, ids);
        // The source never had vectors of this feature (nothing written yet): the copy has none either.
        if (records === undefined) break;
        if (records.length === 0) continue;
        if (!this.created.includes(to)) {
          await this.vectors.ensureIndex({ name: to, dims: feature.dims, distance: feature.distance });
          this.created.push(to);
        }
        await this.vectors.upsert(to, records.map((r) => this.copyOf(r)));
        this.copied += records.length;
      }
    }
  }

  /** Drops what this copy created (after a failure). */
  async undo(): Promise<void> {
    for (const name of this.created) await this.vectors.dropIndex(name);
  }

  private async read(index: string, ids: string[]): Promise<VectorRecord[] | undefined> {
    try {
      return await this.vectors.get(index, ids);
    } catch (err) {
      if (err instanceof NotFoundError) return undefined;
      throw err;
    }
  }

  private copyOf(record: VectorRecord): VectorRecord {
    const payload = { ...record.payload };
    for (const field of ID_FIELDS) {
      const value = payload[field];
      if (typeof value === 'string') payload[field] = this.ids.text(value);
    }
    return { id: this.ids.of(record.id), vector: record.vector, payload };
  }
}
