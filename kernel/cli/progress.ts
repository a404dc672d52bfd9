/**
 * Progress on stderr: on a terminal one line redrawn in place (a bar, counts, rate, ETA); otherwise (a pipe,
 * a CI log) plain lines, one per tenth of the way or every few seconds, so logs stay readable.
 */

export interface ProgressState {
  done: number;
  total: number;
  /** What follows the bar: counts, rate, ETA. */
  detail: string;
}

const REDRAW_MS = 100;
const PLAIN_EVERY_MS = 5000;
const BAR_WIDTH = 24;

export class Progress {
  private readonly tty: boolean;
  private lastDraw = 0;
  private lastPlain = 0;
  private lastTenth = -1;
  private drawn = false;

  constructor(
    private readonly label: string,
    private readonly stream: NodeJS.WriteStream = process.stderr,
  ) {
    this.tty = Boolean(stream.isTTY) && process.env.TERM !== 'dumb';
  }

  update(state: ProgressState, force = false): void {
    const now = Date.now();
    const fraction = state.total > 0 ? Math.min(1, state.done / state.total) : 0;
    if (this.tty) {
      if (!force && now - this.lastDraw < REDRAW_MS) return;
      this.lastDraw = now;
      const filled = Math.round(fraction * BAR_WIDTH);
      const bar = `${'█'.repeat(filled)}${'░'.repeat(BAR_WIDTH - filled)}`;
      const line = `${this.label} ${bar} ${(fraction * 100).toFixed(0).padStart(3)}%  ${state.detail}`;
      const width = this.stream.columns || 120;
      this.stream.write(`\r\x1b[K${line.length > width - 1 ? line.slice(0, width - 1) : line}`);
      this.drawn = true;
      return;
    }
    const tenth = Math.floor(fraction * 10);
    if (force || tenth > this.lastTenth || now - this.lastPlain >= PLAIN_EVERY_MS) {
      this.lastTenth = tenth;
      this.lastPlain = now;
      this.stream.write(`${this.label} ${(fraction * 100).toFixed(0)}%  ${state.detail}\n`);
    }
  }

  /** The last state, then a line of its own for what comes next. */
  finish(state: ProgressState): void {
    this.update(state, true);
    if (this.tty && this.drawn) this.stream.write('\n');
  }
}

/** A rate and ETA from the work done since `startedAt` (ms). */
export function rateOf(done: number, total: number, startedAt: number): { perSecond: number; etaSeconds: number | null } {
  const elapsed = (Date.now() - startedAt) / 1000;
  const perSecond = elapsed > 0 ? done / elapsed : 0;
  return { perSecond, etaSeconds: perSecond > 0 ? (total - done) / perSecond : null };
}
