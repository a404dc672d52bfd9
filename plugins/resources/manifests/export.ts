/**
 * The deployment as a manifest: namespaces, buckets, collections (sources first) and retrievers with the
 * fields of their create requests, ids written as names, secret values as `${{ secrets.NAME }}`.
 */
import { stringify } from 'yaml';
import { NotAllowedError, NotFoundError } from '../../../kernel/errors.js';
import type { Deployment } from './deployment.js';
import type { Json } from './entries.js';
import type { SecretRedactor } from './secret-refs.js';

/** Copies the named fields that are set (null and absent are left out: the create defaults apply). */
function pick(resource: Json, fields: readonly string[]): Json {
  const out: Json = {};
  for (const field of fields) if (resource[field] !== undefined && resource[field] !== null) out[field] = resource[field];
  return out;
}

const NAMESPACE_FIELDS = ['description', 'metadata', 'feature_extractors'] as const;
const BUCKET_FIELDS = ['description', 'schema', 'metadata'] as const;
const COLLECTION_FIELDS = ['description', 'source', 'feature_extractors', 'taxonomy_applications', 'enabled', 'metadata', 'document_handling', 'cache_config'] as const;
const RETRIEVER_FIELDS = ['description', 'collection_identifiers', 'input_schema', 'stages', 'budget_limits', 'tags', 'display_config', 'cache_config', 'cache_stage_names'] as const;

/** Drops empty objects and lists that only restate a default. */
function withoutEmpty(entry: Json): Json {
  return Object.fromEntries(Object.entries(entry).filter(([, v]) => !(v !== null && typeof v === 'object' && Object.keys(v as object).length === 0)));
}

export async function exportManifest(deployment: Deployment, name: string, only: string | undefined, redactor: SecretRedactor): Promise<string> {
  const namespaces = only !== undefined ? [await oneNamespace(deployment, only)] : await deployment.namespaces();
  const manifest: Json = { version: '1', metadata: { name }, namespaces: [], buckets: [], collections: [], retrievers: [] };
  for (const namespace of namespaces) {
    const nsName = String(namespace.namespace_name);
    (manifest.namespaces as Json[]).push(withoutEmpty({ name: nsName, ...pick(namespace, NAMESPACE_FIELDS) }));
    const buckets = await deployment.list('bucket', nsName);
    const bucketNames = new Map(buckets.map((b) => [String(b.bucket_id), String(b.bucket_name)]));
    for (const bucket of buckets) (manifest.buckets as Json[]).push(withoutEmpty({ name: bucket.bucket_name, namespace: nsName, ...pick(bucket, BUCKET_FIELDS) }));
    const collections = await deployment.list('collection', nsName);
    const collectionNames = new Map(collections.map((c) => [String(c.collection_id), String(c.collection_name)]));
    for (const collection of sourcesFirst(collections)) {
      const entry = pick(collection, COLLECTION_FIELDS);
      const source = { ...(entry.source as Json) };
      if (typeof source.bucket_id === 'string') source.bucket_id = bucketNames.get(source.bucket_id) ?? source.bucket_id;
      if (typeof source.collection_id === 'string') source.collection_id = collectionNames.get(source.collection_id) ?? source.collection_id;
      entry.source = source;
      (manifest.collections as Json[]).push(withoutEmpty({ name: collection.collection_name, namespace: nsName, ...entry }));
    }
    for (const retriever of await deployment.list('retriever', nsName)) {
      const entry = pick(retriever, RETRIEVER_FIELDS);
      const ids = (retriever.collection_ids ?? []) as string[];
      entry.collection_identifiers = ((entry.collection_identifiers ?? []) as string[]).map((c, i) => collectionNames.get(c) ?? collectionNames.get(ids[i] ?? '') ?? c);
      (manifest.retrievers as Json[]).push(withoutEmpty({ name: retriever.retriever_name, namespace: nsName, ...entry }));
    }
  }
  return stringify(redactor.value(manifest), { aliasDuplicateObjects: false, lineWidth: 0 });
}

async function oneNamespace(deployment: Deployment, name: string): Promise<Json> {
  const lookup = await deployment.namespace(name);
  if (lookup.found) return lookup.resource;
  throw lookup.refused ? new NotAllowedError(lookup.refused) : new NotFoundError(`Namespace '${name}' not found`);
}

/** Collections with each one's source collection before it. */
function sourcesFirst(collections: Json[]): Json[] {
  const byId = new Map(collections.map((c) => [String(c.collection_id), c]));
  const out: Json[] = [];
  const placed = new Set<Json>();
  const place = (c: Json, depth: number): void => {
    if (placed.has(c) || depth > collections.length) return;
    const source = c.source as Json | undefined;
    const from = typeof source?.collection_id === 'string' ? byId.get(source.collection_id) : undefined;
    if (from && from !== c) place(from, depth + 1);
    placed.add(c);
    out.push(c);
  };
  for (const c of collections) place(c, 0);
  return out;
}
