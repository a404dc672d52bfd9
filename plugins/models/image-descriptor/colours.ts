/**
 * Dominant colours: pixels counted in a coarse RGB cube (8 levels a channel), the fullest cells taken
 * in order, each as the mean colour of its pixels, and a cell merged into an already chosen colour
 * when it is close to it (so a gradient or JPEG noise does not report five shades of one red).
 */
import type { Pixels } from './pixels.js';

const LEVELS = 8;
const SHIFT = 5; // 256 / 8
const MERGE_DISTANCE = 64; // Euclidean, in 0..255 RGB units
const MIN_SHARE = 0.03;

function hex(r: number, g: number, b: number): string {
  return `#${[r, g, b].map((x) => Math.round(x).toString(16).padStart(2, '0')).join('')}`;
}

export function dominantColours(px: Pixels, max = 5): string[] {
  const cells = LEVELS * LEVELS * LEVELS;
  const count = new Uint32Array(cells);
  const sums = new Float64Array(cells * 3);
  const n = px.width * px.height;
  for (let i = 0, j = 0; i < n; i++, j += 3) {
    const r = px.rgb[j]!;
    const g = px.rgb[j + 1]!;
    const b = px.rgb[j + 2]!;
    const cell = ((r >> SHIFT) * LEVELS + (g >> SHIFT)) * LEVELS + (b >> SHIFT);
    count[cell]!++;
    sums[cell * 3]! += r;
    sums[cell * 3 + 1]! += g;
    sums[cell * 3 + 2]! += b;
  }
  // Fullest first; ties by cell index so the order never depends on sort stability.
  const order = Array.from({ length: cells }, (_, i) => i)
    .filter((i) => count[i]! > 0)
    .sort((a, b) => count[b]! - count[a]! || a - b);
  const chosen: { rgb: [number, number, number]; count: number }[] = [];
  for (const cell of order) {
    const c = count[cell]!;
    const rgb: [number, number, number] = [sums[cell * 3]! / c, sums[cell * 3 + 1]! / c, sums[cell * 3 + 2]! / c];
    const near = chosen.find((k) => Math.hypot(k.rgb[0] - rgb[0], k.rgb[1] - rgb[1], k.rgb[2] - rgb[2]) < MERGE_DISTANCE);
    if (near) near.count += c;
    else chosen.push({ rgb, count: c });
  }
  return chosen
    .filter((k, i) => i === 0 || k.count / n >= MIN_SHARE)
    .sort((a, b) => b.count - a.count)
    .slice(0, max)
    .map((k) => hex(...k.rgb));
}
