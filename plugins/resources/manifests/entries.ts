/**
 * A checked manifest's entries, each with the body of the create request it stands for: the manifest's
 * `name` becomes the API's `<kind>_name`, `namespace` becomes the X-Namespace header.
 */
export type Json = Record<string, unknown>;

export type ResourceKind = 'namespace' | 'bucket' | 'collection' | 'retriever';

export interface Entry {
  kind: ResourceKind;
  /** `buckets[3]` */
  path: string;
  name: string;
  /** The namespace it lives in (as written); null for a namespace. */
  namespace: string | null;
  /** The create request's body. */
  body: Json;
}

const LISTS: ReadonlyArray<[ResourceKind, string, string]> = [
  ['namespace', 'namespaces', 'namespace_name'],
  ['bucket', 'buckets', 'bucket_name'],
  ['collection', 'collections', 'collection_name'],
  ['retriever', 'retrievers', 'retriever_name'],
];

export function entriesOf(manifest: Json): Entry[] {
  const entries: Entry[] = [];
  for (const [kind, list, nameField] of LISTS) {
    const items = (manifest[list] ?? []) as Json[];
    items.forEach((item, index) => {
      const { name, namespace, sync, ...rest } = item;
      void sync;
      entries.push({
        kind,
        path: `${list}[${index}]`,
        name: name as string,
        namespace: kind === 'namespace' ? null : (namespace as string),
        body: { [nameField]: name, ...rest },
      });
    });
  }
  return entries;
}

/** Namespaces compare without case (the API keeps them unique that way). */
export function namespaceKey(name: string): string {
  return name.toLowerCase();
}

/** The fields of a create body that describe the resource (not its name). */
export function describedFields(entry: Entry): Json {
  const { namespace_name, bucket_name, collection_name, retriever_name, ...rest } = entry.body;
  void namespace_name, void bucket_name, void collection_name, void retriever_name;
  return rest;
}
