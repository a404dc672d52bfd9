/**
 * kernel/media helpers on media made by the test: probing (also the summary formats of newer ffmpeg
 * releases), audio decoding whole and streamed, single frames, scene changes, and copying blobs to temp
 * files for ffmpeg.
 */
import { access, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LocalBlobStore } from '../../../kernel/blobs/local.js';
import { InputError, NotFoundError } from '../../../kernel/errors.js';
import { decodeAudio, float32FromBytes, streamAudio } from '../../../kernel/media/audio.js';
import { extensionFor } from '../../../kernel/media/blob-file.js';
import { MediaDecodeError } from '../../../kernel/media/errors.js';
import { runFfmpeg } from '../../../kernel/media/ffmpeg.js';
import { extractFrame } from '../../../kernel/media/frames.js';
import { openMediaInput } from '../../../kernel/media/media-input.js';
import { channelCount, parseProbeOutput, parseProgressTime, probeMedia } from '../../../kernel/media/probe.js';
import { detectSceneChanges, SceneLogParser } from '../../../kernel/media/scenes.js';
import { colourName, renderVideo, sine, wavBytes } from '../../support/media/av.js';

let dir: string;
const files = {
  twoScenes: '',
  threeScenesSilent: '',
  rotated: '',
  wav: '',
  rawStream: '',
  text: '',
  noise: '',
};

function rmsOf(samples: Float32Array): number {
  let sum = 0;
  for (const x of samples) sum += x * x;
  return Math.sqrt(sum / samples.length);
}

/** Sign changes per second / 2: the frequency of a pure tone. */
function toneFrequency(samples: Float32Array, sampleRate: number): number {
  let crossings = 0;
  for (let i = 1; i < samples.length; i++) if (samples[i - 1]! < 0 !== samples[i]! < 0) crossings++;
  return crossings / 2 / (samples.length / sampleRate);
}

beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'tessera-media-test-'));
  files.twoScenes = path.join(dir, 'two-scenes.mp4');
  files.threeScenesSilent = path.join(dir, 'three-scenes.mp4');
  files.rotated = path.join(dir, 'rotated.mp4');
  files.wav = path.join(dir, 'tone.wav');
  files.rawStream = path.join(dir, 'raw.m4v');
  files.text = path.join(dir, 'notes.txt');
  files.noise = path.join(dir, 'noise.bin');
  await Promise.all([
    renderVideo(files.twoScenes, { scenes: [{ color: 'red', seconds: 2 }, { color: 'blue', seconds: 2 }], toneHz: 440 }),
    // Scenes of clearly different brightness: ffmpeg's scene score compares luma, and red and green (#008000) have
    // nearly the same (Debian's ffmpeg 5.1.9 scores that cut 0).
    renderVideo(files.threeScenesSilent, {
      scenes: [{ color: 'red', seconds: 1 }, { color: 'white', seconds: 1 }, { color: 'blue', seconds: 1 }],
      width: 160,
      height: 120,
    }),
    renderVideo(files.rotated, { scenes: [{ color: 'red', seconds: 1 }], rotate: 90 }),
    // Stereo 44.1 kHz, 3 s of 440 Hz at half scale in both channels.
    writeFile(files.wav, wavBytes([sine(440, 3, 44_100, 0.5), sine(440, 3, 44_100, 0.5)], 44_100)),
    // An elementary stream: no container, so no stated duration.
    runFfmpeg(['-f', 'lavfi', '-i', 'color=c=blue:s=64x48:r=25:d=2', '-c:v', 'mpeg4', '-f', 'm4v', '-y', path.join(dir, 'raw.m4v')]),
    writeFile(files.text, 'just some text, not media\n'.repeat(50)),
    writeFile(files.noise, Buffer.from(Array.from({ length: 4096 }, (_, i) => (i * 7919 + 13) % 251))),
  ]);
});

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('probeMedia', () => {
  it('reads duration, streams, frame size, frame rate and audio format of a video', async () => {
    const probe = await probeMedia(files.twoScenes);
    expect(probe.durationSeconds).toBeGreaterThan(3.9);
    expect(probe.durationSeconds).toBeLessThan(4.2);
    expect(probe.hasVideo && probe.hasAudio).toBe(true);
    expect(probe.video).toMatchObject({ codec: 'mpeg4', width: 320, height: 240, fps: 25, rotation: 0 });
    expect(probe.audio).toMatchObject({ codec: 'aac', sampleRate: 44_100, channels: 1, channelLayout: 'mono' });
    expect(probe.format).toMatch(/mp4/);
    expect(probe.streams.map((s) => s.kind)).toEqual(['video', 'audio']);
  });

  it('reads a WAV (audio only) and a video without audio', async () => {
    const wav = await probeMedia(files.wav);
    expect(wav.hasVideo).toBe(false);
    expect(wav.audio).toMatchObject({ sampleRate: 44_100, channels: 2 });
    expect(wav.durationSeconds).toBeCloseTo(3, 2);
    const silent = await probeMedia(files.threeScenesSilent);
    expect(silent.hasAudio).toBe(false);
    expect(silent.video).toMatchObject({ width: 160, height: 120 });
  });

  it('swaps width and height of a video rotated by 90°', async () => {
    const probe = await probeMedia(files.rotated);
    expect([90, 270]).toContain(probe.video!.rotation);
    expect(probe.video).toMatchObject({ width: 240, height: 320 });
    // ffmpeg applies the rotation when decoding: frames come out as the probe says.
    const frame = await sharp(await extractFrame(files.rotated, { timeSeconds: 0.5, format: 'png' })).metadata();
    expect([frame.width, frame.height]).toEqual([240, 320]);
  });

  it('measures the duration by decoding when the container does not state it', async () => {
    const probe = await probeMedia(files.rawStream);
    expect(probe.durationSeconds).toBeCloseTo(2, 1);
    const unmeasured = await probeMedia(files.rawStream, { measureDuration: false });
    expect(unmeasured.durationSeconds).toBeNull();
  });

  it('refuses a file that is not media with MediaDecodeError (an InputError)', async () => {
    // ffmpeg itself would read a text file as 'tty' video (ANSI art).
    const error = await probeMedia(files.text).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(MediaDecodeError);
    expect(error).toBeInstanceOf(InputError);
    await expect(probeMedia(files.noise)).rejects.toBeInstanceOf(MediaDecodeError);
  });

  it('parses the summaries newer ffmpeg releases print (stream ids, colour details, side data, cover art)', () => {
    const ffmpeg7 = [
      "Input #0, mov,mp4,m4a,3gp,3g2,mj2, from 'phone.mov':",
      '  Metadata:',
      '    creation_time   : 2024-05-01T10:00:00.000000Z',
      '  Duration: 01:02:03.50, start: 1.250000, bitrate: 17000 kb/s',
      '  Stream #0:0[0x1](und): Video: hevc (Main) (hvc1 / 0x31637668), yuv420p(tv, bt709), 1920x1080, 16000 kb/s, 29.97 fps, 29.97 tbr, 600 tbn (default)',
      '      Metadata:',
      '        handler_name    : Core Media Video',
      '      Side data:',
      '        displaymatrix: rotation of -90.00 degrees',
      '  Stream #0:1[0x2](und): Audio: aac (LC) (mp4a / 0x6134706D), 48000 Hz, 5.1(side), fltp, 256 kb/s (default)',
      '  Stream #0:2[0x3](und): Data: none (mebx / 0x7862656D), 0 kb/s (default)',
      'At least one output file must be specified',
    ].join('\n');
    const probe = parseProbeOutput(ffmpeg7);
    expect(probe.durationSeconds).toBeCloseTo(3723.5, 6);
    expect(probe.startSeconds).toBe(1.25);
    expect(probe.video).toEqual({ index: 0, codec: 'hevc', width: 1080, height: 1920, fps: 29.97, rotation: 270 });
    expect(probe.audio).toEqual({ index: 1, codec: 'aac', sampleRate: 48_000, channels: 6, channelLayout: '5.1(side)' });
    expect(probe.streams.map((s) => s.kind)).toEqual(['video', 'audio', 'data']);

    const mp3WithCover = [
      "Input #0, mp3, from 'song.mp3':",
      '  Duration: N/A, start: 0.025057, bitrate: N/A',
      '  Stream #0:0: Audio: mp3, 44100 Hz, stereo, fltp, 320 kb/s',
      '  Stream #0:1: Video: mjpeg (Baseline), yuvj420p(pc, bt470bg/unknown/unknown), 500x500 [SAR 1:1 DAR 1:1], 90k tbr, 90k tbn (attached pic)',
    ].join('\n');
    const song = parseProbeOutput(mp3WithCover);
    expect(song.durationSeconds).toBeNull();
    expect(song.hasVideo).toBe(false);
    expect(song.hasAudio).toBe(true);
    expect(song.streams[1]).toMatchObject({ kind: 'video', attachedPicture: true });

    expect(() => parseProbeOutput('foo.bin: Invalid data found when processing input')).toThrow(MediaDecodeError);
    expect([channelCount('mono'), channelCount('stereo'), channelCount('7.1'), channelCount('4 channels'), channelCount('weird')]).toEqual([
      1, 2, 8, 4, null,
    ]);
    expect(parseProgressTime('frame=10\nout_time=00:00:01.500000\nprogress=continue\nout_time=00:01:02.250000\nprogress=end\n')).toBe(62.25);
  });
});

describe('decodeAudio and streamAudio', () => {
  it('decodes to mono float at the requested rate, resampled and mixed down', async () => {
    const samples = await decodeAudio(files.wav, { sampleRate: 16_000 });
    expect(Math.abs(samples.length - 48_000)).toBeLessThanOrEqual(16);
    // A half-scale sine in both channels: the mono mix (their mean) is the same sine, RMS 0.5/√2.
    expect(rmsOf(samples.subarray(1600, -1600))).toBeCloseTo(0.5 / Math.SQRT2, 2);
    expect(toneFrequency(samples, 16_000)).toBeGreaterThan(430);
    expect(toneFrequency(samples, 16_000)).toBeLessThan(450);
  });

  it('decodes a window given by start and duration, from a video too', async () => {
    const window = await decodeAudio(files.twoScenes, { sampleRate: 8_000, startSeconds: 1, durationSeconds: 1.5 });
    expect(window.length).toBe(12_000);
    // lavfi's sine is at 1/8 of full scale.
    expect(rmsOf(window)).toBeCloseTo(0.125 / Math.SQRT2, 2);
    await expect(decodeAudio(files.threeScenesSilent, { sampleRate: 8_000 })).rejects.toBeInstanceOf(MediaDecodeError);
    await expect(decodeAudio(files.wav, { sampleRate: 12.5 })).rejects.toBeInstanceOf(InputError);
  });

  it('streams the same samples in blocks', async () => {
    const whole = await decodeAudio(files.wav, { sampleRate: 16_000 });
    const blocks: Float32Array[] = [];
    for await (const block of streamAudio(files.wav, { sampleRate: 16_000 })) blocks.push(block);
    expect(blocks.length).toBeGreaterThan(1);
    const joined = new Float32Array(blocks.reduce((n, b) => n + b.length, 0));
    let at = 0;
    for (const b of blocks) {
      joined.set(b, at);
      at += b.length;
    }
    expect(joined).toEqual(whole);
  });

  it('reads little-endian floats from unaligned buffers, ignoring a trailing partial sample', () => {
    const bytes = Buffer.alloc(1 + 4 * 3 + 2);
    [0.5, -0.25, 1].forEach((v, i) => bytes.writeFloatLE(v, 1 + i * 4));
    expect(Array.from(float32FromBytes(bytes.subarray(1)))).toEqual([0.5, -0.25, 1]);
  });
});

describe('extractFrame', () => {
  it('returns the frame shown at a time, as JPEG or PNG, scaled to fit', async () => {
    const red = await extractFrame(files.twoScenes, { timeSeconds: 0.5 });
    expect(red.subarray(0, 3)).toEqual(Buffer.from([0xff, 0xd8, 0xff]));
    expect(await colourName(red)).toBe('RED');
    const blue = await extractFrame(files.twoScenes, { timeSeconds: 3, format: 'png', maxSize: 100 });
    expect(blue.subarray(1, 4).toString('latin1')).toBe('PNG');
    expect(await colourName(blue)).toBe('BLUE');
    const meta = await sharp(blue).metadata();
    expect([meta.width, meta.height]).toEqual([100, 75]);
    // maxSize never enlarges.
    const small = await sharp(await extractFrame(files.threeScenesSilent, { timeSeconds: 1.5, maxSize: 1000 })).metadata();
    expect([small.width, small.height]).toEqual([160, 120]);
  });

  it('falls back to the last frame past the end', async () => {
    const late = await extractFrame(files.threeScenesSilent, { timeSeconds: 3 });
    expect(await colourName(late)).toBe('BLUE');
    await expect(extractFrame(files.wav, { timeSeconds: 0 })).rejects.toBeInstanceOf(MediaDecodeError);
    await expect(extractFrame(files.wav, { timeSeconds: -1 })).rejects.toBeInstanceOf(InputError);
  });
});

describe('detectSceneChanges', () => {
  it('finds the cut between two scenes near 2 s', async () => {
    const changes = await detectSceneChanges(files.twoScenes, { threshold: 0.3 });
    expect(changes).toHaveLength(1);
    expect(Math.abs(changes[0]!.timeSeconds - 2)).toBeLessThan(0.05);
    expect(changes[0]!.score).toBeGreaterThan(0.3);
  });

  it('finds both cuts of three scenes, and none in a single-colour video', async () => {
    const changes = await detectSceneChanges(files.threeScenesSilent, { threshold: 0.3 });
    expect(changes.map((c) => Math.round(c.timeSeconds * 10) / 10)).toEqual([1, 2]);
    expect(await detectSceneChanges(files.rotated, { threshold: 0.3 })).toEqual([]);
    await expect(detectSceneChanges(files.twoScenes, { threshold: 1.5 })).rejects.toBeInstanceOf(InputError);
  });

  it('parses metadata lines relative to the start time, ignoring other filters', () => {
    const parser = new SceneLogParser(1.5);
    for (const line of [
      '[Parsed_showinfo_2 @ 0x1] n:   0 pts:  25600 pts_time:9 pos: 1',
      '[Parsed_metadata_1 @ 0x55] frame:0    pts:25600   pts_time:3.5',
      '[Parsed_metadata_1 @ 0x55] lavfi.scene_score=0.812000',
      '[Parsed_metadata_1 @ 0x55] frame:1    pts:51200   pts_time:7',
      '[Parsed_metadata_1 @ 0x55] lavfi.scene_score=1.000000',
    ]) {
      parser.line(line);
    }
    expect(parser.changes).toEqual([
      { timeSeconds: 2, score: 0.812 },
      { timeSeconds: 5.5, score: 1 },
    ]);
  });
});

describe('openMediaInput', () => {
  it('copies a blob to a temp file named for its type and removes it on dispose', async () => {
    const blobs = new LocalBlobStore(path.join(dir, 'blobs'), { publicBaseUrl: () => 'http://x', signingSecret: Buffer.alloc(32) });
    const bytes = (await readFile(files.wav)).subarray(0, 8192);
    await blobs.put('org/ns/objects/obj/content', bytes, { contentType: 'audio/wav' });
    const media = await openMediaInput(blobs, { storage_key: 'org/ns/objects/obj/content', content_type: 'audio/wav', size_bytes: bytes.length }, {
      extractor: 'test',
      input: 'audio',
    });
    expect(path.extname(media.path)).toBe('.wav');
    expect(await readFile(media.path)).toEqual(bytes);
    await media.dispose();
    await expect(access(path.dirname(media.path))).rejects.toThrow();
    await media.dispose();

    await expect(openMediaInput(blobs, { storage_key: 'org/ns/objects/missing/content' }, { extractor: 'test', input: 'audio' })).rejects.toBeInstanceOf(
      NotFoundError,
    );
    await expect(openMediaInput(blobs, undefined, { extractor: 'test', input: 'audio' })).rejects.toBeInstanceOf(InputError);
    await expect(openMediaInput(blobs, 'a string', { extractor: 'test', input: 'audio' })).rejects.toBeInstanceOf(InputError);
    expect([extensionFor('video/mp4; codecs=avc1'), extensionFor('application/octet-stream'), extensionFor(undefined)]).toEqual(['.mp4', '', '']);
  });
});
