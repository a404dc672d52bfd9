/**
 * A page's text from pdf.js text items, with line breaks where the page has them: pdf.js marks line ends
 * (`hasEOL`); a jump in the baseline also starts a line, a larger gap between lines leaves a blank line
 * (paragraphs), and a horizontal gap between runs on one line becomes a space.
 */

/** The parts of a pdf.js TextItem this needs (marked-content entries have no `str` and are skipped). */
export interface TextRun {
  str: string;
  /** [a, b, c, d, e, f]: e, f are the run's origin on the page; d is about the font size. */
  transform: readonly number[];
  width: number;
  height: number;
  hasEOL: boolean;
}

export function isTextRun(item: unknown): item is TextRun {
  return typeof item === 'object' && item !== null && typeof (item as { str?: unknown }).str === 'string' && Array.isArray((item as { transform?: unknown }).transform);
}

/** Distance between baselines, in line heights, above which a blank line is left (a new paragraph). */
const PARAGRAPH_GAP = 1.8;
/** Horizontal gap, in font heights, above which two runs on one line are separate words. */
const WORD_GAP = 0.15;

function runHeight(run: TextRun): number {
  const fromMatrix = Math.hypot(run.transform[2] ?? 0, run.transform[3] ?? 0);
  return run.height > 0 ? run.height : fromMatrix > 0 ? fromMatrix : 1;
}

export function pageText(items: readonly unknown[]): string {
  let out = '';
  let previous: { x: number; y: number; end: number; height: number } | undefined;
  /** Baseline of the last line that was ended, to size the gap to the next one. */
  let lastLineY: number | undefined;
  for (const item of items) {
    if (!isTextRun(item)) continue;
    const x = item.transform[4] ?? 0;
    const y = item.transform[5] ?? 0;
    const height = runHeight(item);
    if (item.str.length > 0) {
      const atLineStart = out.length === 0 || out.endsWith('\n');
      if (previous && !atLineStart && Math.abs(y - previous.y) > 0.5 * Math.max(height, previous.height)) {
        out += '\n';
        lastLineY = previous.y;
      } else if (previous && !atLineStart && x - previous.end > WORD_GAP * height && !/\s$/u.test(out) && !/^\s/u.test(item.str)) {
        out += ' ';
      }
      if ((out.endsWith('\n') || out.length === 0) && lastLineY !== undefined && Math.abs(lastLineY - y) > PARAGRAPH_GAP * height) {
        if (out.length > 0 && !out.endsWith('\n\n')) out += '\n';
      }
      out += item.str;
      previous = { x, y, end: x + item.width, height };
    }
    if (item.hasEOL && out.length > 0 && !out.endsWith('\n')) {
      out += '\n';
      lastLineY = previous?.y;
    }
  }
  return tidy(out);
}

/** Trailing spaces off every line, at most one blank line in a row, no blank lines at either end. */
export function tidy(text: string): string {
  return text
    .replace(/\r\n?/gu, '\n')
    .replace(/[^\S\n]+\n/gu, '\n')
    .replace(/\n{3,}/gu, '\n\n')
    .trim();
}
