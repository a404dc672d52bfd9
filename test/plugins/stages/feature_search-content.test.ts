/**
 * feature_search with `query.content`: images and audio clips searched by an image or a clip close to one
 * of the documents, over HTTP, the query embedded by the feature's own model in a spawned inference worker
 * (image-descriptor, log-mel-audio), as base64, as a data: URL and as an http URL fetched by the SSRF-safe
 * fetcher; and the readable failures: bad base64, the wrong media type, a feature that embeds text, a
 * private address when the server does not allow them, an empty parameter (422 naming it).
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { StageContext } from '../../../kernel/plugins.js';
import { TaskQueue } from '../../../kernel/tokens.js';
import { decodeBase64, readQueryContent } from '../../../plugins/stages/feature_search/content.js';
import { startTestKernel, type TestKernel } from '../../support/kernel.js';
import { sine, wavBytes } from '../../support/media/av.js';
import { solidImage } from '../../support/media/images.js';

const MODELS = ['image-descriptor', 'log-mel-audio'].map((m) => path.resolve(__dirname, `../../../plugins/models/${m}/index.ts`));
const IMAGE_FEATURE = 'tessera://image_extractor@1.0/image_embedding';
const OCR_FEATURE = 'tessera://image_extractor@1.0/ocr_text_embedding';
const AUDIO_FEATURE = 'tessera://audio_extractor@1.0/audio_embedding';
const TERMINAL = ['COMPLETED', 'COMPLETED_WITH_ERRORS', 'FAILED', 'CANCELED'];

/** A picture: left half one colour, right half another (so layout matters as well as colour). */
async function halves(left: string, right: string, size = 64): Promise<Buffer> {
  const half = await solidImage(size / 2, size, right).png().toBuffer();
  return solidImage(size, size, left).composite([{ input: half, left: size / 2, top: 0 }]).png().toBuffer();
}

describe('feature_search query.content', () => {
  let t: TestKernel;
  let server: http.Server;
  let serverUrl: string;
  const objectIds: Record<string, string> = {};
  let redBlue: Buffer;

  const api = (method: string, p: string, body?: unknown) =>
    t.request(method, p, { key: t.adminKey, headers: { 'X-Namespace': 'media-search' }, ...(body !== undefined ? { body } : {}) });

  const search = async (collection: string, searches: unknown[]) => {
    const res = await api('POST', '/v1/retrievers/execute', {
      collection_identifiers: [collection],
      input_schema: {},
      inputs: {},
      stages: [{ stage_name: 'search', config: { stage_id: 'feature_search', parameters: { searches } } }],
    });
    return res;
  };

  async function ingest(bucket: string, collection: string, extractor: string, parameters: Record<string, unknown>, files: Record<string, Buffer>): Promise<void> {
    expect((await api('POST', '/v1/buckets', { bucket_name: bucket })).status).toBe(201);
    for (const [key, bytes] of Object.entries(files)) {
      const res = await api('POST', `/v1/buckets/${bucket}/objects`, { key, blobs: [{ property: 'content', base64: bytes.toString('base64') }] });
      expect(res.status, JSON.stringify(res.body)).toBe(201);
      objectIds[key] = res.body.object_id;
    }
    const created = await api('POST', '/v1/collections/create', {
      collection_name: collection,
      source: { type: 'bucket', bucket_id: bucket },
      feature_extractors: [{ feature_extractor_name: extractor, parameters }],
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const batch = await api('POST', `/v1/buckets/${bucket}/batches`, { object_ids: Object.keys(files).map((k) => objectIds[k]) });
    expect((await api('POST', `/v1/buckets/${bucket}/batches/${batch.body.batch_id}/submit`)).status).toBe(202);
    for (let i = 0; ; i++) {
      await t.kernel.services.get(TaskQueue).drain();
      const res = await api('GET', `/v1/buckets/${bucket}/batches/${batch.body.batch_id}`);
      if (TERMINAL.includes(res.body.status)) {
        expect(res.body.status, JSON.stringify(res.body)).toBe('COMPLETED');
        break;
      }
      if (i > 600) throw new Error('batch did not finish');
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  const keyOf = (doc: { payload: { root_object_id: string } }) => Object.keys(objectIds).find((k) => objectIds[k] === doc.payload.root_object_id);

  beforeAll(async () => {
    // The server may fetch private addresses here, so the test's own HTTP server can serve the query.
    t = await startTestKernel({ inferencePlugins: MODELS, config: { inferenceWorkers: 1, runTasks: false, allowPrivateUrlFetch: true } });
    expect((await t.client().POST('/v1/namespaces', { body: { namespace_name: 'media-search' } })).response.status).toBe(201);
    redBlue = await halves('#d01010', '#1030d0');
    await ingest('pics', 'pictures', 'image_extractor', { enable_ocr: false }, {
      'red-blue.png': redBlue,
      'blue-red.png': await halves('#1030d0', '#d01010'),
      'green.png': await solidImage(64, 64, '#10b030').png().toBuffer(),
      'yellow-black.png': await halves('#e0d020', '#101010'),
    });
    await ingest('sounds', 'clips', 'audio_extractor', { segment_length: 1 }, {
      'low.wav': wavBytes([sine(220, 2, 16_000)], 16_000),
      'high.wav': wavBytes([sine(3_000, 2, 16_000)], 16_000),
    });
    server = http.createServer((req, res) => {
      if (req.url === '/query.png') {
        res.writeHead(200, { 'content-type': 'image/png' });
        res.end(redBlue);
      } else {
        res.writeHead(404).end();
      }
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    serverUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  }, 240_000);

  afterAll(async () => {
    await new Promise((r) => server?.close(r));
    await t?.stop();
  });

  it('finds the image closest to a query image given as base64, a data: URL or a URL', async () => {
    // Close to red-blue, not identical: another size, slightly different shades, JPEG.
    const query = await solidImage(96, 96, '#c81818')
      .composite([{ input: await solidImage(48, 96, '#1838c8').png().toBuffer(), left: 48, top: 0 }])
      .jpeg({ quality: 85 })
      .toBuffer();
    for (const content of [query.toString('base64'), `data:image/jpeg;base64,${query.toString('base64')}`, `${serverUrl}/query.png`]) {
      const res = await search('pictures', [{ feature_uri: IMAGE_FEATURE, query: { content }, top_k: 4 }]);
      expect(res.status).toBe(200);
      expect(res.body.status, JSON.stringify(res.body)).toBe('completed');
      const keys = res.body.documents.map(keyOf);
      expect(keys).toHaveLength(4);
      expect(keys[0]).toBe('red-blue.png');
      expect(res.body.budget.inference_calls).toBe(1);
    }
  });

  it('finds the clip closest to a query clip, embedded by the audio feature\'s model', async () => {
    const query = wavBytes([sine(230, 1, 22_050, 0.3)], 22_050);
    const res = await search('clips', [{ feature_uri: AUDIO_FEATURE, query: { content: query.toString('base64') }, top_k: 2 }]);
    expect(res.body.status, JSON.stringify(res.body)).toBe('completed');
    expect(res.body.documents.map(keyOf)).toEqual(['low.wav', 'low.wav']);
  });

  it('fails the execution readably for bad base64, the wrong media, a text feature or a missing URL', async () => {
    const cases: Array<[string, unknown, RegExp]> = [
      [IMAGE_FEATURE, 'not base64 at all!', /searches\[0\]\.query\.content: content is neither an http\(s\) URL nor valid base64/],
      [IMAGE_FEATURE, Buffer.from('plain words, not a picture').toString('base64'), /content is application\/octet-stream, but feature '.*image_embedding' embeds image/],
      [IMAGE_FEATURE, wavBytes([sine(440, 0.2, 16_000)], 16_000).toString('base64'), /content is audio\/.*embeds image/],
      [AUDIO_FEATURE, redBlue.toString('base64'), /content is image\/png, but feature '.*audio_embedding' embeds audio/],
      [OCR_FEATURE, redBlue.toString('base64'), /'hashed-ngram-text' \(embed_text\), which embeds neither images nor audio; search it with query.text/],
      [IMAGE_FEATURE, `${serverUrl}/missing.png`, /searches\[0\]\.query\.content: Fetching .*missing\.png answered HTTP 404/],
    ];
    for (const [feature, content, message] of cases) {
      const res = await search(feature === AUDIO_FEATURE ? 'clips' : 'pictures', [{ feature_uri: feature, query: { content }, top_k: 2 }]);
      expect(res.status).toBe(200);
      expect(res.body.status, String(content).slice(0, 40)).toBe('failed');
      expect(res.body.error).toMatch(message);
      expect(res.body.documents).toEqual([]);
    }
  });

  it('refuses an empty content as a 422 naming the parameter', async () => {
    const res = await search('pictures', [{ feature_uri: IMAGE_FEATURE, query: { content: '' } }]);
    expect(res.status).toBe(422);
    expect(res.body.detail.some((d: { loc: unknown[] }) => d.loc.join('.').endsWith('searches.0.query.content'))).toBe(true);
  });

  it('refuses private addresses unless the server allows them, and decodes base64 strictly', async () => {
    const ctx = { container: { get: () => ({ allowPrivateUrlFetch: false, urlFetchTimeoutMs: 5_000 }) } } as unknown as StageContext;
    await expect(readQueryContent(ctx, `${serverUrl}/query.png`, 'searches[0].query.content')).rejects.toThrow(/searches\[0\]\.query\.content: .*private or loopback/);
    expect(decodeBase64(Buffer.from('hello').toString('base64url'), 'x').toString()).toBe('hello');
    expect(() => decodeBase64('data:image/png,abc', 'x')).toThrow(/must be base64/);
    expect(() => decodeBase64('abcde', 'x')).toThrow(/nor valid base64/);
  });
});
