/**
 * A collection's features: the vectors its own extractors write (after `output_mapping`), each in its
 * own index, plus keeping those vectors' payloads in step with their documents when owner, grants or
 * metadata change outside processing (search filters read the payload, never the document row).
 */
import { NotFoundError } from '../../../kernel/errors.js';
import type { PluginRegistry } from '../../../kernel/plugins.js';
import { featureIndexName } from '../../../kernel/vectors/naming.js';
import type { Distance, VectorIndex } from '../../../kernel/vectors/vector-index.js';
import type { DocumentRow } from './document-store.js';
import { vectorPayload } from './vector-payload.js';
import type { CollectionRow } from './store.js';

export interface CollectionFeature {
  /** The output field name, e.g. `text_embedding`. */
  name: string;
  dims: number;
  distance: Distance;
  /** The vector index holding this feature's vectors. */
  index: string;
}

/**
 * Dims come from the collection's output schema (`x-feature.dims`), which accounts for the model the
 * collection chose; distance from the extractor's declaration.
 */
export function collectionFeatures(collection: CollectionRow, plugins: PluginRegistry): CollectionFeature[] {
  return collection.feature_extractors.flatMap((config) => {
    const extractor = plugins.extractors.get(config.feature_extractor_name);
    const mapping = config.output_mapping as Record<string, string> | undefined;
    return (extractor?.features ?? []).map((feature) => {
      const name = mapping?.[feature.name] ?? feature.name;
      const declared = collection.output_schema.properties[name] as { 'x-feature'?: { dims?: unknown } } | undefined;
      const dims = typeof declared?.['x-feature']?.dims === 'number' ? declared['x-feature'].dims : feature.dims;
      return { name, dims, distance: feature.distance, index: featureIndexName(collection.collection_id, name) };
    });
  });
}

/**
 * Rewrites the payload stored beside each document's vectors from the document row as it is now. The
 * vectors themselves are read back and written unchanged; a feature without an index yet has nothing to fix.
 */
export async function refreshVectorPayloads(
  vectors: VectorIndex,
  plugins: PluginRegistry,
  collections: ReadonlyMap<string, CollectionRow>,
  rows: readonly DocumentRow[],
): Promise<void> {
  const byCollection = new Map<string, DocumentRow[]>();
  for (const row of rows) byCollection.set(row.collection_id, [...(byCollection.get(row.collection_id) ?? []), row]);
  for (const [collectionId, documents] of byCollection) {
    const collection = collections.get(collectionId);
    if (!collection) continue;
    const byId = new Map(documents.map((d) => [d.document_id, d]));
    for (const feature of collectionFeatures(collection, plugins)) {
      let stored;
      try {
        stored = await vectors.get(feature.index, [...byId.keys()]);
      } catch (err) {
        if (err instanceof NotFoundError) continue;
        throw err;
      }
      if (stored.length === 0) continue;
      await vectors.upsert(
        feature.index,
        stored.map((record) => ({ id: record.id, vector: record.vector, payload: vectorPayload(byId.get(record.id)!) })),
      );
    }
  }
}
