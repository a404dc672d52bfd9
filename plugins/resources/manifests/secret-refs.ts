/**
 * `${{ secrets.NAME }}` in a manifest's string values: finding them, putting values in their place, and
 * hiding values again in anything the service answers (errors relayed from the API, diffs, exports).
 */
import { SECRET_NAME } from '../../../kernel/organization-secrets.js';
import { pathOf, type ManifestProblem } from './problems.js';

const REFERENCE = /\$\{\{\s*secrets\.([^\s}]*)\s*\}\}/g;

export interface SecretUse {
  name: string;
  path: string;
}

/** Every string of a plain value (objects and arrays), with its location; iterative. */
function* strings(value: unknown): Generator<{ text: string; at: Array<string | number>; set: (next: string) => void }> {
  const stack: Array<{ holder: Record<string, unknown> | unknown[]; key: string | number; at: Array<string | number> }> = [];
  const push = (container: unknown, at: Array<string | number>) => {
    if (Array.isArray(container)) container.forEach((_, i) => stack.push({ holder: container, key: i, at: [...at, i] }));
    else if (container !== null && typeof container === 'object') for (const key of Object.keys(container)) stack.push({ holder: container as Record<string, unknown>, key, at: [...at, key] });
  };
  push(value, []);
  while (stack.length > 0) {
    const { holder, key, at } = stack.pop()!;
    const item = (holder as Record<string | number, unknown>)[key];
    if (typeof item === 'string') yield { text: item, at, set: (next) => ((holder as Record<string | number, unknown>)[key] = next) };
    else push(item, at);
  }
}

/** Every reference, and problems for malformed names. */
export function findSecretUses(manifest: unknown): { uses: SecretUse[]; problems: ManifestProblem[] } {
  const uses: SecretUse[] = [];
  const problems: ManifestProblem[] = [];
  for (const { text, at } of strings(manifest)) {
    for (const match of text.matchAll(REFERENCE)) {
      const name = match[1]!;
      if (SECRET_NAME.test(name)) uses.push({ name, path: pathOf(at) });
      else problems.push({ path: pathOf(at), message: `'${name}' is not a secret name (upper case letters, digits and _, starting with a letter)`, type: 'secret' });
    }
  }
  return { uses, problems };
}

/** Puts each known secret's value in place of its reference (unknown ones stay as written), in place. */
export function substituteSecrets(manifest: unknown, values: ReadonlyMap<string, string>): void {
  for (const { text, set } of strings(manifest)) {
    if (!text.includes('${{')) continue;
    set(text.replace(REFERENCE, (whole, name: string) => values.get(name) ?? whole));
  }
}

/** Replaces every occurrence of a secret's value with its reference (longest values first). */
export class SecretRedactor {
  private readonly entries: Array<[string, string]>;

  constructor(values: ReadonlyMap<string, string>) {
    this.entries = [...values.entries()].filter(([, value]) => value.length > 0).sort((a, b) => b[1].length - a[1].length);
  }

  text(text: string): string {
    let out = text;
    for (const [name, value] of this.entries) if (out.includes(value)) out = out.split(value).join(`\${{ secrets.${name} }}`);
    return out;
  }

  /** A copy of a plain value with every string redacted. */
  value<T>(value: T): T {
    if (this.entries.length === 0) return value;
    const copy = structuredClone(value);
    for (const { text, set } of strings(copy)) set(this.text(text));
    return copy;
  }
}
