/**
 * Where a video's segments begin and end, by fixed interval or at scene changes. Pure functions over
 * the probe's duration and the detected cuts, so the rules are tested without a video.
 */

export interface TimeSpan {
  start: number;
  end: number;
}

export interface Cut {
  timeSeconds: number;
  score: number;
}

/** Slices [0, duration) every `interval` seconds (widened to fit `maxSegments`); a short final piece joins the one before. */
export function timeSegments(duration: number, interval: number, minLength: number, maxSegments: number): TimeSpan[] {
  if (!(duration > 0)) return [{ start: 0, end: 0 }];
  const step = Math.max(interval, duration / maxSegments);
  // The epsilon keeps a duration that is a float hair above a multiple of the step from adding an empty slice.
  const count = Math.max(1, Math.ceil(duration / step - 1e-9));
  const spans: TimeSpan[] = [];
  for (let i = 0; i < count; i++) spans.push({ start: i * step, end: Math.min((i + 1) * step, duration) });
  const last = spans[spans.length - 1]!;
  if (spans.length > 1 && last.end - last.start < minLength) {
    spans.pop();
    spans[spans.length - 1]!.end = duration;
  }
  return spans;
}

/**
 * Segments between scene cuts. A cut less than `minLength` after the previous kept cut (or before the
 * end) is ignored, so a flash or a very short shot joins a neighbour; past `maxSegments`, the cuts with the
 * highest scores are kept.
 */
export function sceneSegments(duration: number, cuts: readonly Cut[], minLength: number, maxSegments: number): TimeSpan[] {
  if (!(duration > 0)) return [{ start: 0, end: 0 }];
  const ordered = cuts.filter((c) => c.timeSeconds > 0 && c.timeSeconds < duration).sort((a, b) => a.timeSeconds - b.timeSeconds);
  const kept: Cut[] = [];
  let previous = 0;
  for (const cut of ordered) {
    if (cut.timeSeconds - previous < minLength) continue;
    kept.push(cut);
    previous = cut.timeSeconds;
  }
  while (kept.length > 0 && duration - kept[kept.length - 1]!.timeSeconds < minLength) kept.pop();
  let chosen = kept;
  if (kept.length + 1 > maxSegments) {
    chosen = [...kept]
      .sort((a, b) => b.score - a.score || a.timeSeconds - b.timeSeconds)
      .slice(0, maxSegments - 1)
      .sort((a, b) => a.timeSeconds - b.timeSeconds);
  }
  const bounds = [0, ...chosen.map((c) => c.timeSeconds), duration];
  return bounds.slice(0, -1).map((start, i) => ({ start, end: bounds[i + 1]! }));
}

/** Runs `fn` over `items` with at most `limit` calls in flight; results in input order. */
export async function mapLimit<T, R>(items: readonly T[], limit: number, fn: (item: T, index: number) => Promise<R>): Promise<R[]> {
  const results = new Array<R>(items.length);
  let next = 0;
  let failed = false;
  const lane = async (): Promise<void> => {
    while (next < items.length && !failed) {
      const i = next++;
      try {
        results[i] = await fn(items[i]!, i);
      } catch (err) {
        failed = true;
        throw err;
      }
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(limit, items.length)) }, lane));
  return results;
}
