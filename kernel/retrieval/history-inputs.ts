/**
 * How an execution's `inputs` are stored in the history. Query vectors dominate them: 384 numbers are
 * ~7.5 KB of JSON text, which PostgreSQL parses number by number into jsonb and then moves out of line
 * (TOAST) — most of what recording an execution cost. Long arrays of finite numbers are therefore kept as
 * little-endian bytes in base64 — float32 when every number of the inputs' arrays is exactly a float32
 * (what embedders produce), float64 otherwise: lossless either way, 3.7× or 1.8× smaller than the JSON, no
 * number parsing, and small enough for the row to stay in its page.
 *
 * The stored text is either the plain JSON of the inputs (it starts with `{`), or `P` followed by the
 * JSON `{"inputs": <inputs with each packed array replaced by null>, "paths": [[key, ...], ...],
 * "f32" or "f64": "<base64>"}` (each array's length, then its numbers): the paths say exactly where each array goes back, so no value a caller sends can
 * be mistaken for a packed one.
 */

/** Arrays shorter than this stay plain JSON: packing pays only for vectors. */
const PACK_MIN_LENGTH = 16;

type Path = Array<string | number>;

interface Packed {
  inputs: unknown;
  paths: Path[];
  f32?: string;
  f64?: string;
}

function packable(value: unknown): value is number[] {
  if (!Array.isArray(value) || value.length < PACK_MIN_LENGTH) return false;
  // An indexed loop: for…of boxed every number of a query vector (~4.7 KB of garbage an execute).
  for (let i = 0; i < value.length; i++) {
    const x: unknown = value[i];
    if (typeof x !== 'number' || !Number.isFinite(x)) return false;
  }
  return true;
}

/** Every number of every array is exactly a float32 (an indexed loop: `every` with a callback boxes each number). */
function allFloat32(arrays: readonly number[][]): boolean {
  for (const array of arrays) {
    if (Math.fround(array.length) !== array.length) return false;
    for (let i = 0; i < array.length; i++) if (Math.fround(array[i]!) !== array[i]) return false;
  }
  return true;
}

/** The stored text of `inputs`. */
export function packInputs(inputs: Record<string, unknown>): string {
  const paths: Path[] = [];
  const arrays: number[][] = [];
  const strip = (value: unknown, path: Path): unknown => {
    if (packable(value)) {
      paths.push(path);
      arrays.push(value);
      return null;
    }
    if (Array.isArray(value)) return value.map((item, i) => strip(item, [...path, i]));
    if (value !== null && typeof value === 'object') {
      const out: Record<string, unknown> = {};
      // defineProperty: a key named `__proto__` stays a key.
      for (const [key, item] of Object.entries(value)) Object.defineProperty(out, key, { value: strip(item, [...path, key]), enumerable: true, writable: true, configurable: true });
      return out;
    }
    return value;
  };
  const template = strip(inputs, []);
  if (arrays.length === 0) return JSON.stringify(inputs);
  const single = allFloat32(arrays);
  const numbers = single ? new Float32Array(arrays.reduce((n, a) => n + a.length + 1, 0)) : new Float64Array(arrays.reduce((n, a) => n + a.length + 1, 0));
  let at = 0;
  for (const array of arrays) {
    numbers[at++] = array.length;
    numbers.set(array, at);
    at += array.length;
  }
  const bytes = Buffer.from(numbers.buffer).toString('base64');
  const packed: Packed = single ? { inputs: template, paths, f32: bytes } : { inputs: template, paths, f64: bytes };
  return `P${JSON.stringify(packed)}`;
}

/** The inputs as they were given, from the stored text (or from a jsonb value of rows written before packing). */
export function unpackInputs(stored: unknown): Record<string, unknown> {
  if (typeof stored !== 'string') return (stored ?? {}) as Record<string, unknown>;
  if (!stored.startsWith('P')) return JSON.parse(stored) as Record<string, unknown>;
  const packed = JSON.parse(stored.slice(1)) as Packed;
  const bytes = Buffer.from(packed.f32 ?? packed.f64 ?? '', 'base64');
  const buffer = bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength);
  const numbers = packed.f32 !== undefined ? new Float32Array(buffer) : new Float64Array(buffer);
  let at = 0;
  const root = { value: packed.inputs };
  for (const path of packed.paths) {
    const length = numbers[at++]!;
    const array = Array.from(numbers.subarray(at, at + length));
    at += length;
    let holder: Record<string | number, unknown> = root as Record<string, unknown>;
    let key: string | number = 'value';
    for (const step of path) {
      holder = holder[key] as Record<string | number, unknown>;
      key = step;
    }
    holder[key] = array;
  }
  return root.value as Record<string, unknown>;
}
