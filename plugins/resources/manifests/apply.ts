/**
 * Applying a checked manifest: what exists as declared is left alone, what exists differently stops the
 * apply before anything is made (409), the rest is created in order through the API; on the first failed
 * creation everything made so far is deleted again, newest first.
 */
import { ApiError, ConflictError, InputError, NotAllowedError, NotFoundError } from '../../../kernel/errors.js';
import { errorOf, seg, type ApiAnswer } from './api-client.js';
import type { CheckedManifest } from './check.js';
import { differingFields } from './compare.js';
import type { Deployment, Lookup } from './deployment.js';
import { namespaceKey, type Entry, type Json } from './entries.js';

export interface ResourceResult {
  kind: Entry['kind'];
  name: string;
  namespace: string | null;
  path: string;
  action: 'created' | 'unchanged';
  id: string | null;
}

export type EntryState = { entry: Entry; state: 'create' } | { entry: Entry; state: 'unchanged'; id: string } | { entry: Entry; state: 'differs'; fields: string[] };

/** Each entry against the deployment, in order (entries inside a namespace still to be made are all `create`). */
export async function entryStates(order: Entry[], deployment: Deployment): Promise<EntryState[]> {
  const newNamespaces = new Set<string>();
  const states: EntryState[] = [];
  for (const entry of order) {
    if (entry.kind !== 'namespace' && newNamespaces.has(namespaceKey(entry.namespace!))) {
      states.push({ entry, state: 'create' });
      continue;
    }
    const lookup: Lookup = entry.kind === 'namespace' ? await deployment.namespace(entry.name) : await deployment.resource(entry.kind, entry.namespace!, entry.name);
    if (lookup.found) {
      const fields = await differingFields(entry, lookup.resource, deployment);
      states.push(fields.length > 0 ? { entry, state: 'differs', fields } : { entry, state: 'unchanged', id: String(lookup.resource[`${entry.kind}_id`] ?? '') });
    } else if (lookup.refused) {
      throw new NotAllowedError(`${entry.path} (${entry.kind} '${entry.name}'): ${lookup.refused}`, { path: entry.path });
    } else {
      if (entry.kind === 'namespace') newNamespaces.add(namespaceKey(entry.name));
      states.push({ entry, state: 'create' });
    }
  }
  return states;
}

const CREATE: Record<Entry['kind'], string> = {
  namespace: '/v1/namespaces',
  bucket: '/v1/buckets',
  collection: '/v1/collections/create',
  retriever: '/v1/retrievers',
};

function idOf(entry: Entry, answer: ApiAnswer): string {
  const body = entry.kind === 'retriever' ? (answer.body?.retriever as Json | undefined) : answer.body;
  return String(body?.[`${entry.kind}_id`] ?? '');
}

interface Made {
  entry: Entry;
  id: string;
}

export async function applyEntries(checked: CheckedManifest, deployment: Deployment): Promise<ResourceResult[]> {
  const states = await entryStates(checked.order, deployment);
  const conflicts = states.flatMap((s) => (s.state === 'differs' ? [{ path: s.entry.path, kind: s.entry.kind, name: s.entry.name, namespace: s.entry.namespace, fields: s.fields }] : []));
  if (conflicts.length > 0) {
    throw new ConflictError(
      checked.redactor.text(`${conflicts.length} resource(s) exist with other values than the manifest declares (apply does not update; see POST /v1/manifest/diff): ` +
        conflicts.map((c) => `${c.path} (${c.kind} '${c.name}': ${c.fields.join(', ')})`).join('; ')),
      checked.redactor.value({ conflicts }),
    );
  }
  const made: Made[] = [];
  const results: ResourceResult[] = [];
  for (const state of states) {
    const { entry } = state;
    const base = { kind: entry.kind, name: checked.redactor.text(entry.name), namespace: entry.namespace === null ? null : checked.redactor.text(entry.namespace), path: entry.path };
    if (state.state === 'unchanged') {
      results.push({ ...base, action: 'unchanged', id: state.id || null });
      continue;
    }
    const answer = await deployment.api
      .call('POST', CREATE[entry.kind], { body: entry.body, ...(entry.namespace !== null ? { namespace: entry.namespace } : {}) })
      .catch((err: unknown): ApiAnswer => ({ status: 500, body: { error: { type: 'Error', message: (err as Error).message } } }));
    if (answer.status !== 201) {
      const undo = await rollBack(made, deployment);
      throw failure(checked, entry, answer, undo);
    }
    const id = idOf(entry, answer);
    made.push({ entry, id });
    results.push({ ...base, action: 'created', id });
  }
  return results;
}

/** Deletes what this apply made, newest first; what a deleted new namespace held goes with it. */
async function rollBack(made: Made[], deployment: Deployment): Promise<{ rolledBack: string[]; left: Array<{ path: string; error: string }> }> {
  const newNamespaces = new Set(made.filter((m) => m.entry.kind === 'namespace').map((m) => namespaceKey(m.entry.name)));
  const rolledBack: string[] = [];
  const left: Array<{ path: string; error: string }> = [];
  for (const { entry, id } of [...made].reverse()) {
    if (entry.kind !== 'namespace' && newNamespaces.has(namespaceKey(entry.namespace!))) {
      rolledBack.push(entry.path);
      continue;
    }
    const path =
      entry.kind === 'namespace' ? `/v1/namespaces/${seg(id)}`
      : entry.kind === 'bucket' ? `/v1/buckets/${seg(id)}?force=true`
      : entry.kind === 'collection' ? `/v1/collections/${seg(id)}?force=true`
      : `/v1/retrievers/${seg(id)}`;
    const answer = await deployment.api
      .call('DELETE', path, entry.namespace !== null ? { namespace: entry.namespace } : {})
      .catch((err: unknown): ApiAnswer => ({ status: 500, body: { error: { type: 'Error', message: (err as Error).message } } }));
    if (answer.status === 200 || answer.status === 404) rolledBack.push(entry.path);
    else left.push({ path: entry.path, error: errorOf(answer).message });
  }
  return { rolledBack, left };
}

function failure(checked: CheckedManifest, entry: Entry, answer: ApiAnswer, undo: { rolledBack: string[]; left: Array<{ path: string; error: string }> }): Error {
  const error = errorOf(answer);
  const details = checked.redactor.value({
    failed: { path: entry.path, kind: entry.kind, name: entry.name, namespace: entry.namespace, status: error.status, type: error.type, message: error.message },
    rolled_back: undo.rolledBack,
    not_rolled_back: undo.left,
  });
  const message = checked.redactor.text(
    `${entry.path} (${entry.kind} '${entry.name}') could not be created: ${error.message}` +
      (undo.left.length === 0 ? '; every change of this apply was rolled back' : `; ${undo.left.length} resource(s) could not be removed again: ${undo.left.map((l) => l.path).join(', ')}`),
  );
  const made: ApiError =
    error.status === 403 ? new NotAllowedError(message, details)
    : error.status === 409 ? new ConflictError(message, details)
    : error.status === 404 ? new NotFoundError(message, details)
    : new InputError(message, details);
  if (error.status >= 500) {
    const unexpected = new Error(message);
    return unexpected;
  }
  return made;
}
