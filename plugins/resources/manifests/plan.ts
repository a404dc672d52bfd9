/**
 * From checked entries to an order of creation: duplicates, references (declared in the manifest or present
 * in the deployment) and cycles between collections, every problem at its manifest path.
 */
import type { Deployment } from './deployment.js';
import { namespaceKey, type Entry, type Json } from './entries.js';
import type { ManifestProblem } from './problems.js';

export interface Plan {
  /** Namespaces, buckets, collections (sources first), retrievers. */
  order: Entry[];
  problems: ManifestProblem[];
}

function keyOf(entry: Entry): string {
  return entry.kind === 'namespace' ? `namespace ${namespaceKey(entry.name)}` : `${entry.kind} ${namespaceKey(entry.namespace!)} ${entry.name}`;
}

/** The declared collections a collection reads (its source), in its namespace. */
function sourceCollection(entry: Entry): string | undefined {
  const source = entry.body.source as Json | undefined;
  return source?.type === 'collection' && typeof source.collection_id === 'string' ? source.collection_id : undefined;
}

export async function planManifest(entries: Entry[], manifest: Json, deployment: Deployment): Promise<Plan> {
  const problems: ManifestProblem[] = [];
  const declared = new Map<string, Entry>();
  for (const entry of entries) {
    const key = keyOf(entry);
    const first = declared.get(key);
    if (first) problems.push({ path: `${entry.path}.name`, message: `${entry.kind} '${entry.name}' is already declared at ${first.path}`, type: 'duplicate' });
    else declared.set(key, entry);
  }
  const buckets = (manifest.buckets ?? []) as Json[];
  buckets.forEach((bucket, i) => {
    if (bucket.sync !== undefined) problems.push({ path: `buckets[${i}].sync`, message: 'bucket sync (storage connections) is not supported yet', type: 'not_supported' });
  });

  const namespaceDeclared = (name: string) => declared.has(`namespace ${namespaceKey(name)}`);
  /** A problem when a namespace is neither declared nor there (or not visible to the key). */
  const checkNamespace = async (entry: Entry): Promise<boolean> => {
    if (namespaceDeclared(entry.namespace!)) return true;
    const lookup = await deployment.namespace(entry.namespace!);
    if (lookup.found) return true;
    problems.push(lookup.refused
      ? { path: `${entry.path}.namespace`, message: `namespace '${entry.namespace}': ${lookup.refused}`, type: 'not_allowed' }
      : { path: `${entry.path}.namespace`, message: `namespace '${entry.namespace}' is neither declared in the manifest nor present`, type: 'reference' });
    return false;
  };
  /** A referenced bucket or collection of the entry's namespace, declared or present. */
  const checkReference = async (entry: Entry, kind: 'bucket' | 'collection', name: string, path: string): Promise<void> => {
    if (declared.has(`${kind} ${namespaceKey(entry.namespace!)} ${name}`)) return;
    if (!namespaceDeclared(entry.namespace!)) {
      const lookup = await deployment.resource(kind, entry.namespace!, name);
      if (lookup.found) return;
      if (lookup.refused) {
        problems.push({ path, message: `${kind} '${name}': ${lookup.refused}`, type: 'not_allowed' });
        return;
      }
    }
    problems.push({ path, message: `${kind} '${name}' is neither declared in namespace '${entry.namespace}' of the manifest nor present there`, type: 'reference' });
  };

  for (const entry of entries) {
    if (entry.kind === 'namespace' || !(await checkNamespace(entry))) continue;
    if (entry.kind === 'collection') {
      const source = entry.body.source as Json;
      if (source.type === 'bucket') {
        if (typeof source.bucket_id !== 'string') problems.push({ path: `${entry.path}.source.bucket_id`, message: 'is required for a bucket source', type: 'schema' });
        else await checkReference(entry, 'bucket', source.bucket_id, `${entry.path}.source.bucket_id`);
      } else if (typeof source.collection_id !== 'string') {
        problems.push({ path: `${entry.path}.source.collection_id`, message: 'is required for a collection source', type: 'schema' });
      } else await checkReference(entry, 'collection', source.collection_id, `${entry.path}.source.collection_id`);
    }
    if (entry.kind === 'retriever') {
      const identifiers = entry.body.collection_identifiers as string[];
      for (const [i, name] of identifiers.entries()) await checkReference(entry, 'collection', name, `${entry.path}.collection_identifiers[${i}]`);
    }
  }

  const collections = orderCollections(entries.filter((e) => e.kind === 'collection'), problems);
  const order = [
    ...entries.filter((e) => e.kind === 'namespace'),
    ...entries.filter((e) => e.kind === 'bucket'),
    ...collections,
    ...entries.filter((e) => e.kind === 'retriever'),
  ];
  return { order, problems };
}

/** Declared collections with every declared source before its readers (Kahn); a cycle is a problem naming its members. */
function orderCollections(collections: Entry[], problems: ManifestProblem[]): Entry[] {
  const byKey = new Map(collections.map((c) => [`${namespaceKey(c.namespace!)} ${c.name}`, c]));
  const sourceOf = (c: Entry): Entry | undefined => {
    const name = sourceCollection(c);
    return name === undefined ? undefined : byKey.get(`${namespaceKey(c.namespace!)} ${name}`);
  };
  const ordered: Entry[] = [];
  const placed = new Set<Entry>();
  let progress = true;
  while (progress) {
    progress = false;
    for (const c of collections) {
      if (placed.has(c)) continue;
      const source = sourceOf(c);
      const ready = source === undefined || (source !== c && placed.has(source));
      if (ready) {
        ordered.push(c);
        placed.add(c);
        progress = true;
      }
    }
  }
  const stuck = collections.filter((c) => !placed.has(c));
  // Each collection has one source, so the stuck ones form cycles (and chains hanging off them): name each cycle once.
  const reported = new Set<Entry>();
  for (const start of stuck) {
    if (reported.has(start)) continue;
    const seen: Entry[] = [];
    let at: Entry | undefined = start;
    while (at && !seen.includes(at)) {
      seen.push(at);
      at = sourceOf(at);
    }
    if (!at || reported.has(at)) {
      seen.forEach((e) => reported.add(e));
      continue;
    }
    const cycle = seen.slice(seen.indexOf(at));
    cycle.forEach((e) => reported.add(e));
    seen.forEach((e) => reported.add(e));
    const names = cycle.map((e) => `${e.namespace}/${e.name}`);
    problems.push({
      path: `${cycle[0]!.path}.source.collection_id`,
      message: `circular dependency between collections: ${[...names, names[0]].join(' -> ')} (${cycle.map((e) => e.path).join(', ')})`,
      type: 'cycle',
    });
  }
  return ordered;
}
