/**
 * Cuts a stream of mono samples into fixed-length windows while it is being decoded, holding at most one
 * window (plus the block just received) in memory, so an hours-long recording costs no more than a clip.
 *
 * Windows start every `hop` samples and are `length` samples long. Like text chunks, the last window is
 * the first one that reaches the end of the signal: no window consists only of samples the previous one
 * already had. The final window may be shorter; it is dropped when shorter than `minLength`, unless it is
 * the only one.
 */

export interface SegmentPlan {
  /** Samples per window. */
  length: number;
  /** Samples from one window start to the next. */
  hop: number;
  /** Shortest final window kept. */
  minLength: number;
}

export interface AudioSegment {
  index: number;
  /** First sample (inclusive) and end (exclusive), counted from the start of the signal. */
  start: number;
  end: number;
  samples: Float32Array;
}

export class AudioSegmenter {
  private data = new Float32Array(0);
  /** Where the kept samples begin in `data`, and how many there are. */
  private offset = 0;
  private filled = 0;
  /** Samples received so far. */
  private total = 0;
  private nextStart = 0;
  private lastEnd = 0;
  private index = 0;
  private finished = false;

  constructor(private readonly plan: SegmentPlan) {
    for (const [name, value] of Object.entries(plan)) {
      if (!Number.isInteger(value) || value < (name === 'minLength' ? 0 : 1)) throw new RangeError(`${name} must be a positive integer, got ${value}`);
    }
  }

  /** Adds the next block of samples; returns the windows it completed. */
  push(block: Float32Array): AudioSegment[] {
    if (this.finished) throw new Error('AudioSegmenter: push after finish');
    this.append(block);
    const out: AudioSegment[] = [];
    while (this.nextStart + this.plan.length <= this.total) {
      out.push(this.emit(this.nextStart, this.nextStart + this.plan.length));
    }
    this.discardBeforeNextStart();
    return out;
  }

  /** Ends the signal; returns the final, shorter window when there is one worth keeping. */
  finish(): AudioSegment[] {
    if (this.finished) return [];
    this.finished = true;
    const start = this.nextStart;
    if (start >= this.total || (this.index > 0 && this.lastEnd >= this.total)) return [];
    if (this.index > 0 && this.total - start < this.plan.minLength) return [];
    return [this.emit(start, this.total)];
  }

  /** Samples received so far. */
  get received(): number {
    return this.total;
  }

  private emit(start: number, end: number): AudioSegment {
    const from = this.offset + (start - this.bufferStart);
    const segment = { index: this.index++, start, end, samples: this.data.slice(from, from + (end - start)) };
    this.lastEnd = end;
    this.nextStart = start + this.plan.hop;
    return segment;
  }

  private get bufferStart(): number {
    return this.total - this.filled;
  }

  private append(block: Float32Array): void {
    if (this.offset + this.filled + block.length > this.data.length) {
      // Move the kept samples to the front, growing the array only when they and the block do not fit.
      const needed = this.filled + block.length;
      const target = needed > this.data.length ? new Float32Array(Math.max(needed, this.data.length * 2)) : this.data;
      if (target === this.data) this.data.copyWithin(0, this.offset, this.offset + this.filled);
      else target.set(this.data.subarray(this.offset, this.offset + this.filled));
      this.data = target;
      this.offset = 0;
    }
    this.data.set(block, this.offset + this.filled);
    this.filled += block.length;
    this.total += block.length;
  }

  /** Samples before the next window start are never needed again (with gaps, that can be all of them). */
  private discardBeforeNextStart(): void {
    const drop = Math.min(this.filled, Math.max(0, this.nextStart - this.bufferStart));
    this.offset += drop;
    this.filled -= drop;
  }
}

/** Root mean square of the samples (0 for none). */
export function rms(samples: Float32Array): number {
  if (samples.length === 0) return 0;
  let sum = 0;
  for (let i = 0; i < samples.length; i++) sum += samples[i]! * samples[i]!;
  return Math.sqrt(sum / samples.length);
}

/** Digital silence floor: JSON has no -Infinity, and nothing real is quieter than 24-bit quantisation. */
export const SILENCE_DBFS = -120;

/** Level in dB relative to full scale (a full-scale square wave is 0 dBFS), floored at SILENCE_DBFS. */
export function toDbfs(level: number): number {
  return level > 0 ? Math.max(SILENCE_DBFS, 20 * Math.log10(level)) : SILENCE_DBFS;
}
