/** The manifest against the deployment: create / unchanged / differs per entry, and `extra` within its namespaces. */
import { entryStates } from './apply.js';
import type { CheckedManifest } from './check.js';
import type { Deployment } from './deployment.js';
import { namespaceKey } from './entries.js';

export interface DiffEntry {
  kind: 'namespace' | 'bucket' | 'collection' | 'retriever';
  name: string;
  namespace: string | null;
  path: string | null;
  action: 'create' | 'unchanged' | 'differs' | 'extra';
  fields: string[];
}

export async function diffManifest(checked: CheckedManifest, deployment: Deployment): Promise<DiffEntry[]> {
  const states = await entryStates(checked.order, deployment);
  const changes: DiffEntry[] = states.map((s) => ({
    kind: s.entry.kind,
    name: s.entry.name,
    namespace: s.entry.namespace,
    path: s.entry.path,
    action: s.state,
    fields: s.state === 'differs' ? s.fields : [],
  }));
  const declared = new Set(checked.order.map((e) => `${e.kind} ${e.namespace === null ? '' : namespaceKey(e.namespace)} ${e.name}`));
  const existingNamespaces = new Map<string, string>();
  for (const s of states) {
    const namespace = s.entry.kind === 'namespace' ? s.entry.name : s.entry.namespace!;
    if (s.entry.kind === 'namespace' && s.state === 'create') continue;
    existingNamespaces.set(namespaceKey(namespace), namespace);
  }
  for (const s of states) if (s.entry.kind === 'namespace' && s.state === 'create') existingNamespaces.delete(namespaceKey(s.entry.name));
  for (const [key, namespace] of existingNamespaces) {
    for (const kind of ['bucket', 'collection', 'retriever'] as const) {
      for (const resource of await deployment.list(kind, namespace)) {
        const name = String(resource[`${kind}_name`]);
        if (!declared.has(`${kind} ${key} ${name}`)) changes.push({ kind, name, namespace, path: null, action: 'extra', fields: [] });
      }
    }
  }
  return checked.redactor.value(changes);
}
