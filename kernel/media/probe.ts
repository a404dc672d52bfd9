/**
 * What a media file holds (duration, streams, frame size, frame rate, sample rate), read from the
 * stream summary `ffmpeg -i <file>` prints on stderr. There is no ffprobe in the npm build, so this
 * parser is the probe; it understands the summary as ffmpeg 4.x through 7.x print it. When the
 * container does not state a duration (raw streams, some live recordings), it is measured by decoding.
 */
import { MediaDecodeError } from './errors.js';
import { runFfmpeg, type FfmpegCallOptions } from './ffmpeg.js';

export interface VideoStreamInfo {
  /** Index of the stream in the file (`0:<index>`). */
  index: number;
  codec: string;
  /** Frame size as displayed: swapped when the stream is rotated by ±90° (ffmpeg applies the rotation). */
  width: number;
  height: number;
  /** Frames per second, when stated (average rate, else the base rate). */
  fps: number | null;
  /** Display rotation in degrees (0, 90, 180, 270). */
  rotation: number;
}

export interface AudioStreamInfo {
  index: number;
  codec: string;
  sampleRate: number | null;
  channels: number | null;
  /** As ffmpeg names it: mono, stereo, 5.1(side), ... */
  channelLayout: string | null;
}

export interface StreamInfo {
  index: number;
  kind: 'video' | 'audio' | 'subtitle' | 'data' | 'attachment';
  codec: string;
  /** A still picture embedded in an audio file (cover art): not a video. */
  attachedPicture: boolean;
}

export interface MediaProbe {
  /** Container format names, e.g. `mov,mp4,m4a,3gp,3g2,mj2`. */
  format: string;
  /** Seconds; measured by decoding when the container does not say (null when even that found nothing). */
  durationSeconds: number | null;
  /** The container's start time: timestamps in the file (e.g. scene pts) are offset by it. */
  startSeconds: number;
  hasVideo: boolean;
  hasAudio: boolean;
  /** The first real video stream (cover art excluded), and the first audio stream. */
  video: VideoStreamInfo | null;
  audio: AudioStreamInfo | null;
  streams: StreamInfo[];
}

export interface ProbeOptions extends FfmpegCallOptions {
  /** Decode the file to measure its duration when the container does not state it (default true). */
  measureDuration?: boolean;
}

/** Demuxers that accept files which are not audio or video. */
const NOT_MEDIA_FORMATS = new Set(['tty']);
const STREAM_LINE = /^\s*Stream #0:(\d+)(?:\[0x[0-9a-f]+\])?(?:\([^)]*\))?: (Video|Audio|Subtitle|Data|Attachment): (.*)$/i;
const DURATION = /Duration:\s*(?:(\d+):(\d{2}):(\d{2}(?:\.\d+)?)|N\/A)/;
const START = /\bstart:\s*(-?\d+(?:\.\d+)?)/;
const FRAME_SIZE = /(?:^|,\s*)(\d{1,5})x(\d{1,5})(?=[\s,[]|$)/;
const ROTATION = /displaymatrix:\s*rotation of\s*(-?\d+(?:\.\d+)?)\s*degrees/i;
const ROTATE_TAG = /^\s*rotate\s*:\s*(-?\d+(?:\.\d+)?)\s*$/i;

function rate(text: string, unit: 'fps' | 'tbr'): number | null {
  const match = new RegExp(`(\\d+(?:\\.\\d+)?)(k?)\\s+${unit}\\b`).exec(text);
  if (!match) return null;
  const value = Number(match[1]) * (match[2] === 'k' ? 1000 : 1);
  return Number.isFinite(value) && value > 0 ? value : null;
}

/** `mono` 1, `stereo` 2, `5.1(side)` 6, `7.1` 8, `4 channels` 4, ... */
export function channelCount(layout: string): number | null {
  const lower = layout.toLowerCase();
  const named: Record<string, number> = { mono: 1, stereo: 2, quad: 4, hexagonal: 6, octagonal: 8, downmix: 2 };
  const base = lower.replace(/\(.*\)$/, '');
  if (named[base] !== undefined) return named[base]!;
  const dotted = /^(\d+)\.(\d+)$/.exec(base);
  if (dotted) return Number(dotted[1]) + Number(dotted[2]);
  const counted = /^(\d+) channels?$/.exec(base);
  if (counted) return Number(counted[1]);
  return null;
}

function normaliseRotation(degrees: number): number {
  return (((Math.round(degrees / 90) * 90) % 360) + 360) % 360;
}

/**
 * Parses the stderr of `ffmpeg -i <file>` (input #0 only). Throws MediaDecodeError when ffmpeg did not
 * recognise the input at all.
 */
export function parseProbeOutput(stderr: string): MediaProbe {
  const lines = stderr.split(/\r?\n/);
  const inputAt = lines.findIndex((l) => /^Input #0, /.test(l));
  if (inputAt < 0) {
    const last = stderr.trim().split('\n').pop()?.trim() || 'no media found';
    throw new MediaDecodeError(`not a readable media file: ${last}`, stderr, null);
  }
  const format = /^Input #0, (.*), from '/.exec(lines[inputAt]!)?.[1] ?? 'unknown';
  // ffmpeg renders any text file as "tty" (ANSI art) video: for us a text file is never media.
  if (NOT_MEDIA_FORMATS.has(format)) throw new MediaDecodeError(`not a media file (ffmpeg reads it as '${format}')`, stderr, null);
  let durationSeconds: number | null = null;
  let startSeconds = 0;
  const streams: StreamInfo[] = [];
  const videos: VideoStreamInfo[] = [];
  const audios: AudioStreamInfo[] = [];
  let current: VideoStreamInfo | undefined;

  for (let i = inputAt + 1; i < lines.length; i++) {
    const line = lines[i]!;
    // The summary of input #0 ends where another input or the output section begins.
    if (/^(Input|Output) #\d+/.test(line) || /^Stream mapping:/.test(line)) break;
    const duration = DURATION.exec(line);
    if (duration && /^\s*Duration:/.test(line)) {
      if (duration[1] !== undefined) {
        durationSeconds = Number(duration[1]) * 3600 + Number(duration[2]) * 60 + Number(duration[3]);
      }
      const start = START.exec(line);
      if (start) startSeconds = Number(start[1]);
      continue;
    }
    const stream = STREAM_LINE.exec(line);
    if (stream) {
      current = undefined;
      const index = Number(stream[1]);
      const kind = stream[2]!.toLowerCase() as StreamInfo['kind'];
      const description = stream[3]!;
      const codec = /^([\w-]+)/.exec(description)?.[1] ?? 'unknown';
      const attachedPicture = /\(attached pic\)/i.test(description);
      streams.push({ index, kind, codec, attachedPicture });
      if (kind === 'video' && !attachedPicture) {
        const size = FRAME_SIZE.exec(description);
        const video: VideoStreamInfo = {
          index,
          codec,
          width: size ? Number(size[1]) : 0,
          height: size ? Number(size[2]) : 0,
          fps: rate(description, 'fps') ?? rate(description, 'tbr'),
          rotation: 0,
        };
        videos.push(video);
        current = video;
      } else if (kind === 'audio') {
        const hz = /(\d+) Hz/.exec(description);
        const layout = /\d+ Hz,\s*([^,]+)/.exec(description)?.[1]?.trim() ?? null;
        audios.push({
          index,
          codec,
          sampleRate: hz ? Number(hz[1]) : null,
          channels: layout ? channelCount(layout) : null,
          channelLayout: layout,
        });
      }
      continue;
    }
    // Rotation sits in the lines under its stream: side data (ffmpeg ≥ 4) or an older `rotate` tag.
    if (current) {
      const rotation = ROTATION.exec(line) ?? ROTATE_TAG.exec(line);
      if (rotation) current.rotation = normaliseRotation(Number(rotation[1]));
    }
  }

  for (const video of videos) {
    if (video.rotation === 90 || video.rotation === 270) [video.width, video.height] = [video.height, video.width];
  }
  const video = videos[0] ?? null;
  const audio = audios[0] ?? null;
  return { format, durationSeconds, startSeconds, hasVideo: video !== null, hasAudio: audio !== null, video, audio, streams };
}

/** Parses the last `out_time` of `-progress` output: how far decoding got, in seconds. */
export function parseProgressTime(progress: string): number | null {
  let seconds: number | null = null;
  for (const match of progress.matchAll(/^out_time=(-?)(\d+):(\d{2}):(\d{2}(?:\.\d+)?)\s*$/gm)) {
    const value = Number(match[2]) * 3600 + Number(match[3]) * 60 + Number(match[4]);
    seconds = match[1] === '-' ? 0 : value;
  }
  return seconds;
}

/** Decodes the whole file (video and audio, nothing written) to find how long it plays. */
async function measureDuration(file: string, options: FfmpegCallOptions): Promise<number | null> {
  const { stdout } = await runFfmpeg(
    ['-i', file, '-map', '0:v:0?', '-map', '0:a:0?', '-f', 'null', '-progress', 'pipe:1', '-'],
    { ...options, timeoutMs: options.timeoutMs ?? 600_000, maxOutputBytes: 16 * 1024 * 1024 },
  );
  const seconds = parseProgressTime(stdout.toString('utf8'));
  return seconds !== null && seconds > 0 ? seconds : null;
}

/** Probes a media file on disk. MediaDecodeError when ffmpeg cannot read it. */
export async function probeMedia(file: string, options: ProbeOptions = {}): Promise<MediaProbe> {
  // `ffmpeg -i` with no output exits 1 after printing the summary: that is the expected outcome here.
  const { stderr } = await runFfmpeg(['-i', file], { ...options, timeoutMs: options.timeoutMs ?? 30_000, acceptExitCodes: [0, 1], maxOutputBytes: 1024 });
  const probe = parseProbeOutput(stderr);
  if (probe.durationSeconds === null && options.measureDuration !== false && (probe.hasVideo || probe.hasAudio)) {
    probe.durationSeconds = await measureDuration(file, options);
  }
  return probe;
}
