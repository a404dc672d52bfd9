/**
 * Finding and running ffmpeg. Every media helper (probe, audio decoding, frames, scene detection) goes
 * through `runFfmpeg` or `streamFfmpeg`: a separate process started with spawn (no shell, arguments
 * passed as they are), so decoding never runs on the caller's event loop; each run has a deadline,
 * can be cancelled, and turns a failure into a typed error carrying the end of ffmpeg's stderr.
 *
 * Which binary: `TESSERA_FFMPEG` when set (it must exist: a wrong explicit setting fails loudly instead
 * of silently using another build), else `ffmpeg` on PATH (e.g. Debian's), else the static build of the
 * npm package `@ffmpeg-installer/ffmpeg` (ffmpeg 4.1, without ffprobe, which is why nothing here uses
 * ffprobe).
 */
import { spawn, type ChildProcessByStdio } from 'node:child_process';
import { constants } from 'node:fs';
import { access, stat } from 'node:fs/promises';
import { createRequire } from 'node:module';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { PayloadTooLargeError } from '../errors.js';
import { FfmpegNotFoundError, MediaDecodeError, MediaTimeoutError } from './errors.js';
import type { ProcessSlots } from './process-slots.js';

export type FfmpegSource = 'env' | 'path' | 'npm';

export interface FfmpegLocation {
  path: string;
  /** Where it was found: TESSERA_FFMPEG, PATH, or the npm package. */
  source: FfmpegSource;
}

export interface LocateFfmpegOptions {
  /** The environment to read TESSERA_FFMPEG and PATH from (default: this process's). */
  env?: NodeJS.ProcessEnv;
  /** Skip the npm package (to test the lookup order). */
  useNpmPackage?: boolean;
}

async function isExecutableFile(file: string): Promise<boolean> {
  try {
    const info = await stat(file);
    if (!info.isFile()) return false;
    await access(file, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

async function findOnPath(envPath: string | undefined): Promise<string | undefined> {
  const names = process.platform === 'win32' ? ['ffmpeg.exe', 'ffmpeg'] : ['ffmpeg'];
  for (const dir of (envPath ?? '').split(path.delimiter)) {
    if (!dir) continue;
    for (const name of names) {
      const candidate = path.join(dir, name);
      if (await isExecutableFile(candidate)) return candidate;
    }
  }
  return undefined;
}

function npmPackageBinary(): string | undefined {
  try {
    const require = createRequire(import.meta.url);
    // The package throws a plain string when its platform binary is missing: any throw means "not there".
    const installed = require('@ffmpeg-installer/ffmpeg') as { path?: unknown };
    return typeof installed.path === 'string' ? installed.path : undefined;
  } catch {
    return undefined;
  }
}

/** Finds ffmpeg: TESSERA_FFMPEG, then PATH, then the npm package. FfmpegNotFoundError when none is usable. */
export async function locateFfmpeg(options: LocateFfmpegOptions = {}): Promise<FfmpegLocation> {
  const env = options.env ?? process.env;
  const explicit = env.TESSERA_FFMPEG?.trim();
  if (explicit) {
    if (await isExecutableFile(explicit)) return { path: explicit, source: 'env' };
    throw new FfmpegNotFoundError(`TESSERA_FFMPEG is set to '${explicit}', which is not an executable file`, { path: explicit });
  }
  const onPath = await findOnPath(env.PATH);
  if (onPath) return { path: onPath, source: 'path' };
  if (options.useNpmPackage !== false) {
    const packaged = npmPackageBinary();
    if (packaged && (await isExecutableFile(packaged))) return { path: packaged, source: 'npm' };
  }
  throw new FfmpegNotFoundError('ffmpeg not found: set TESSERA_FFMPEG, install ffmpeg on PATH, or install @ffmpeg-installer/ffmpeg');
}

let located: Promise<FfmpegLocation> | undefined;

/** The process-wide ffmpeg, located once (a failed lookup is retried on the next call). */
export function defaultFfmpeg(): Promise<FfmpegLocation> {
  located ??= locateFfmpeg().catch((err: unknown) => {
    located = undefined;
    throw err;
  });
  return located;
}

// ---------------------------------------------------------------------------------------------- running

/** What every helper that runs ffmpeg accepts. */
export interface FfmpegCallOptions {
  /** A binary to use instead of the located one. */
  ffmpegPath?: string;
  /** Deadline of the whole run (ms); the process is killed when it passes. */
  timeoutMs?: number;
  /** Cancels the run (the process is killed; the promise rejects with the signal's reason). */
  signal?: AbortSignal;
  /** Called with the process id once ffmpeg has been started (observability, tests). */
  onSpawn?: (pid: number) => void;
  /** Waits for one of these before starting ffmpeg, and gives it back when ffmpeg is gone (a bound per process). */
  slots?: ProcessSlots;
}

export interface RunFfmpegOptions extends FfmpegCallOptions {
  /** Most stdout bytes kept; past it the process is killed and the run fails with PayloadTooLargeError. */
  maxOutputBytes?: number;
  /** Called with every complete stderr line as it arrives (for parsing long outputs without keeping them). */
  onStderrLine?: (line: string) => void;
  /** Exit codes that count as success (default [0]; `ffmpeg -i file` alone exits 1 by design). */
  acceptExitCodes?: readonly number[];
}

export interface FfmpegResult {
  stdout: Buffer;
  /** stderr, or its last part when it was long. */
  stderr: string;
  exitCode: number | null;
}

export const DEFAULT_TIMEOUT_MS = 120_000;
const DEFAULT_MAX_OUTPUT_BYTES = 256 * 1024 * 1024;
/** stderr kept in memory; scene detection can print megabytes, errors need only the end. */
const STDERR_KEEP_CHARS = 256 * 1024;

/** Arguments every run starts with: no banner, never read stdin, no progress lines. */
const COMMON_ARGS = ['-hide_banner', '-nostdin', '-nostats'];

type Child = ChildProcessByStdio<null, Readable, Readable>;

interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

/** One ffmpeg process: stderr collected (bounded) and split into lines, exit awaited, killable once. */
class FfmpegProcess {
  readonly child: Child;
  readonly exited: Promise<Exit>;
  private stderrText = '';
  private partialLine = '';

  constructor(
    readonly binary: string,
    readonly args: readonly string[],
    private readonly onStderrLine?: (line: string) => void,
  ) {
    this.child = spawn(binary, [...COMMON_ARGS, ...args], { stdio: ['ignore', 'pipe', 'pipe'], windowsHide: true });
    this.child.stderr.setEncoding('utf8');
    this.child.stderr.on('data', (text: string) => this.takeStderr(text));
    this.exited = new Promise<Exit>((resolve, reject) => {
      this.child.once('error', (err: NodeJS.ErrnoException) => {
        if (err.code === 'ENOENT' || err.code === 'EACCES') {
          reject(new FfmpegNotFoundError(`cannot run ffmpeg at '${binary}': ${err.message}`, { path: binary }));
        } else {
          reject(err);
        }
      });
      this.child.once('close', (code, signal) => {
        if (this.partialLine) this.emitLine(this.partialLine);
        this.partialLine = '';
        resolve({ code, signal });
      });
    });
    // Callers await `exited` only after reading stdout; keep a spawn failure from being reported as unhandled meanwhile.
    this.exited.catch(() => undefined);
  }

  get stderr(): string {
    return this.stderrText;
  }

  kill(): void {
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill('SIGKILL');
  }

  /** The error for a run that ended with an exit code not in `accepted`, or undefined when it succeeded. */
  failure(exit: Exit, accepted: readonly number[]): MediaDecodeError | undefined {
    if (exit.code !== null && accepted.includes(exit.code)) return undefined;
    const lines = this.stderrText.trim().split('\n');
    const last = lines[lines.length - 1]?.trim() || (exit.signal ? `killed by ${exit.signal}` : 'no message');
    return new MediaDecodeError(`ffmpeg failed (exit ${exit.code ?? exit.signal}): ${last}`, this.stderrText, exit.code);
  }

  timeoutError(timeoutMs: number, what: string): MediaTimeoutError {
    return new MediaTimeoutError(`ffmpeg ${what} after ${timeoutMs} ms and was stopped`, timeoutMs, this.stderrText);
  }

  private takeStderr(text: string): void {
    this.stderrText += text;
    if (this.stderrText.length > 2 * STDERR_KEEP_CHARS) this.stderrText = this.stderrText.slice(-STDERR_KEEP_CHARS);
    if (!this.onStderrLine) return;
    const parts = (this.partialLine + text).split(/\r?\n|\r/);
    this.partialLine = parts.pop() ?? '';
    for (const line of parts) this.emitLine(line);
  }

  private emitLine(line: string): void {
    if (line.length > 0) this.onStderrLine?.(line);
  }
}

async function binaryFor(options: FfmpegCallOptions): Promise<string> {
  return options.ffmpegPath ?? (await defaultFfmpeg()).path;
}

/** Runs ffmpeg to completion and returns its stdout (bounded) and stderr. */
export async function runFfmpeg(args: readonly string[], options: RunFfmpegOptions = {}): Promise<FfmpegResult> {
  options.signal?.throwIfAborted();
  const binary = await binaryFor(options);
  const release = options.slots ? await options.slots.acquire(options.signal) : undefined;
  try {
    return await runAcquired(binary, args, options);
  } finally {
    release?.();
  }
}

async function runAcquired(binary: string, args: readonly string[], options: RunFfmpegOptions): Promise<FfmpegResult> {
  // Waiting for a slot may have taken a while: a run canceled meanwhile does not start.
  options.signal?.throwIfAborted();
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const maxOutputBytes = options.maxOutputBytes ?? DEFAULT_MAX_OUTPUT_BYTES;
  const proc = new FfmpegProcess(binary, args, options.onStderrLine);
  if (proc.child.pid !== undefined) options.onSpawn?.(proc.child.pid);

  let stopped: Error | undefined;
  const stop = (reason: Error): void => {
    stopped ??= reason;
    proc.kill();
  };
  const timer = setTimeout(() => stop(proc.timeoutError(timeoutMs, 'ran longer than allowed')), timeoutMs);
  const onAbort = (): void => stop(toError(options.signal?.reason));
  options.signal?.addEventListener('abort', onAbort, { once: true });

  const chunks: Buffer[] = [];
  let size = 0;
  proc.child.stdout.on('data', (chunk: Buffer) => {
    size += chunk.length;
    if (size > maxOutputBytes) {
      stop(new PayloadTooLargeError(`ffmpeg output exceeds ${maxOutputBytes} bytes`, { max_bytes: maxOutputBytes }));
      return;
    }
    chunks.push(chunk);
  });

  try {
    const exit = await proc.exited;
    if (stopped) throw stopped;
    const failed = proc.failure(exit, options.acceptExitCodes ?? [0]);
    if (failed) throw failed;
    return { stdout: Buffer.concat(chunks), stderr: proc.stderr, exitCode: exit.code };
  } finally {
    clearTimeout(timer);
    options.signal?.removeEventListener('abort', onAbort);
    proc.kill();
    // The slot (if any) is given back by the caller: only once the process is really gone.
    await proc.exited.catch(() => undefined);
  }
}

export interface StreamFfmpegOptions extends FfmpegCallOptions {
  /**
   * Longest wait for the next stdout chunk (ms). Unlike `timeoutMs` it only runs while the consumer waits,
   * so a slow consumer (ffmpeg paused by backpressure) never counts against ffmpeg. Default 60 s.
   */
  stallTimeoutMs?: number;
  onStderrLine?: (line: string) => void;
}

const DEFAULT_STALL_MS = 60_000;

/**
 * Runs ffmpeg and yields its stdout as it comes, with backpressure (ffmpeg waits while the consumer is
 * busy). Fails with a typed error when ffmpeg exits non-zero; stopping the iteration early kills it.
 * `timeoutMs` (optional here) bounds the whole run including the consumer's time.
 */
export async function* streamFfmpeg(args: readonly string[], options: StreamFfmpegOptions = {}): AsyncGenerator<Buffer, void, undefined> {
  options.signal?.throwIfAborted();
  const binary = await binaryFor(options);
  const release = options.slots ? await options.slots.acquire(options.signal) : undefined;
  try {
    yield* streamAcquired(binary, args, options);
  } finally {
    release?.();
  }
}

async function* streamAcquired(binary: string, args: readonly string[], options: StreamFfmpegOptions): AsyncGenerator<Buffer, void, undefined> {
  options.signal?.throwIfAborted();
  const stallMs = options.stallTimeoutMs ?? DEFAULT_STALL_MS;
  const proc = new FfmpegProcess(binary, args, options.onStderrLine);
  if (proc.child.pid !== undefined) options.onSpawn?.(proc.child.pid);

  let stopped: Error | undefined;
  let wake: ((reason: Error) => void) | undefined;
  const stop = (reason: Error): void => {
    stopped ??= reason;
    proc.kill();
    wake?.(reason);
  };
  const overall = options.timeoutMs === undefined
    ? undefined
    : setTimeout(() => stop(proc.timeoutError(options.timeoutMs!, 'ran longer than allowed')), options.timeoutMs);
  const onAbort = (): void => stop(toError(options.signal?.reason));
  options.signal?.addEventListener('abort', onAbort, { once: true });

  const reader = proc.child.stdout[Symbol.asyncIterator]() as AsyncIterator<Buffer>;
  try {
    for (;;) {
      const next = await new Promise<IteratorResult<Buffer>>((resolve, reject) => {
        if (stopped) return reject(stopped);
        const stall = setTimeout(() => stop(proc.timeoutError(stallMs, 'produced no output for too long')), stallMs);
        const wakeThis = reject;
        wake = wakeThis;
        reader.next().then(resolve, reject).finally(() => {
          clearTimeout(stall);
          // The next wait may already have begun: only clear this wait's hook.
          if (wake === wakeThis) wake = undefined;
        });
      });
      if (stopped) throw stopped;
      if (next.done) break;
      yield next.value;
    }
    const exit = await proc.exited;
    if (stopped) throw stopped;
    const failed = proc.failure(exit, [0]);
    if (failed) throw failed;
  } finally {
    if (overall) clearTimeout(overall);
    options.signal?.removeEventListener('abort', onAbort);
    proc.kill();
    // Let the stream release its handle, and the process be gone, whatever happened to the iteration.
    await reader.return?.().catch(() => undefined);
    await proc.exited.catch(() => undefined);
  }
}

function toError(reason: unknown): Error {
  return reason instanceof Error ? reason : new Error(String(reason ?? 'aborted'));
}
