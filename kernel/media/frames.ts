/**
 * Single video frames as encoded images (JPEG or PNG), one ffmpeg run per frame: input seeking makes
 * each run decode only from the nearest keyframe before the requested time, so frames of a long video
 * cost the same wherever they are.
 */
import { InputError } from '../errors.js';
import { formatSeconds } from './audio.js';
import { MediaDecodeError } from './errors.js';
import { runFfmpeg, type FfmpegCallOptions } from './ffmpeg.js';

export type FrameFormat = 'jpeg' | 'png';

export interface ExtractFrameOptions extends FfmpegCallOptions {
  /** Seconds from the start of the media. Past the last frame, the last frame is returned. */
  timeSeconds: number;
  format?: FrameFormat;
  /** Longest side in pixels; larger frames are scaled down (aspect kept), smaller ones left alone. */
  maxSize?: number;
  /** JPEG quality on ffmpeg's qscale: 2 (best) to 31 (smallest). Default 3. */
  jpegQuality?: number;
}

const MAX_FRAME_BYTES = 64 * 1024 * 1024;

function frameArgs(file: string, time: number, options: ExtractFrameOptions): string[] {
  const args: string[] = [];
  if (time > 0) args.push('-ss', formatSeconds(time));
  args.push('-i', file, '-map', '0:v:0', '-an', '-sn', '-dn', '-frames:v', '1');
  if (options.maxSize !== undefined) {
    const size = Math.round(options.maxSize);
    // Fit inside size×size without upscaling; the quotes keep the commas of min() out of the filter graph syntax.
    args.push('-vf', `scale=w='min(iw,${size})':h='min(ih,${size})':force_original_aspect_ratio=decrease`);
  }
  if ((options.format ?? 'jpeg') === 'png') {
    args.push('-f', 'image2pipe', '-c:v', 'png', 'pipe:1');
  } else {
    args.push('-f', 'image2pipe', '-c:v', 'mjpeg', '-q:v', String(options.jpegQuality ?? 3), 'pipe:1');
  }
  return args;
}

/**
 * The frame shown at `timeSeconds`, encoded. A time at or past the end (durations are rounded, the last
 * frame may end early) falls back to slightly earlier times, then the first frame; MediaDecodeError
 * when the file yields no frame at all.
 */
export async function extractFrame(file: string, options: ExtractFrameOptions): Promise<Buffer> {
  const time = options.timeSeconds;
  if (!Number.isFinite(time) || time < 0) throw new InputError(`frame time must be a non-negative number of seconds, got ${time}`);
  if (options.maxSize !== undefined && !(options.maxSize >= 1)) throw new InputError(`maxSize must be at least 1, got ${options.maxSize}`);
  const attempts = [...new Set([time, time - 0.25, time - 1, 0].filter((t) => t >= 0).map((t) => Math.round(t * 1e6) / 1e6))];
  let lastStderr = '';
  for (const t of attempts) {
    const { stdout, stderr } = await runFfmpeg(frameArgs(file, t, options), {
      ...options,
      timeoutMs: options.timeoutMs ?? 60_000,
      maxOutputBytes: MAX_FRAME_BYTES,
    });
    if (stdout.length > 0) return stdout;
    lastStderr = stderr;
  }
  throw new MediaDecodeError(`no video frame could be decoded at or before ${time} s`, lastStderr, 0);
}
