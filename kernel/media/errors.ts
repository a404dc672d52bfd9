/**
 * Errors of the media toolchain, in the kernel's vocabulary: a file ffmpeg cannot read is the caller's
 * input problem (400, not worth retrying), while a missing binary or a run that overstays its deadline
 * is the service's (503, a retry on a healthier machine may succeed).
 */
import { InputError, ServiceUnavailableError } from '../errors.js';

/** How much of ffmpeg's stderr an error keeps: the end, where ffmpeg says what went wrong. */
export const STDERR_TAIL_CHARS = 4_000;

export function stderrTail(stderr: string, chars = STDERR_TAIL_CHARS): string {
  const trimmed = stderr.trim();
  return trimmed.length <= chars ? trimmed : `…${trimmed.slice(-chars)}`;
}

/** ffmpeg ran and failed (or produced nothing usable): the media is unreadable, truncated or unsupported. */
export class MediaDecodeError extends InputError {
  constructor(
    message: string,
    readonly stderr: string,
    readonly exitCode: number | null,
  ) {
    super(message, { exit_code: exitCode, stderr: stderrTail(stderr) });
  }
}

/** ffmpeg ran longer than allowed (or stalled) and was killed. */
export class MediaTimeoutError extends ServiceUnavailableError {
  constructor(
    message: string,
    readonly timeoutMs: number,
    readonly stderr: string,
  ) {
    super(message, { timeout_ms: timeoutMs, stderr: stderrTail(stderr) });
  }
}

/** No usable ffmpeg binary: TESSERA_FFMPEG points nowhere, none on PATH, and the npm package is absent. */
export class FfmpegNotFoundError extends ServiceUnavailableError {}
