/**
 * Whether a resource in the deployment is what an entry declares: only the fields the entry gives are
 * compared, each contained in the resource's (defaults the API filled in do not count as differences), with
 * references by id read as names.
 */
import type { Deployment } from './deployment.js';
import { describedFields, type Entry, type Json } from './entries.js';

/** True when `declared` is contained in `actual`: equal scalars, same-length arrays item by item, objects key by key. */
function contains(declared: unknown, actual: unknown): boolean {
  if (declared === null || typeof declared !== 'object') return declared === actual || (declared === null && actual === undefined);
  if (Array.isArray(declared)) return Array.isArray(actual) && actual.length === declared.length && declared.every((d, i) => contains(d, actual[i]));
  if (actual === null || typeof actual !== 'object' || Array.isArray(actual)) return false;
  return Object.entries(declared).every(([key, value]) => contains(value, (actual as Json)[key]));
}

/** The resource as a manifest entry would declare it: references by name. */
async function comparable(entry: Entry, resource: Json, deployment: Deployment): Promise<Json> {
  if (entry.kind === 'collection' && resource.source && typeof resource.source === 'object') {
    const source = { ...(resource.source as Json) };
    if (typeof source.bucket_id === 'string') source.bucket_id = await deployment.nameOf('bucket', entry.namespace!, source.bucket_id);
    if (typeof source.collection_id === 'string') source.collection_id = await deployment.nameOf('collection', entry.namespace!, source.collection_id);
    return { ...resource, source };
  }
  if (entry.kind === 'retriever' && Array.isArray(resource.collection_identifiers)) {
    const names = await Promise.all((resource.collection_identifiers as string[]).map((c) => deployment.nameOf('collection', entry.namespace!, c)));
    return { ...resource, collection_identifiers: names };
  }
  return resource;
}

/** The entry's fields whose declared value the resource does not have. */
export async function differingFields(entry: Entry, resource: Json, deployment: Deployment): Promise<string[]> {
  const actual = await comparable(entry, resource, deployment);
  const declared = describedFields(entry);
  if (entry.kind === 'retriever' && Array.isArray(declared.collection_identifiers)) {
    declared.collection_identifiers = await Promise.all((declared.collection_identifiers as string[]).map((c) => deployment.nameOf('collection', entry.namespace!, c)));
  }
  return Object.keys(declared).filter((field) => !contains(declared[field], actual[field]));
}
