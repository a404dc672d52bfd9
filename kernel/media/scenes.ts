/**
 * Scene-change detection with ffmpeg's `scene` score (0..1, how different a frame is from the one
 * before): frames scoring above a threshold start a new scene. Runs `select='gt(scene,T)',metadata=print`
 * over a downscaled copy of the first video stream and reads the selected frames' times and scores
 * from stderr line by line, so long videos never buffer their log.
 */
import { InputError } from '../errors.js';
import { runFfmpeg, type FfmpegCallOptions } from './ffmpeg.js';

export interface SceneChange {
  /** Seconds from the start of the media where the new scene's first frame is shown. */
  timeSeconds: number;
  /** ffmpeg's scene score of that frame (above the threshold). */
  score: number;
}

export interface DetectScenesOptions extends FfmpegCallOptions {
  /** Score above which a frame starts a new scene, in (0, 1). */
  threshold: number;
  /** The media's start time (MediaProbe.startSeconds): frame timestamps are made relative to it. */
  startSeconds?: number;
  /** Frames are scaled to at most this width before scoring (faster, and barely changes the scores). Default 320. */
  analysisWidth?: number;
}

/** Reads `metadata=print` lines: `frame:N pts:P pts_time:T` followed by `lavfi.scene_score=S`. */
export class SceneLogParser {
  readonly changes: SceneChange[] = [];
  private pendingTime: number | undefined;

  constructor(private readonly startSeconds = 0) {}

  line(line: string): void {
    if (!line.includes('Parsed_metadata')) return;
    const time = /\bpts_time:\s*(-?\d+(?:\.\d+)?(?:e-?\d+)?)/.exec(line);
    if (time) {
      this.pendingTime = Number(time[1]);
      return;
    }
    const score = /lavfi\.scene_score=(\d+(?:\.\d+)?)/.exec(line);
    if (score && this.pendingTime !== undefined) {
      const timeSeconds = Math.max(0, this.pendingTime - this.startSeconds);
      this.changes.push({ timeSeconds: Math.round(timeSeconds * 1e6) / 1e6, score: Number(score[1]) });
      this.pendingTime = undefined;
    }
  }
}

/** The scene changes of the first video stream of `file`, in time order (the first frame never counts). */
export async function detectSceneChanges(file: string, options: DetectScenesOptions): Promise<SceneChange[]> {
  const { threshold } = options;
  if (!(threshold > 0 && threshold < 1)) throw new InputError(`scene threshold must be between 0 and 1 (exclusive), got ${threshold}`);
  const width = Math.max(16, Math.round(options.analysisWidth ?? 320));
  const parser = new SceneLogParser(options.startSeconds ?? 0);
  const filter = `scale=w='min(iw,${width})':h=-2,select='gt(scene,${threshold})',metadata=print`;
  await runFfmpeg(['-i', file, '-map', '0:v:0', '-an', '-sn', '-dn', '-vf', filter, '-f', 'null', '-'], {
    ...options,
    timeoutMs: options.timeoutMs ?? 1_800_000,
    maxOutputBytes: 1024,
    onStderrLine: (line) => parser.line(line),
  });
  // The first frame has no predecessor (score 0); a change at 0 would be an empty scene.
  return parser.changes.filter((c) => c.timeSeconds > 0).sort((a, b) => a.timeSeconds - b.timeSeconds);
}
