/**
 * Where a collection's feature vectors live: one index per (collection, output field). Collection ids
 * are mixed-case base62 and index names must be `[a-z0-9_]{1,63}`, so the id is hashed (stable,
 * collision-free in practice) and the feature name kept readable after it.
 */
import { createHash } from 'node:crypto';

export function featureIndexName(collectionId: string, feature: string): string {
  const digest = createHash('sha256').update(collectionId).digest('hex').slice(0, 24);
  const readable = feature.toLowerCase().replace(/[^a-z0-9_]/g, '_');
  return `v_${digest}_${readable}`.slice(0, 63);
}
