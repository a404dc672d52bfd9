/**
 * Fusing ranked lists (one per search) into one ranking. `rrf`: Σ weight / (k + rank); `dbsf`: each list's
 * scores scaled by its mean ± 3σ into [0, 1], then Σ weight × scaled; `weighted`: Σ weight × score; `max`:
 * the best weight × score. A document missing from a list gets nothing from it. Ties go by document id.
 */
export type Fusion = 'rrf' | 'dbsf' | 'weighted' | 'max';

export interface RankedList {
  weight: number;
  /** Best first. */
  hits: Array<{ id: string; score: number }>;
}

export function fuse(lists: readonly RankedList[], method: Fusion, rrfK = 60): Array<{ id: string; score: number }> {
  const total = new Map<string, number>();
  const add = (id: string, value: number) => {
    const prev = total.get(id);
    if (method === 'max') total.set(id, prev === undefined ? value : Math.max(prev, value));
    else total.set(id, (prev ?? 0) + value);
  };
  for (const list of lists) {
    if (method === 'dbsf') {
      const scores = list.hits.map((h) => h.score);
      const mean = scores.reduce((a, b) => a + b, 0) / Math.max(1, scores.length);
      const sd = Math.sqrt(scores.reduce((a, b) => a + (b - mean) ** 2, 0) / Math.max(1, scores.length));
      const lo = mean - 3 * sd;
      const hi = mean + 3 * sd;
      for (const h of list.hits) add(h.id, list.weight * (hi > lo ? Math.min(1, Math.max(0, (h.score - lo) / (hi - lo))) : 1));
    } else {
      list.hits.forEach((h, i) => add(h.id, list.weight * (method === 'rrf' ? 1 / (rrfK + i + 1) : h.score)));
    }
  }
  return [...total.entries()]
    .map(([id, score]) => ({ id, score }))
    .sort((a, b) => b.score - a.score || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
}
