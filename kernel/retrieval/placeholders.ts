/**
 * `{{inputs.<name>}}` placeholders in stage parameters. A string that is exactly one placeholder takes the
 * input's value with its type (a number stays a number, a list stays a list); a placeholder inside a longer
 * string is replaced by the value as text (JSON for lists and objects). A whole-string placeholder whose
 * input was not given removes the property (or list item), so the stage's own default applies.
 */
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

function read(inputs: Record<string, unknown>, path: string): unknown {
  return path.split('.').reduce<unknown>((v, k) => (v && typeof v === 'object' ? (v as Record<string, unknown>)[k] : undefined), inputs);
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

/** A copy of `value` with every placeholder filled from `inputs`. */
export function fillPlaceholders<T>(value: T, inputs: Record<string, unknown>): T {
  const fill = (v: unknown): unknown => {
    if (typeof v === 'string') {
      const whole = WHOLE.exec(v);
      if (whole) {
        const found = read(inputs, whole[1]!);
        return found === undefined ? OMIT : structuredClone(found);
      }
      return v.replace(EMBEDDED, (_, path: string) => asText(read(inputs, path)));
    }
    if (Array.isArray(v)) return v.map(fill).filter((item) => item !== OMIT);
    if (v && typeof v === 'object') {
      const out: Record<string, unknown> = {};
      for (const [k, item] of Object.entries(v)) {
        const filled = fill(item);
        if (filled !== OMIT) out[k] = filled;
      }
      return out;
    }
    return v;
  };
  const filled = fill(value);
  return (filled === OMIT ? undefined : filled) as T;
}
