/**
 * `{{inputs.<name>}}` placeholders in stage parameters. A string that is exactly one placeholder takes the
 * input's value with its type (a number stays a number, a list stays a list); a placeholder inside a longer
 * string is replaced by the value as text (JSON for lists and objects). A whole-string placeholder whose
 * input was not given removes the property (or list item), so the stage's own default applies.
 */
import { readDotted } from '../filters/filter.js';

const WHOLE = /^\{\{\s*inputs\.([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_]+)*)\s*\}\}$/;
const EMBEDDED = /\{\{\s*inputs\.([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_]+)*)\s*\}\}/g;

export interface PlaceholderUse {
  /** The input's name (the first segment of the path). */
  input: string;
  /** JSON pointer of the value holding it, as ajv reports `instancePath` (`/searches/0/query/text`). */
  pointer: string;
  /** The value is exactly the placeholder (it takes the input's type). */
  whole: boolean;
}

const OMIT = Symbol('omit');

/**
 * A deep copy of a JSON value (inputs come from a parsed body): stages may change what they are given
 * without reaching the inputs. A plain walk, where structuredClone serializes the whole value and reads it
 * back — a 384-number query vector at every execute.
 */
function copyJson(value: unknown): unknown {
  if (value === null || typeof value !== 'object') return value;
  if (Array.isArray(value)) {
    const out = new Array<unknown>(value.length);
    for (let i = 0; i < value.length; i++) {
      const item: unknown = value[i];
      out[i] = item !== null && typeof item === 'object' ? copyJson(item) : item;
    }
    return out;
  }
  const out: Record<string, unknown> = {};
  // defineProperty: a key named `__proto__` stays an own key, as JSON.parse made it.
  for (const [key, item] of Object.entries(value)) Object.defineProperty(out, key, { value: copyJson(item), enumerable: true, writable: true, configurable: true });
  return out;
}

function asText(value: unknown): string {
  if (value === undefined || value === null) return '';
  return typeof value === 'string' ? value : typeof value === 'object' ? JSON.stringify(value) : String(value);
}

/** Every placeholder in a value, with where it is. */
export function placeholdersIn(value: unknown, pointer = ''): PlaceholderUse[] {
  if (typeof value === 'string') {
    const whole = WHOLE.exec(value);
    if (whole) return [{ input: whole[1]!.split('.')[0]!, pointer, whole: true }];
    return [...value.matchAll(EMBEDDED)].map((m) => ({ input: m[1]!.split('.')[0]!, pointer, whole: false }));
  }
  if (Array.isArray(value)) return value.flatMap((item, i) => placeholdersIn(item, `${pointer}/${i}`));
  if (value && typeof value === 'object') {
    return Object.entries(value).flatMap(([k, v]) => placeholdersIn(v, `${pointer}/${k.replace(/~/g, '~0').replace(/\//g, '~1')}`));
  }
  return [];
}

/**
 * A copy of `value` with every placeholder filled from `inputs`. An input that was not given removes what
 * holds it: the property, and a list item (at any depth) built around it — so a filter condition or a
 * search over an optional input that is absent drops out instead of matching against nothing.
 */
export function fillPlaceholders<T>(value: T, inputs: Record<string, unknown>): T {
  // `lost`: an absent input was removed somewhere inside this value.
  const fill = (v: unknown): { value: unknown; lost: boolean } => {
    if (typeof v === 'string') {
      const whole = WHOLE.exec(v);
      if (whole) {
        const found = readDotted(inputs, whole[1]!);
        return found === undefined ? { value: OMIT, lost: true } : { value: copyJson(found), lost: false };
      }
      return { value: v.replace(EMBEDDED, (_, path: string) => asText(readDotted(inputs, path))), lost: false };
    }
    if (Array.isArray(v)) {
      const items = v.map(fill);
      return { value: items.filter((item) => item.value !== OMIT && !item.lost).map((item) => item.value), lost: false };
    }
    if (v && typeof v === 'object') {
      const out: Record<string, unknown> = {};
      let lost = false;
      for (const [k, item] of Object.entries(v)) {
        const filled = fill(item);
        lost ||= filled.lost;
        if (filled.value !== OMIT) out[k] = filled.value;
      }
      return { value: out, lost };
    }
    return { value: v, lost: false };
  };
  const filled = fill(value).value;
  return (filled === OMIT ? undefined : filled) as T;
}
