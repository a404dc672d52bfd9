/**
 * The whole story through HTTP: a text file, a PNG with words drawn on it, a short two-scene video,
 * a WAV and a PDF in one bucket; one collection per kind (by key prefix) plus a collection chained on the
 * images that chunks and embeds the text OCR read off them; one batch, tier by tier, with a spawned
 * inference worker serving every built-in model.
 */
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sine, renderVideo, wavBytes } from '../../../support/media/av.js';
import { textPng, squash } from '../../../support/media/images.js';
import { buildPdf } from '../../../support/media/pdf.js';
import { startTestKernel, type TestKernel } from '../../../support/kernel.js';

describe('a batch over text, image, video, audio and PDF objects', () => {
  let t: TestKernel;
  let dir: string;
  /** The objects of the first test, by kind (the second puts them in one bucket without prefixes). */
  let payloads: Record<string, { key: string; blob: Record<string, unknown> }> = {};
  const api = (method: string, p: string, body?: unknown) =>
    t.request(method, p, { key: t.adminKey, headers: { 'X-Namespace': 'studio' }, ...(body !== undefined ? { body } : {}) });

  async function documents(collection: string): Promise<Array<Record<string, any>>> {
    const res = await api('POST', `/v1/collections/${collection}/documents/list`, { limit: 100, sort: { field: 'created_at', direction: 'asc' } });
    expect(res.status).toBe(200);
    return res.body.results;
  }

  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'tessera-media-batch-'));
    t = await startTestKernel({
      inferencePlugins: [path.resolve(__dirname, '../../../../plugins/index.ts')],
      config: { inferenceWorkers: 1, batchHealthIntervalMs: 0 },
    });
  }, 120_000);

  afterAll(async () => {
    await t?.stop();
    await rm(dir, { recursive: true, force: true });
  });

  it('turns every kind of object into documents, tier by tier', async () => {
    expect((await t.client().POST('/v1/namespaces', { body: { namespace_name: 'studio' } })).response.status).toBe(201);
    expect((await api('POST', '/v1/buckets', { bucket_name: 'media' })).status).toBe(201);

    const video = path.join(dir, 'scenes.mp4');
    await renderVideo(video, { scenes: [{ color: 'red', seconds: 2 }, { color: 'blue', seconds: 2 }], toneHz: 440 });
    const objects: Record<string, { key: string; blob: Record<string, unknown> }> = {
      text: { key: 'texts/harbor.txt', blob: { text: 'The harbor lights came on at dusk. Fishing boats returned with the tide.' } },
      image: { key: 'images/sign.png', blob: { base64: (await textPng(['OPEN DAILY'])).toString('base64') } },
      video: { key: 'videos/scenes.mp4', blob: { base64: (await readFile(video)).toString('base64') } },
      audio: { key: 'audio/tone.wav', blob: { base64: wavBytes([sine(440, 3, 16_000)], 16_000).toString('base64') } },
      pdf: {
        key: 'pdfs/report.pdf',
        blob: {
          base64: Buffer.from(
            await buildPdf([
              { kind: 'text', paragraphs: [['Quarterly report'], ['Revenue grew in every region.']] },
              { kind: 'scan', image: await textPng(['SCANNED PAGE']) },
            ]),
          ).toString('base64'),
        },
      },
    };
    payloads = objects;
    const ids: Record<string, string> = {};
    for (const [kind, { key, blob }] of Object.entries(objects)) {
      const res = await api('POST', '/v1/buckets/media/objects', { key, blobs: [{ property: 'content', ...blob }] });
      expect(res.status, JSON.stringify(res.body)).toBe(201);
      ids[kind] = res.body.object_id;
    }

    const collection = async (name: string, prefix: string, extractor: string, parameters: Record<string, unknown> = {}) => {
      const res = await api('POST', '/v1/collections/create', {
        collection_name: name,
        source: { type: 'bucket', bucket_id: 'media', prefix_key: prefix },
        feature_extractors: [{ feature_extractor_name: extractor, parameters }],
      });
      expect(res.status, JSON.stringify(res.body)).toBe(201);
      return res.body.collection_id as string;
    };
    await collection('texts', 'texts/', 'text_extractor', { split_by: 'sentences', chunk_size: 1, chunk_overlap: 0 });
    const images = await collection('images', 'images/', 'image_extractor');
    await collection('videos', 'videos/', 'video_extractor', { split_method: 'scene' });
    await collection('sounds', 'audio/', 'audio_extractor', { segment_length: 1 });
    await collection('pages', 'pdfs/', 'pdf_extractor');
    const chained = await api('POST', '/v1/collections/create', {
      collection_name: 'sign-text',
      source: { type: 'collection', collection_id: 'images' },
      feature_extractors: [{ feature_extractor_name: 'text_extractor', input_mapping: { text: 'ocr_text' } }],
    });
    expect(chained.status, JSON.stringify(chained.body)).toBe(201);

    const batch = await api('POST', '/v1/buckets/media/batches', { object_ids: Object.values(ids) });
    const submitted = await api('POST', `/v1/buckets/media/batches/${batch.body.batch_id}/submit`);
    expect(submitted.status).toBe(202);
    expect(submitted.body.dag_tiers).toHaveLength(2);
    expect(submitted.body.dag_tiers[0]).toHaveLength(5);
    expect(submitted.body.dag_tiers[1]).toEqual([chained.body.collection_id]);

    let done: Record<string, any> = {};
    for (let i = 0; i < 1200; i++) {
      done = (await api('GET', `/v1/buckets/media/batches/${batch.body.batch_id}`)).body;
      if (!['PENDING', 'IN_PROGRESS'].includes(done.status)) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(done.status, JSON.stringify(done.tier_tasks?.map((tt: { errors: unknown }) => tt.errors))).toBe('COMPLETED');
    // Every collection of tier 0 saw all five objects; its prefix let one through.
    expect(done.tier_tasks[0]).toMatchObject({ source_documents_fetched: 25, documents_after_source_filter: 5, documents_submitted_to_engine: 5 });
    expect(done.tier_tasks[0].extractor_jobs.map((j: { extractor_type: string }) => j.extractor_type).sort()).toEqual(
      ['audio_extractor', 'image_extractor', 'pdf_extractor', 'text_extractor', 'video_extractor'],
    );

    // Documents written in one statement share created_at: order by their position in the source.
    const texts = (await documents('texts')).sort((a, b) => a.fields.chunk_index - b.fields.chunk_index);
    expect(texts.map((d) => d.fields.text)).toEqual(['The harbor lights came on at dusk.', 'Fishing boats returned with the tide.']);

    const [image] = await documents('images');
    expect(image!.fields).toMatchObject({ width: expect.any(Number), height: expect.any(Number), format: 'png' });
    expect(squash(image!.fields.ocr_text)).toContain('OPENDAILY');
    expect(image!.fields.thumbnail.storage_key).toContain(images);

    const scenes = (await documents('videos')).sort((a, b) => a.fields.segment_index - b.fields.segment_index);
    expect(scenes).toHaveLength(2);
    expect(scenes[0]!.fields.start_time).toBe(0);
    expect(Math.abs(scenes[0]!.fields.end_time - 2)).toBeLessThan(0.2);
    expect(scenes[1]!.fields.keyframe.content_type).toBe('image/jpeg');

    const segments = (await documents('sounds')).sort((a, b) => a.fields.segment_index - b.fields.segment_index);
    expect(segments.map((d) => d.fields.start_time)).toEqual([0, 1, 2]);

    const pages = (await documents('pages')).sort((a, b) => a.fields.page_number - b.fields.page_number);
    expect(pages.map((d) => d.fields.page_number)).toEqual([1, 2]);
    expect(pages[0]!.fields.text).toContain('Revenue grew in every region.');
    expect(pages[1]!.fields.ocr_used).toBe(true);
    expect(squash(pages[1]!.fields.text)).toContain('SCANNEDPAGE');

    const signText = await documents('sign-text');
    expect(signText).toHaveLength(1);
    expect(signText[0]).toMatchObject({ processing_tier: 1, source_document_id: image!.document_id, root_object_id: ids.image });
    expect(squash(signText[0]!.fields.text)).toContain('OPENDAILY');

    const tree = await api('GET', `/v1/objects/${ids.image}/decomposition-tree`);
    expect(tree.status).toBe(200);
    expect(JSON.stringify(tree.body)).toContain(signText[0]!.document_id);
  }, 240_000);

  it('skips, with reasons, the objects each extractor cannot read when one collection per extractor reads a mixed bucket', async () => {
    expect((await api('POST', '/v1/buckets', { bucket_name: 'mixed' })).status).toBe(201);
    const ids: Record<string, string> = {};
    for (const [kind, { key, blob }] of Object.entries(payloads)) {
      const res = await api('POST', '/v1/buckets/mixed/objects', { key, blobs: [{ property: 'content', ...blob }] });
      expect(res.status, JSON.stringify(res.body)).toBe(201);
      ids[kind] = res.body.object_id;
    }
    const noBlob = await api('POST', '/v1/buckets/mixed/objects', { key: 'notes/empty', metadata: { note: 'no blob at all' } });
    ids.none = noBlob.body.object_id;
    const extractors = ['text_extractor', 'image_extractor', 'video_extractor', 'audio_extractor', 'pdf_extractor'];
    for (const extractor of extractors) {
      const res = await api('POST', '/v1/collections/create', {
        collection_name: `mixed-${extractor}`,
        source: { type: 'bucket', bucket_id: 'mixed' },
        feature_extractors: [{ feature_extractor_name: extractor, parameters: extractor === 'audio_extractor' ? { segment_length: 1 } : {} }],
      });
      expect(res.status, JSON.stringify(res.body)).toBe(201);
    }
    const batch = await api('POST', '/v1/buckets/mixed/batches', { object_ids: Object.values(ids) });
    expect((await api('POST', `/v1/buckets/mixed/batches/${batch.body.batch_id}/submit`)).status).toBe(202);
    let done: Record<string, any> = {};
    for (let i = 0; i < 1200; i++) {
      done = (await api('GET', `/v1/buckets/mixed/batches/${batch.body.batch_id}`)).body;
      if (!['PENDING', 'IN_PROGRESS'].includes(done.status)) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    // 6 objects × 5 collections: text, image, video, pdf read by one each, the video also by audio_extractor.
    expect(done.status, JSON.stringify(done.tier_tasks?.[0]?.errors)).toBe('COMPLETED');
    expect(done.error_summary).toBeNull();
    const tier0 = done.tier_tasks[0];
    expect(tier0.errors).toEqual([]);
    expect(tier0).toMatchObject({
      source_documents_fetched: 30,
      documents_submitted_to_engine: 6,
      documents_skipped: 24,
      skipped_reasons: { no_input_field: 5, unsupported_type: 19 },
      documents_missing_input_fields: 5,
    });
    expect(done.progress).toMatchObject({ records_total: 6, records_done: 6, records_failed: 0, records_skipped: 1, percent: 100 });
    expect(done.progress.documents_written).toBe(tier0.documents_written);

    // This kernel runs tasks: the task queue has a consumer.
    const health = await api('GET', '/v1/health');
    expect(health.body.components.task_queue).toMatchObject({ status: 'up' });
    expect(health.body.components.task_queue.details.live_consumers).toBeGreaterThanOrEqual(1);
  }, 240_000);
});
