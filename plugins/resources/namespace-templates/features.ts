/**
 * The vector indexes of a collection: one per feature its extractors write (after `output_mapping`). The
 * collections plugin names them the same way (plugins never import each other, so the rule is read here
 * again from what both share: the extractor registry, the collection's output schema and featureIndexName).
 */
import type { PluginRegistry } from '../../../kernel/plugins.js';
import { featureIndexName } from '../../../kernel/vectors/naming.js';
import type { Distance } from '../../../kernel/vectors/vector-index.js';
import type { CollectionRow } from './source.js';

export interface CollectionFeature {
  /** The output field name, e.g. `text_embedding`. */
  name: string;
  dims: number;
  distance: Distance;
}

/** Dims from the output schema's `x-feature.dims` (the model the collection chose), distance from the extractor. */
export function collectionFeatures(collection: CollectionRow, plugins: PluginRegistry): CollectionFeature[] {
  return collection.feature_extractors.flatMap((config) => {
    const extractor = plugins.extractors.get(config.feature_extractor_name);
    return (extractor?.features ?? []).map((feature) => {
      const name = config.output_mapping?.[feature.name] ?? feature.name;
      const declared = collection.output_schema.properties[name] as { 'x-feature'?: { dims?: unknown } } | undefined;
      const dims = typeof declared?.['x-feature']?.dims === 'number' ? declared['x-feature'].dims : feature.dims;
      return { name, dims, distance: feature.distance };
    });
  });
}

export function indexOf(collectionId: string, feature: CollectionFeature): string {
  return featureIndexName(collectionId, feature.name);
}
