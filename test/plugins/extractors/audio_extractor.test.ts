/**
 * audio_extractor: the extractor contract against a real in-process inference worker (log-mel-audio), the
 * segment arithmetic (lengths, overlap, dropped tails), levels, that each segment's embedding describes that
 * segment's sound, batching of embedding calls, and typed errors.
 */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InputError, NotFoundError } from '../../../kernel/errors.js';
import { MediaDecodeError } from '../../../kernel/media/errors.js';
import { ProcessSlots } from '../../../kernel/media/process-slots.js';
import type { BlobReference, ExtractorInput } from '../../../kernel/plugins.js';
import audioExtractor, { AUDIO_EMBEDDING_DIMS, EMBED_MAX_CLIPS, SAMPLE_RATE } from '../../../plugins/extractors/audio_extractor/index.js';
import { resolveParameters } from '../../../plugins/extractors/audio_extractor/parameters.js';
import { AudioSegmenter, rms, toDbfs, type AudioSegment } from '../../../plugins/extractors/audio_extractor/segmenter.js';
import { logMelDescriptor } from '../../../plugins/models/log-mel-audio/index.js';
import { runExtractorContract } from '../../support/extractor-contract.js';
import { concatSamples, renderVideo, sine, startMediaHarness, wavBytes, type MediaHarness } from '../../support/media/av.js';
import { collectDrafts as collect } from '../../support/extractor-harness.js';

function input(audio: unknown, parameters: Record<string, unknown> = {}, mimeType = 'audio/wav'): ExtractorInput {
  return { objectId: 'obj_test', mimeType, fields: { audio }, parameters };
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

/** 25 s at 16 kHz: 10 s of 300 Hz, 10 s of 1200 Hz, 5 s of 3000 Hz, at half scale. */
const TONES = [300, 1200, 3000];
const TWENTY_FIVE_SECONDS = concatSamples(sine(300, 10, 16_000), sine(1200, 10, 16_000), sine(3000, 5, 16_000));

async function putWav(harness: MediaHarness, name: string, channels: readonly Float32Array[], rate: number): Promise<BlobReference> {
  return harness.putBlob(`org_test/ns_test/objects/${name}/content`, wavBytes(channels, rate), 'audio/wav');
}

// ------------------------------------------------------------------------------------------------- contract

runExtractorContract(audioExtractor, {
  inputs: [
    input({ storage_key: 'org_test/ns_test/objects/contract_25s/content', content_type: 'audio/wav', size_bytes: 0 }),
    input({ storage_key: 'org_test/ns_test/objects/contract_stereo/content', content_type: 'audio/wav', size_bytes: 0 }, { segment_length: 1, hop: 0.5 }),
    input({ storage_key: 'org_test/ns_test/objects/contract_video/content', content_type: 'video/mp4', size_bytes: 0 }, { segment_length: 2 }, 'video/mp4'),
  ],
  context: async () => {
    const harness = await startMediaHarness('audio-contract');
    await putWav(harness, 'contract_25s', [TWENTY_FIVE_SECONDS], 16_000);
    await putWav(harness, 'contract_stereo', [sine(440, 3, 44_100), sine(660, 3, 44_100, 0.2)], 44_100);
    const video = path.join(harness.dir, 'tone.mp4');
    await renderVideo(video, { scenes: [{ color: 'red', seconds: 3 }], toneHz: 440, width: 64, height: 48 });
    await harness.putBlob('org_test/ns_test/objects/contract_video/content', await readFile(video), 'video/mp4');
    return { ctx: harness.ctx, cleanup: harness.cleanup };
  },
});

// ------------------------------------------------------------------------------------------------- segmenter

describe('audio_extractor segmenter', () => {
  function cut(total: number, plan: { length: number; hop: number; minLength: number }, blockSizes: readonly number[]): AudioSegment[] {
    const signal = Float32Array.from({ length: total }, (_, i) => i);
    const segmenter = new AudioSegmenter(plan);
    const out: AudioSegment[] = [];
    let at = 0;
    for (let b = 0; at < total; b++) {
      const size = blockSizes[b % blockSizes.length]!;
      out.push(...segmenter.push(signal.subarray(at, at + size)));
      at += size;
    }
    out.push(...segmenter.finish());
    return out;
  }

  const spans = (segments: readonly AudioSegment[]) => segments.map((s) => [s.start, s.end]);

  it('cuts back-to-back windows, the last one shorter, whatever the block sizes', () => {
    for (const blocks of [[25], [1], [3, 7], [4, 11, 2]]) {
      const segments = cut(25, { length: 10, hop: 10, minLength: 1 }, blocks);
      expect(spans(segments)).toEqual([
        [0, 10],
        [10, 20],
        [20, 25],
      ]);
      // Each window holds exactly its samples (the signal is its own index).
      for (const s of segments) expect(Array.from(s.samples)).toEqual(Array.from({ length: s.end - s.start }, (_, i) => s.start + i));
    }
  });

  it('overlaps with a smaller hop and stops at the first window that reaches the end', () => {
    expect(spans(cut(25, { length: 10, hop: 5, minLength: 1 }, [6]))).toEqual([
      [0, 10],
      [5, 15],
      [10, 20],
      [15, 25],
    ]);
    expect(spans(cut(20, { length: 10, hop: 5, minLength: 1 }, [3]))).toEqual([
      [0, 10],
      [5, 15],
      [10, 20],
    ]);
  });

  it('leaves gaps with a larger hop, drops a short tail but never the only window', () => {
    expect(spans(cut(25, { length: 4, hop: 10, minLength: 1 }, [3]))).toEqual([
      [0, 4],
      [10, 14],
      [20, 24],
    ]);
    expect(spans(cut(25, { length: 10, hop: 10, minLength: 6 }, [7]))).toEqual([
      [0, 10],
      [10, 20],
    ]);
    expect(spans(cut(3, { length: 10, hop: 10, minLength: 6 }, [2]))).toEqual([[0, 3]]);
    expect(cut(0, { length: 10, hop: 10, minLength: 6 }, [2])).toEqual([]);
  });

  it('levels: RMS and dBFS, with a floor for silence', () => {
    expect(rms(sine(1000, 1, 16_000, 1))).toBeCloseTo(Math.SQRT1_2, 4);
    expect(toDbfs(1)).toBe(0);
    expect(toDbfs(0.5)).toBeCloseTo(-6.02, 2);
    expect(toDbfs(0)).toBe(-120);
  });

  it('parameters: hop defaults to segment_length; bad values are InputErrors', () => {
    expect(resolveParameters({})).toEqual({ segmentLength: 10, hop: 10, minSegment: 1 });
    expect(resolveParameters({ segment_length: 4 })).toEqual({ segmentLength: 4, hop: 4, minSegment: 1 });
    expect(() => resolveParameters({ segment_length: 0 })).toThrow(InputError);
    expect(() => resolveParameters({ hop: -1 })).toThrow(InputError);
    expect(() => resolveParameters({ window: 3 })).toThrow(InputError);
  });
});

// ------------------------------------------------------------------------------------------------- extractor

describe('audio_extractor with an inference worker and a blob store', () => {
  let harness: MediaHarness;
  let twentyFive: BlobReference;

  beforeAll(async () => {
    harness = await startMediaHarness('audio-extractor');
    twentyFive = await putWav(harness, 'tones_25s', [TWENTY_FIVE_SECONDS], 16_000);
  });

  afterAll(async () => {
    await harness?.cleanup();
  });

  it('runs its ffmpeg processes (probe, streamed decode) under the context\'s mediaProcesses', async () => {
    const slots = new ProcessSlots(1);
    const drafts = await collect(audioExtractor.extract({ ...harness.ctx, mediaProcesses: slots }, input(twentyFive, { segment_length: 10 })));
    expect(drafts).toHaveLength(3);
    expect([slots.highWater, slots.active, slots.queued]).toEqual([1, 0, 0]);
  });

  it('25 s at 16 kHz with 10 s segments: three segments, the last 5 s, each embedding describing its own tone', async () => {
    const drafts = await collect(audioExtractor.extract(harness.ctx, input(twentyFive, { segment_length: 10 })));
    expect(drafts.map((d) => d.key)).toEqual(['segment:0', 'segment:1', 'segment:2']);
    expect(drafts.map((d) => [d.fields.start_time, d.fields.end_time, d.fields.duration])).toEqual([
      [0, 10, 10],
      [10, 20, 10],
      [20, 25, 5],
    ]);
    for (const [i, d] of drafts.entries()) {
      expect(d.fields).toMatchObject({ segment_index: i, segment_count: 3, sample_rate: SAMPLE_RATE });
      // Half-scale sines: RMS 0.5/√2, about -9 dBFS.
      expect(d.fields.rms as number).toBeCloseTo(0.5 / Math.SQRT2, 3);
      expect(d.fields.loudness_db as number).toBeCloseTo(-9.03, 1);
      expect(d.features!.audio_embedding).toHaveLength(AUDIO_EMBEDDING_DIMS);
    }
    // Segment k's vector is closest to the descriptor of tone k: the right samples went with the right segment.
    const references = TONES.map((f) => logMelDescriptor({ samples: sine(f, 5, SAMPLE_RATE), sampleRate: SAMPLE_RATE }));
    for (const [k, d] of drafts.entries()) {
      const similarities = references.map((r) => cosine(d.features!.audio_embedding!, r));
      expect(similarities.indexOf(Math.max(...similarities)), `segment ${k}`).toBe(k);
    }
  });

  it('hop < segment_length overlaps; min_segment drops a short tail', async () => {
    const overlapping = await collect(audioExtractor.extract(harness.ctx, input(twentyFive, { segment_length: 10, hop: 5 })));
    expect(overlapping.map((d) => [d.fields.start_time, d.fields.end_time])).toEqual([
      [0, 10],
      [5, 15],
      [10, 20],
      [15, 25],
    ]);
    expect(overlapping.every((d) => d.fields.segment_count === 4)).toBe(true);
    const dropped = await collect(audioExtractor.extract(harness.ctx, input(twentyFive, { segment_length: 10, min_segment: 6 })));
    expect(dropped.map((d) => d.fields.end_time)).toEqual([10, 20]);
  });

  it('resamples and mixes down other rates and channel counts; times stay in seconds', async () => {
    // 44.1 kHz stereo, 7 s: 3.5 s of silence then 3.5 s of tone.
    const left = concatSamples(new Float32Array(154_350), sine(500, 3.5, 44_100, 0.8));
    const ref = await putWav(harness, 'stereo_44k', [left, left], 44_100);
    const drafts = await collect(audioExtractor.extract(harness.ctx, input(ref, { segment_length: 3.5 })));
    expect(drafts.map((d) => [d.fields.start_time, d.fields.end_time])).toEqual([
      [0, 3.5],
      [3.5, 7],
    ]);
    // The resampler's filter lets a trace of the tone's onset ring into the end of the silent part.
    expect(drafts[0]!.fields.loudness_db as number).toBeLessThan(-60);
    expect(drafts[1]!.fields.rms as number).toBeCloseTo(0.8 / Math.SQRT2, 2);
  });

  it('digital silence reads -120 dBFS and gets the silence vector', async () => {
    const ref = await putWav(harness, 'silence', [new Float32Array(16_000)], 16_000);
    const [draft, ...rest] = await collect(audioExtractor.extract(harness.ctx, input(ref)));
    expect(rest).toEqual([]);
    expect(draft!.fields).toMatchObject({ rms: 0, loudness_db: -120, start_time: 0, end_time: 1 });
    // log-mel-audio's silence vector: all zeros but the last entry.
    expect(draft!.features!.audio_embedding!.at(-1)).toBe(1);
    expect(draft!.features!.audio_embedding!.slice(0, -1).every((x) => x === 0)).toBe(true);
  });

  it('embeds segments in batches, not one call per segment', async () => {
    const ref = await putWav(harness, 'forty', [sine(700, 40, 16_000)], 16_000);
    const before = harness.client.callSizes.embedAudio.length;
    const drafts = await collect(audioExtractor.extract(harness.ctx, input(ref, { segment_length: 1 })));
    expect(drafts).toHaveLength(40);
    const calls = harness.client.callSizes.embedAudio.slice(before);
    expect(calls).toEqual([EMBED_MAX_CLIPS, EMBED_MAX_CLIPS, 40 - 2 * EMBED_MAX_CLIPS]);
  });

  it('reads the audio track of a video, and gives nothing for a video without one', async () => {
    const withTone = path.join(harness.dir, 'with-tone.mp4');
    const silent = path.join(harness.dir, 'silent.mp4');
    await renderVideo(withTone, { scenes: [{ color: 'blue', seconds: 2 }], toneHz: 440, width: 64, height: 48 });
    await renderVideo(silent, { scenes: [{ color: 'blue', seconds: 2 }], width: 64, height: 48 });
    const toneRef = await harness.putBlob('org_test/ns_test/objects/with_tone/content', await readFile(withTone), 'video/mp4');
    const silentRef = await harness.putBlob('org_test/ns_test/objects/silent/content', await readFile(silent), 'video/mp4');
    const drafts = await collect(audioExtractor.extract(harness.ctx, input(toneRef, { segment_length: 1 }, 'video/mp4')));
    expect(drafts.length).toBeGreaterThanOrEqual(2);
    expect(drafts[0]!.fields.loudness_db as number).toBeGreaterThan(-30);
    expect(await collect(audioExtractor.extract(harness.ctx, input(silentRef, {}, 'video/mp4')))).toEqual([]);
  });

  it('refuses bad input with typed errors', async () => {
    const junk = await harness.putBlob('org_test/ns_test/objects/junk/content', Buffer.alloc(5000, 7), 'audio/wav');
    await expect(collect(audioExtractor.extract(harness.ctx, input(junk)))).rejects.toBeInstanceOf(MediaDecodeError);
    await expect(collect(audioExtractor.extract(harness.ctx, input({ storage_key: 'org_test/ns_test/objects/nope/content' })))).rejects.toBeInstanceOf(
      NotFoundError,
    );
    await expect(collect(audioExtractor.extract(harness.ctx, input('not a reference')))).rejects.toBeInstanceOf(InputError);
    await expect(collect(audioExtractor.extract(harness.ctx, input(twentyFive, { hop: 0 })))).rejects.toBeInstanceOf(InputError);
  });
});
