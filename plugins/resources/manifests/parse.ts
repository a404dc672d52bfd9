/**
 * YAML text to a plain value, safely: the core schema only (no custom tags, no binary, no merge keys), at
 * most MAX_ALIASES alias expansions (a billion-laughs file stops there), nesting of at most MAX_DEPTH (checked
 * on the flow brackets before parsing, so the parser never recurses deep, and on the result).
 */
import { parseDocument } from 'yaml';
import type { ManifestProblem } from './problems.js';

export const MAX_ALIASES = 100;
export const MAX_DEPTH = 64;

export type Parsed = { ok: true; value: unknown } | { ok: false; problems: ManifestProblem[] };

function syntax(message: string, line?: number, column?: number): ManifestProblem {
  return { path: '', message, type: 'yaml_syntax', ...(line !== undefined ? { line } : {}), ...(column !== undefined ? { column } : {}) };
}

/** Deepest run of unclosed `[`/`{` outside quotes: a cheap bound before the parser sees the text. */
function flowDepth(text: string): number {
  let depth = 0;
  let deepest = 0;
  let quote: string | undefined;
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (quote) {
      if (c === '\\' && quote === '"') i++;
      else if (c === quote) quote = undefined;
    } else if (c === '"' || c === "'") quote = c;
    else if (c === '#') {
      const end = text.indexOf('\n', i);
      i = end < 0 ? text.length : end;
    } else if (c === '[' || c === '{') deepest = Math.max(deepest, ++depth);
    else if (c === ']' || c === '}') depth = Math.max(0, depth - 1);
  }
  return deepest;
}

/** Depth of a parsed value, iteratively. */
function depthOf(value: unknown): number {
  let deepest = 0;
  const stack: Array<[unknown, number]> = [[value, 0]];
  while (stack.length > 0) {
    const [item, depth] = stack.pop()!;
    if (item === null || typeof item !== 'object') continue;
    deepest = Math.max(deepest, depth + 1);
    if (deepest > MAX_DEPTH) return deepest;
    for (const child of Object.values(item)) stack.push([child, depth + 1]);
  }
  return deepest;
}

export function parseYaml(text: string): Parsed {
  if (flowDepth(text) > MAX_DEPTH) return { ok: false, problems: [syntax(`YAML nests deeper than ${MAX_DEPTH} levels`)] };
  const doc = parseDocument(text, { schema: 'core', merge: false, uniqueKeys: true, strict: true, prettyErrors: true, customTags: [] });
  const problems: ManifestProblem[] = [];
  for (const err of doc.errors) problems.push(syntax(err.message.split('\n')[0]!, err.linePos?.[0]?.line, err.linePos?.[0]?.col));
  // An unknown tag (`!!binary`, `!something`) is only a warning to the library: here it is refused.
  for (const warning of doc.warnings) problems.push(syntax(warning.message.split('\n')[0]!, warning.linePos?.[0]?.line, warning.linePos?.[0]?.col));
  if (problems.length > 0) return { ok: false, problems };
  let value: unknown;
  try {
    value = doc.toJS({ maxAliasCount: MAX_ALIASES });
  } catch (err) {
    return { ok: false, problems: [syntax(`${(err as Error).message} (at most ${MAX_ALIASES} alias uses)`)] };
  }
  if (depthOf(value) > MAX_DEPTH) return { ok: false, problems: [syntax(`YAML nests deeper than ${MAX_DEPTH} levels`)] };
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    return { ok: false, problems: [{ path: '', message: 'A manifest is a YAML mapping with `version`, `metadata` and resource lists', type: 'schema' }] };
  }
  return { ok: true, value };
}
