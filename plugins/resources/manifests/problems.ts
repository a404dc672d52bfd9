/** A problem found in a manifest, at its path (`collections[2].source.collection_id`; `""` is the whole file). */
export interface ManifestProblem {
  path: string;
  message: string;
  type: 'yaml_syntax' | 'schema' | 'reference' | 'secret' | 'cycle' | 'duplicate' | 'not_supported' | 'not_allowed';
  line?: number;
  column?: number;
}

/** `["collections", 2, "source"]` → `collections[2].source`. */
export function pathOf(parts: ReadonlyArray<string | number>): string {
  let out = '';
  for (const part of parts) {
    if (typeof part === 'number') out += `[${part}]`;
    else if (/^[A-Za-z_][A-Za-z0-9_]*$/.test(part)) out += out === '' ? part : `.${part}`;
    else out += `[${JSON.stringify(part)}]`;
  }
  return out;
}
