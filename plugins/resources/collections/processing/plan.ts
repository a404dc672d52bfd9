/**
 * The processing DAG of a bucket: tier 0 is every enabled collection reading the bucket, tier N every
 * enabled collection reading a collection of tier N−1. A collection reached twice means the source graph
 * has a cycle (impossible through the API, which fixes a collection's source at creation to an existing
 * collection, but refused here rather than looping if stored data ever says so).
 */
import { ConflictError } from '../../../../kernel/errors.js';

export interface PlanNode {
  collection_id: string;
  enabled: boolean;
  source_bucket_id: string | null;
  source_collection_id: string | null;
}

export interface Plan {
  tiers: string[][];
  /** Each planned collection's source collection (null for tier 0). */
  sources: Record<string, string | null>;
}

export function resolveTiers(bucketId: string, nodes: readonly PlanNode[]): Plan {
  const readersOf = new Map<string, PlanNode[]>();
  for (const node of nodes) {
    if (!node.source_collection_id) continue;
    const list = readersOf.get(node.source_collection_id) ?? [];
    list.push(node);
    readersOf.set(node.source_collection_id, list);
  }
  const byId = new Map(nodes.map((n) => [n.collection_id, n]));
  // Every cycle in the whole graph is refused, reachable or not: a cycle means corrupted sources.
  for (const start of nodes) {
    const seen = new Set<string>();
    let current: PlanNode | undefined = start;
    while (current?.source_collection_id) {
      if (seen.has(current.collection_id)) {
        throw new ConflictError(`Collections read each other in a cycle (${[...seen].join(' → ')}); a batch cannot order them`, {
          cycle: [...seen],
        });
      }
      seen.add(current.collection_id);
      current = byId.get(current.source_collection_id);
    }
  }
  const tiers: string[][] = [];
  const sources: Record<string, string | null> = {};
  const placed = new Set<string>();
  let tier = nodes.filter((n) => n.enabled && n.source_bucket_id === bucketId);
  while (tier.length > 0) {
    const ids = tier.map((n) => n.collection_id).sort();
    for (const node of tier) {
      if (placed.has(node.collection_id)) {
        throw new ConflictError(`Collection ${node.collection_id} is reached twice while ordering tiers`, { collection_id: node.collection_id });
      }
      placed.add(node.collection_id);
      sources[node.collection_id] = node.source_collection_id;
    }
    tiers.push(ids);
    tier = tier.flatMap((n) => (readersOf.get(n.collection_id) ?? []).filter((r) => r.enabled));
  }
  return { tiers, sources };
}
