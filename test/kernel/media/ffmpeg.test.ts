/**
 * kernel/media/ffmpeg: finding the binary (TESSERA_FFMPEG, PATH, npm package, in that order) and running
 * it: buffered and streamed output, typed errors with stderr, deadlines, cancellation, output caps, and no
 * process left behind when a stream is abandoned.
 */
import { mkdtemp, rm, symlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isRunning } from '../../support/processes.js';
import { InputError, PayloadTooLargeError, ServiceUnavailableError } from '../../../kernel/errors.js';
import { FfmpegNotFoundError, MediaDecodeError, MediaTimeoutError } from '../../../kernel/media/errors.js';
import { defaultFfmpeg, locateFfmpeg, runFfmpeg, streamFfmpeg } from '../../../kernel/media/ffmpeg.js';

/** One second of an 8 kHz sine as mono float32: 32,000 bytes. */
const SINE_ARGS = ['-f', 'lavfi', '-i', 'sine=frequency=440:sample_rate=8000:duration=1', '-ac', '1', '-f', 'f32le', 'pipe:1'];
/** A source that never ends, written nowhere: ffmpeg runs until stopped and prints nothing on stdout. */
const ENDLESS_NULL_ARGS = ['-re', '-f', 'lavfi', '-i', 'sine=frequency=440:sample_rate=8000', '-f', 'null', '-'];

let dir: string;
let binary: string;

beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'tessera-ffmpeg-test-'));
  binary = (await defaultFfmpeg()).path;
});

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('locateFfmpeg', () => {
  it('prefers TESSERA_FFMPEG, then PATH, then the npm package', async () => {
    const fromEnv = await locateFfmpeg({ env: { TESSERA_FFMPEG: binary, PATH: '' } });
    expect(fromEnv).toEqual({ path: binary, source: 'env' });

    const bin = path.join(dir, 'bin');
    await import('node:fs/promises').then((fs) => fs.mkdir(bin));
    await symlink(binary, path.join(bin, 'ffmpeg'));
    const fromPath = await locateFfmpeg({ env: { PATH: `/nonexistent${path.delimiter}${bin}` } });
    expect(fromPath).toEqual({ path: path.join(bin, 'ffmpeg'), source: 'path' });

    const fromNpm = await locateFfmpeg({ env: { PATH: '/nonexistent' } });
    expect(fromNpm.source).toBe('npm');
    expect(fromNpm.path).toMatch(/@ffmpeg-installer/);
  });

  it('fails loudly when TESSERA_FFMPEG points nowhere, and when there is no ffmpeg at all', async () => {
    await expect(locateFfmpeg({ env: { TESSERA_FFMPEG: '/nonexistent/ffmpeg', PATH: '' } })).rejects.toBeInstanceOf(FfmpegNotFoundError);
    const none = locateFfmpeg({ env: { PATH: '/nonexistent' }, useNpmPackage: false });
    await expect(none).rejects.toBeInstanceOf(FfmpegNotFoundError);
    await expect(none).rejects.toBeInstanceOf(ServiceUnavailableError);
  });
});

describe('runFfmpeg', () => {
  it('returns stdout and passes stderr lines to onStderrLine', async () => {
    const lines: string[] = [];
    const { stdout, exitCode } = await runFfmpeg(['-loglevel', 'info', ...SINE_ARGS], { onStderrLine: (l) => lines.push(l) });
    expect(exitCode).toBe(0);
    expect(stdout.length).toBe(8000 * 4);
    expect(lines.some((l) => l.includes('Output #0'))).toBe(true);
  });

  it('turns a failure into MediaDecodeError (an InputError) carrying the end of stderr', async () => {
    const error = await runFfmpeg(['-i', path.join(dir, 'missing.mp4'), '-f', 'null', '-']).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(MediaDecodeError);
    expect(error).toBeInstanceOf(InputError);
    const decode = error as MediaDecodeError;
    expect(decode.exitCode).not.toBe(0);
    expect(decode.message).toMatch(/No such file or directory/);
    expect(String(decode.details?.stderr)).toMatch(/missing\.mp4/);
  });

  it('reports a binary that cannot be run as FfmpegNotFoundError', async () => {
    await expect(runFfmpeg(['-version'], { ffmpegPath: path.join(dir, 'no-such-ffmpeg') })).rejects.toBeInstanceOf(FfmpegNotFoundError);
  });

  it('kills a run past its deadline with MediaTimeoutError', async () => {
    let pid = 0;
    const error = await runFfmpeg(ENDLESS_NULL_ARGS, { timeoutMs: 300, onSpawn: (p) => (pid = p) }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(MediaTimeoutError);
    expect(error).toBeInstanceOf(ServiceUnavailableError);
    expect(pid).toBeGreaterThan(0);
    expect(isRunning(pid)).toBe(false);
  });

  it('stops on abort and rejects with the signal reason', async () => {
    const controller = new AbortController();
    const reason = new Error('caller gave up');
    const run = runFfmpeg(ENDLESS_NULL_ARGS, { onSpawn: () => setImmediate(() => controller.abort(reason)), signal: controller.signal });
    await expect(run).rejects.toBe(reason);
    await expect(runFfmpeg(SINE_ARGS, { signal: AbortSignal.abort(reason) })).rejects.toBe(reason);
  });

  it('refuses output past maxOutputBytes', async () => {
    await expect(runFfmpeg(SINE_ARGS, { maxOutputBytes: 1000 })).rejects.toBeInstanceOf(PayloadTooLargeError);
  });
});

describe('streamFfmpeg', () => {
  it('yields all of stdout in chunks', async () => {
    let bytes = 0;
    for await (const chunk of streamFfmpeg(SINE_ARGS)) bytes += chunk.length;
    expect(bytes).toBe(8000 * 4);
  });

  it('kills ffmpeg when the consumer stops early', async () => {
    let pid = 0;
    const endless = ['-f', 'lavfi', '-i', 'sine=frequency=440:sample_rate=8000', '-f', 'f32le', 'pipe:1'];
    let chunks = 0;
    for await (const _chunk of streamFfmpeg(endless, { onSpawn: (p) => (pid = p) })) {
      if (++chunks === 2) break;
    }
    expect(pid).toBeGreaterThan(0);
    expect(isRunning(pid)).toBe(false);
  });

  it('fails with MediaTimeoutError when ffmpeg stalls, and MediaDecodeError when it fails', async () => {
    const stalled = async () => {
      for await (const _chunk of streamFfmpeg(ENDLESS_NULL_ARGS, { stallTimeoutMs: 300 })) {
        // nothing comes
      }
    };
    await expect(stalled()).rejects.toBeInstanceOf(MediaTimeoutError);
    const failing = async () => {
      for await (const _chunk of streamFfmpeg(['-i', path.join(dir, 'missing.wav'), '-f', 'f32le', 'pipe:1'])) {
        // nothing comes
      }
    };
    await expect(failing()).rejects.toBeInstanceOf(MediaDecodeError);
  });
});
