/**
 * video_extractor: the extractor contract against a real in-process inference worker (image-descriptor,
 * log-mel-audio, and a stand-in paddle-ocr that "reads" a picture's colour name), segment planning by time
 * and by scene, keyframes stored as artifacts that decode and show the right scene, OCR on the keyframe,
 * the audio embedding of segments with and without sound, and typed errors.
 */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InputError } from '../../../kernel/errors.js';
import { ProcessSlots } from '../../../kernel/media/process-slots.js';
import type { BlobReference, DocumentDraft, ExtractorInput } from '../../../kernel/plugins.js';
import videoExtractor, { AUDIO_EMBEDDING_DIMS, KEYFRAME_EMBEDDING_DIMS, SAMPLE_RATE, SEGMENT_BATCH } from '../../../plugins/extractors/video_extractor/index.js';
import { resolveParameters } from '../../../plugins/extractors/video_extractor/parameters.js';
import { mapLimit, sceneSegments, timeSegments } from '../../../plugins/extractors/video_extractor/segments.js';
import { logMelDescriptor } from '../../../plugins/models/log-mel-audio/index.js';
import { runExtractorContract } from '../../support/extractor-contract.js';
import { colourName, renderSlides, renderVideo, sine, startMediaHarness, wavBytes, type MediaHarness } from '../../support/media/av.js';
import { textPng } from '../../support/media/images.js';
import { collectDrafts as collect } from '../../support/extractor-harness.js';

function input(video: unknown, parameters: Record<string, unknown> = {}): ExtractorInput {
  return { objectId: 'obj_test', mimeType: 'video/mp4', fields: { video }, parameters };
}


function cosine(a: readonly number[], b: readonly number[]): number {
  let dot = 0;
  let na = 0;
  let nb = 0;
  for (let i = 0; i < a.length; i++) {
    dot += a[i]! * b[i]!;
    na += a[i]! * a[i]!;
    nb += b[i]! * b[i]!;
  }
  return dot / Math.sqrt(na * nb);
}

const RED_BLUE = { scenes: [{ color: 'red', seconds: 2 }, { color: 'blue', seconds: 2 }], toneHz: 440 } as const;

/** Renders the videos the tests use and stores them as object blobs. */
async function storeVideos(harness: MediaHarness): Promise<{ redBlue: BlobReference; silent: BlobReference }> {
  const redBlue = path.join(harness.dir, 'red-blue.mp4');
  const silent = path.join(harness.dir, 'silent.mp4');
  await Promise.all([
    renderVideo(redBlue, RED_BLUE),
    // Scenes of clearly different brightness: ffmpeg's scene score compares luma, and red and green (#008000) have
    // nearly the same (Debian's ffmpeg 5.1.9 scores that cut 0).
    renderVideo(silent, { scenes: [{ color: 'white', seconds: 1.5 }, { color: 'red', seconds: 1.5 }], width: 160, height: 120 }),
  ]);
  return {
    redBlue: await harness.putBlob('org_test/ns_test/objects/red_blue/content', await readFile(redBlue), 'video/mp4'),
    silent: await harness.putBlob('org_test/ns_test/objects/silent/content', await readFile(silent), 'video/mp4'),
  };
}

// ------------------------------------------------------------------------------------------------- contract

const CONTRACT_KEYS = {
  redBlue: 'org_test/ns_test/objects/red_blue/content',
  silent: 'org_test/ns_test/objects/silent/content',
};

runExtractorContract(videoExtractor, {
  inputs: [
    input({ storage_key: CONTRACT_KEYS.redBlue, content_type: 'video/mp4', size_bytes: 0 }),
    input({ storage_key: CONTRACT_KEYS.redBlue, content_type: 'video/mp4', size_bytes: 0 }, { split_method: 'scene' }),
    input({ storage_key: CONTRACT_KEYS.silent, content_type: 'video/mp4', size_bytes: 0 }, { interval: 1, enable_ocr: false, thumbnail_size: 64 }),
  ],
  context: async () => {
    const harness = await startMediaHarness('video-contract');
    await storeVideos(harness);
    return { ctx: harness.ctx, cleanup: harness.cleanup };
  },
});

// ------------------------------------------------------------------------------------------------- planning

describe('video_extractor segment planning', () => {
  it('time: slices of the interval; a short final piece joins the one before; max_segments widens the interval', () => {
    expect(timeSegments(4.02, 1, 1, 1000)).toEqual([
      { start: 0, end: 1 },
      { start: 1, end: 2 },
      { start: 2, end: 3 },
      { start: 3, end: 4.02 },
    ]);
    expect(timeSegments(25, 10, 1, 1000).map((s) => [s.start, s.end])).toEqual([
      [0, 10],
      [10, 20],
      [20, 25],
    ]);
    expect(timeSegments(30, 10, 1, 1000)).toHaveLength(3);
    expect(timeSegments(100, 1, 1, 4).map((s) => [s.start, s.end])).toEqual([
      [0, 25],
      [25, 50],
      [50, 75],
      [75, 100],
    ]);
    expect(timeSegments(0.5, 10, 1, 1000)).toEqual([{ start: 0, end: 0.5 }]);
    expect(timeSegments(0, 10, 1, 1000)).toEqual([{ start: 0, end: 0 }]);
  });

  it('scene: cuts closer than min_scene_length are ignored, and only the strongest cuts survive max_segments', () => {
    const cuts = [
      { timeSeconds: 2, score: 0.9 },
      { timeSeconds: 2.3, score: 0.95 }, // a flash right after a cut
      { timeSeconds: 5, score: 0.4 },
      { timeSeconds: 8, score: 0.7 },
      { timeSeconds: 9.6, score: 1 }, // too close to the end
    ];
    expect(sceneSegments(10, cuts, 1, 100).map((s) => [s.start, s.end])).toEqual([
      [0, 2],
      [2, 5],
      [5, 8],
      [8, 10],
    ]);
    expect(sceneSegments(10, cuts, 1, 3).map((s) => [s.start, s.end])).toEqual([
      [0, 2],
      [2, 8],
      [8, 10],
    ]);
    expect(sceneSegments(10, [], 1, 100)).toEqual([{ start: 0, end: 10 }]);
    expect(sceneSegments(10, cuts, 0, 100)).toHaveLength(6);
  });

  it('mapLimit keeps order and stops on the first failure', async () => {
    expect(await mapLimit([3, 1, 2], 2, async (x) => x * 10)).toEqual([30, 10, 20]);
    let started = 0;
    await expect(
      mapLimit([1, 2, 3, 4, 5, 6], 1, async (x) => {
        started++;
        if (x === 2) throw new Error('boom');
        return x;
      }),
    ).rejects.toThrow('boom');
    expect(started).toBe(2);
  });

  it('parameters: defaults filled, bad values are InputErrors', () => {
    expect(resolveParameters({})).toEqual({
      splitMethod: 'time',
      interval: 10,
      sceneThreshold: 0.3,
      minSceneLength: 1,
      maxSegments: 1000,
      enableOcr: true,
      thumbnailSize: 640,
    });
    expect(() => resolveParameters({ split_method: 'shots' })).toThrow(InputError);
    expect(() => resolveParameters({ scene_threshold: 1 })).toThrow(InputError);
    expect(() => resolveParameters({ max_segments: 0 })).toThrow(InputError);
  });
});

// ------------------------------------------------------------------------------------------------- extractor

describe('video_extractor with an inference worker and a blob store', () => {
  let harness: MediaHarness;
  let videos: { redBlue: BlobReference; silent: BlobReference };

  beforeAll(async () => {
    harness = await startMediaHarness('video-extractor');
    videos = await storeVideos(harness);
  });

  afterAll(async () => {
    await harness?.cleanup();
  });

  it('scene split: two segments with the cut near 2 s, keyframes stored, decodable and of the right colour', async () => {
    const ocrBefore = harness.ocrImages.length;
    const drafts = await collect(videoExtractor.extract(harness.ctx, input(videos.redBlue, { split_method: 'scene' })));
    expect(drafts.map((d) => d.key)).toEqual(['segment:0', 'segment:1']);
    const [red, blue] = drafts as [DocumentDraft, DocumentDraft];
    expect(red.fields.start_time).toBe(0);
    expect(Math.abs((red.fields.end_time as number) - 2)).toBeLessThan(0.1);
    expect(blue.fields.start_time).toBe(red.fields.end_time);
    expect(blue.fields.end_time as number).toBeGreaterThan(3.9);
    for (const [i, d] of drafts.entries()) {
      expect(d.fields).toMatchObject({ segment_index: i, segment_count: 2, split_method: 'scene', width: 320, height: 240, has_audio: true });
      expect(d.features!.keyframe_embedding).toHaveLength(KEYFRAME_EMBEDDING_DIMS);
      expect(d.features!.audio_embedding).toHaveLength(AUDIO_EMBEDDING_DIMS);
    }

    for (const [i, [d, colour]] of ([[red, 'RED'], [blue, 'BLUE']] as const).entries()) {
      const keyframe = d.fields.keyframe as BlobReference;
      expect(keyframe.storage_key).toBe(`org_test/artifacts/col_test/obj_test/segment-${i}/keyframe.jpg`);
      expect(keyframe.content_type).toBe('image/jpeg');
      const info = await harness.blobs.head(keyframe.storage_key);
      expect(info?.size).toBe(keyframe.size_bytes);
      const { body } = await harness.blobs.get(keyframe.storage_key);
      const chunks: Buffer[] = [];
      for await (const chunk of body as AsyncIterable<Buffer>) chunks.push(chunk);
      const bytes = Buffer.concat(chunks);
      const meta = await sharp(bytes).metadata();
      expect([meta.format, meta.width, meta.height]).toEqual(['jpeg', 320, 240]);
      expect(await colourName(bytes)).toBe(colour);
      // The stand-in OCR model names the colour of the picture it was given: OCR ran on this segment's keyframe.
      expect(d.fields.ocr_text).toBe(colour);
      const t = d.fields.keyframe_time as number;
      expect(t).toBeGreaterThan(d.fields.start_time as number);
      expect(t).toBeLessThan(d.fields.end_time as number);
    }
    // The two scenes look different to the image model.
    expect(cosine(red.features!.keyframe_embedding!, blue.features!.keyframe_embedding!)).toBeLessThan(0.95);
    // The video is no larger than the thumbnail: OCR read the keyframe itself.
    expect(harness.ocrImages.slice(ocrBefore)).toEqual([
      { width: 320, height: 240 },
      { width: 320, height: 240 },
    ]);
  });

  it('runs every ffmpeg process (probe, scene cuts, frames, sound) under the context\'s mediaProcesses', async () => {
    // One slot for segments decoded two at a time: with a second slot the bound would be met without waiting.
    const slots = new ProcessSlots(1);
    const drafts = await collect(videoExtractor.extract({ ...harness.ctx, mediaProcesses: slots }, input(videos.redBlue, { split_method: 'scene', interval: 1 })));
    expect(drafts.length).toBeGreaterThan(0);
    expect([slots.highWater, slots.active, slots.queued]).toEqual([1, 0, 0]);
  });

  it('audio_embedding describes the soundtrack (a 440 Hz tone)', async () => {
    const [first] = await collect(videoExtractor.extract(harness.ctx, input(videos.redBlue, { enable_ocr: false })));
    const tone = (hz: number) => logMelDescriptor({ samples: sine(hz, 2, SAMPLE_RATE, 0.125), sampleRate: SAMPLE_RATE });
    const embedding = first!.features!.audio_embedding!;
    expect(cosine(embedding, tone(440))).toBeGreaterThan(cosine(embedding, tone(3000)));
    expect(cosine(embedding, tone(440))).toBeGreaterThan(0.9);
  });

  it('time split with interval 1: four segments of a 4 s video, one inference call per model per batch', async () => {
    const calls = { image: harness.client.callSizes.embedImage.length, ocr: harness.client.callSizes.ocr.length };
    const drafts = await collect(videoExtractor.extract(harness.ctx, input(videos.redBlue, { interval: 1 })));
    expect(drafts.map((d) => d.fields.start_time)).toEqual([0, 1, 2, 3]);
    expect(drafts.every((d) => d.fields.segment_count === 4 && d.fields.split_method === 'time')).toBe(true);
    expect(drafts.at(-1)!.fields.end_time as number).toBeGreaterThan(3.9);
    expect(drafts.map((d) => d.fields.ocr_text)).toEqual(['RED', 'RED', 'BLUE', 'BLUE']);
    expect(harness.client.callSizes.embedImage.slice(calls.image)).toEqual([4]);
    expect(harness.client.callSizes.ocr.slice(calls.ocr)).toEqual([4]);
    expect(SEGMENT_BATCH).toBeGreaterThanOrEqual(4);

    const capped = await collect(videoExtractor.extract(harness.ctx, input(videos.redBlue, { interval: 1, max_segments: 2, enable_ocr: false })));
    // max_segments widens the interval to half the video.
    expect(capped.map((d) => d.fields.segment_count)).toEqual([2, 2]);
    expect(capped[0]!.fields.start_time).toBe(0);
    expect(Math.abs((capped[1]!.fields.start_time as number) - 2)).toBeLessThan(0.05);
    expect(capped.every((d) => d.fields.ocr_text === undefined)).toBe(true);
  });

  it('a video without sound gets the silence embedding and has_audio false', async () => {
    const drafts = await collect(videoExtractor.extract(harness.ctx, input(videos.silent, { split_method: 'scene', enable_ocr: false })));
    expect(drafts).toHaveLength(2);
    for (const d of drafts) {
      expect(d.fields.has_audio).toBe(false);
      const audio = d.features!.audio_embedding!;
      expect(audio.at(-1)).toBe(1);
      expect(audio.slice(0, -1).every((x) => x === 0)).toBe(true);
    }
  });

  it('thumbnail_size scales the keyframe; OCR then reads a full-size frame', async () => {
    const ocrBefore = harness.ocrImages.length;
    const [draft] = await collect(videoExtractor.extract(harness.ctx, input(videos.redBlue, { thumbnail_size: 64 })));
    const keyframe = draft!.fields.keyframe as BlobReference;
    const { body } = await harness.blobs.get(keyframe.storage_key);
    const chunks: Buffer[] = [];
    for await (const chunk of body as AsyncIterable<Buffer>) chunks.push(chunk);
    const meta = await sharp(Buffer.concat(chunks)).metadata();
    expect([meta.width, meta.height]).toEqual([64, 48]);
    expect(harness.ocrImages.slice(ocrBefore)).toEqual([{ width: 320, height: 240 }]);
  });

  it('min_scene_length longer than a scene merges it into its neighbour', async () => {
    const drafts = await collect(videoExtractor.extract(harness.ctx, input(videos.redBlue, { split_method: 'scene', min_scene_length: 2.5, enable_ocr: false })));
    expect(drafts).toHaveLength(1);
    expect(drafts[0]!.fields.start_time).toBe(0);
  });

  it('refuses what is not a video with typed errors', async () => {
    const wav = await harness.putBlob('org_test/ns_test/objects/a_wav/content', wavBytes([sine(440, 1, 16_000)], 16_000), 'audio/wav');
    await expect(collect(videoExtractor.extract(harness.ctx, input(wav)))).rejects.toBeInstanceOf(InputError);
    const junk = await harness.putBlob('org_test/ns_test/objects/junk/content', Buffer.alloc(3000, 1), 'video/mp4');
    await expect(collect(videoExtractor.extract(harness.ctx, input(junk)))).rejects.toBeInstanceOf(InputError);
    await expect(collect(videoExtractor.extract(harness.ctx, input(undefined)))).rejects.toBeInstanceOf(InputError);
    await expect(collect(videoExtractor.extract(harness.ctx, input(videos.redBlue, { interval: 0 })))).rejects.toBeInstanceOf(InputError);
  });
});

describe('video_extractor with the real paddle-ocr model', () => {
  let harness: MediaHarness;

  beforeAll(async () => {
    harness = await startMediaHarness('video-ocr', { realOcr: true });
  });

  afterAll(async () => {
    await harness?.cleanup();
  });

  it('reads the text shown in each segment into that segment', async () => {
    const file = path.join(harness.dir, 'slides.mp4');
    await renderSlides(file, [
      { image: await textPng(['TESSERA 2026'], { width: 640 }), seconds: 2 },
      { image: await textPng(['OPEN SEARCH'], { width: 640 }), seconds: 2 },
    ]);
    const ref = await harness.putBlob('org_test/ns_test/objects/slides/content', await readFile(file), 'video/mp4');
    const drafts = await collect(videoExtractor.extract(harness.ctx, input(ref, { interval: 2 })));
    // Compare without spaces: the recogniser may merge words.
    expect(drafts.map((d) => String(d.fields.ocr_text).replace(/\s+/g, ''))).toEqual(['TESSERA2026', 'OPENSEARCH']);
  });
});
