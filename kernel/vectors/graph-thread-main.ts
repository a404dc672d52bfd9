/**
 * The graph thread's entry (graph-thread.ts starts it): the in-process index's HNSW graphs, each a
 * MemoryGraph, answering the API thread's messages. Inserts run in slices, so a search sent during a long
 * insert (a catch-up after a batch, a build) is answered between two slices.
 */
import { parentPort } from 'node:worker_threads';
import type { Condition } from '../filters/filter.js';
import { putInSlices } from './graph-handle.js';
import { MemoryGraph, type MemoryGraphOptions } from './memory-graph.js';
import type { IndexSpec, VectorRecord } from './vector-index.js';

/**
 * A ParsedFilter as it crosses to the thread (plainFilter in graph-thread.ts): plain data only, since a
 * compiled regex (Condition.regex) holds its RE2 matcher, a function postMessage cannot clone. A regex
 * condition's `value` is the pattern it is matched with; the thread compiles it with the same compiler
 * (compileFilter → regexOf → compileUserRegex). It is a ParsedFilter as it stands (`regex` is optional).
 */
export interface PlainFilter {
  root: PlainGroup;
  caseSensitive: boolean;
}
export interface PlainGroup {
  kind: 'group';
  and: PlainNode[];
  or: PlainNode[];
  not: PlainNode[];
}
export type PlainNode = Omit<Condition, 'regex'> | PlainGroup;

export type GraphRequest =
  | { id: number; op: 'create'; graph: number; spec: IndexSpec; options: MemoryGraphOptions; capacity: number }
  | { id: number; op: 'put'; graph: number; ids: string[]; payloads: Array<Record<string, unknown>>; vectors: Float32Array }
  | { id: number; op: 'remove'; graph: number; ids: string[] }
  | { id: number; op: 'search'; graph: number; query: Float32Array; limit: number; filter?: PlainFilter; payloads: boolean }
  | { id: number; op: 'match'; graph: number; filter: PlainFilter }
  | { id: number; op: 'release'; graph: number };

export type GraphReply = { id: number; ok: true; value: unknown } | { id: number; ok: false; error: { message: string; name: string } };

const port = parentPort!;
const graphs = new Map<number, MemoryGraph>();

function graphOf(handle: number): MemoryGraph {
  const graph = graphs.get(handle);
  if (!graph) throw new Error(`graph ${handle} is not held by the graph thread`);
  return graph;
}

async function run(request: GraphRequest): Promise<unknown> {
  switch (request.op) {
    case 'create': {
      const graph = new MemoryGraph(request.spec, request.options, request.capacity);
      graphs.set(request.graph, graph);
      return graph.stats;
    }
    case 'put': {
      const graph = graphOf(request.graph);
      const dims = graph.spec.dims;
      const records: VectorRecord[] = request.ids.map((id, i) => ({ id, vector: request.vectors.subarray(i * dims, (i + 1) * dims), payload: request.payloads[i]! }));
      // Released meanwhile (evicted, dropped): the rest of the insert is of no use.
      await putInSlices(graph, records, () => graphs.get(request.graph) !== graph);
      return graph.stats;
    }
    case 'remove': {
      const graph = graphOf(request.graph);
      for (const id of request.ids) graph.remove(id);
      return graph.stats;
    }
    case 'search': {
      const graph = graphOf(request.graph);
      const hits = graph.search(request.query, request.limit, request.filter);
      return { hits: request.payloads ? hits : hits.map((hit) => ({ id: hit.id, score: hit.score, payload: {} })), plan: graph.lastPlan };
    }
    case 'match':
      return graphOf(request.graph).matchingIds(request.filter);
    case 'release':
      graphs.delete(request.graph);
      return null;
  }
}

port.on('message', (request: GraphRequest) => {
  run(request).then(
    (value) => port.postMessage({ id: request.id, ok: true, value } satisfies GraphReply),
    (err: unknown) => {
      const error = err instanceof Error ? { message: err.message, name: err.name } : { message: String(err), name: 'Error' };
      port.postMessage({ id: request.id, ok: false, error } satisfies GraphReply);
    },
  );
});
port.postMessage({ ready: true });
