/**
 * Sets of Unicode code points as sorted ranges, and the case folding the user-pattern dialect
 * (regex.ts) writes into its patterns: each character also matches every character that shares its
 * simple case mapping (String#toLowerCase/toUpperCase of one code point), closed transitively, so
 * `k`, `K` and the Kelvin sign fold together.
 */
export const MAX_CODE_POINT = 0x10ffff;

/** Sorted, disjoint, non-adjacent inclusive code point ranges. */
export type CodeSet = Array<[number, number]>;

export const SURROGATES: [number, number] = [0xd800, 0xdfff];
/** Every character a stored text can hold (no NUL, no lone surrogates). */
export const UNIVERSE: CodeSet = [[1, SURROGATES[0] - 1], [SURROGATES[1] + 1, MAX_CODE_POINT]];
export const DIGIT: CodeSet = [[0x30, 0x39]];
export const WORD: CodeSet = normalize([[0x30, 0x39], [0x41, 0x5a], [0x5f, 0x5f], [0x61, 0x7a]]);
/** RE2's `\s`: tab, newline, form feed, carriage return, space (not vertical tab). */
export const SPACE: CodeSet = normalize([[0x09, 0x0a], [0x0c, 0x0d], [0x20, 0x20]]);

export function normalize(ranges: CodeSet): CodeSet {
  const sorted = [...ranges].sort((a, b) => a[0] - b[0]);
  const out: CodeSet = [];
  for (const [lo, hi] of sorted) {
    const last = out[out.length - 1];
    if (last && lo <= last[1] + 1) last[1] = Math.max(last[1], hi);
    else out.push([lo, hi]);
  }
  return out;
}

export function intersect(a: CodeSet, b: CodeSet): CodeSet {
  const out: CodeSet = [];
  for (const [alo, ahi] of a) {
    for (const [blo, bhi] of b) {
      const lo = Math.max(alo, blo);
      const hi = Math.min(ahi, bhi);
      if (lo <= hi) out.push([lo, hi]);
    }
  }
  return normalize(out);
}

/** The complement within UNIVERSE. */
export function complement(set: CodeSet): CodeSet {
  const out: CodeSet = [];
  let next = 0;
  for (const [lo, hi] of set) {
    if (lo > next) out.push([next, lo - 1]);
    next = hi + 1;
  }
  if (next <= MAX_CODE_POINT) out.push([next, MAX_CODE_POINT]);
  return intersect(out, UNIVERSE);
}

/** Code points that share a simple case mapping, by code point (only those with at least one other). */
let caseOrbits: Map<number, readonly number[]> | undefined;
/** Sorted code points that have a case orbit. */
let casedCodePoints: number[] = [];

function orbits(): Map<number, readonly number[]> {
  if (caseOrbits) return caseOrbits;
  // Union-find over the one-code-point lower and upper mappings. Every cased letter Unicode has today lies
  // below U+20000, so that is as far as the table needs to look.
  const parent = new Map<number, number>();
  const find = (x: number): number => {
    let root = x;
    while (parent.has(root) && parent.get(root) !== root) root = parent.get(root)!;
    return root;
  };
  const union = (a: number, b: number) => {
    if (!parent.has(a)) parent.set(a, a);
    if (!parent.has(b)) parent.set(b, b);
    const ra = find(a);
    const rb = find(b);
    if (ra !== rb) parent.set(ra, rb);
  };
  for (let cp = 0; cp < 0x20000; cp++) {
    if (cp >= SURROGATES[0] && cp <= SURROGATES[1]) continue;
    const char = String.fromCodePoint(cp);
    for (const mapped of [char.toLowerCase(), char.toUpperCase()]) {
      const other = mapped.codePointAt(0)!;
      if (other !== cp && String.fromCodePoint(other) === mapped) union(cp, other);
    }
  }
  const groups = new Map<number, number[]>();
  for (const cp of parent.keys()) {
    const root = find(cp);
    const group = groups.get(root) ?? [];
    group.push(cp);
    groups.set(root, group);
  }
  caseOrbits = new Map();
  for (const group of groups.values()) for (const cp of group) caseOrbits.set(cp, group);
  casedCodePoints = [...caseOrbits.keys()].sort((a, b) => a - b);
  return caseOrbits;
}

/** The set plus every case variant of each of its members. */
export function foldCase(set: CodeSet): CodeSet {
  const table = orbits();
  const added: CodeSet = [];
  for (const [lo, hi] of set) {
    let i = lowerBound(casedCodePoints, lo);
    for (; i < casedCodePoints.length && casedCodePoints[i]! <= hi; i++) {
      for (const variant of table.get(casedCodePoints[i]!)!) added.push([variant, variant]);
    }
  }
  return normalize([...set, ...added]);
}

function lowerBound(sorted: number[], value: number): number {
  let lo = 0;
  let hi = sorted.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (sorted[mid]! < value) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}
