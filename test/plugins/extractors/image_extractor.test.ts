/**
 * image_extractor: the extractor contract, then behaviour on pictures the test draws, against a real
 * in-process inference worker serving the real paddle-ocr and image-descriptor models and a real
 * LocalBlobStore: size and format, the thumbnail artifact, OCR text, large images scaled down before
 * they travel, EXIF orientation, and InputErrors for what is not an image.
 */
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LocalBlobStore } from '../../../kernel/blobs/local.js';
import { InputError } from '../../../kernel/errors.js';
import { InferenceClient, type CallOverrides, type OcrResultOutput } from '../../../kernel/inference/client.js';
import { defineModel, type BlobReference, type ExtractorInput } from '../../../kernel/plugins.js';
import imageExtractor, { IMAGE_EMBEDDING_DIMS, THUMBNAIL_NAME } from '../../../plugins/extractors/image_extractor/index.js';
import { WORKING_MAX_SIDE } from '../../../plugins/extractors/image_extractor/image.js';
import { createImageDescriptorModel, type ImageDescription } from '../../../plugins/models/image-descriptor/index.js';
import { createHashedNgramTextModel } from '../../../plugins/models/hashed-ngram-text/index.js';
import { createPaddleOcrModel } from '../../../plugins/models/paddle-ocr/index.js';
import { runExtractorContract } from '../../support/extractor-contract.js';
import { solidImage, squash, textImage, textPng } from '../../support/media/images.js';
import { collectDrafts as collect, startExtractorHarness, type ExtractorHarness } from '../../support/extractor-harness.js';


/** A client that counts OCR calls, so a test can tell OCR was skipped without timing anything. */
class CountingInferenceClient extends InferenceClient {
  ocrRequests = 0;

  override async ocr(model: string, images: readonly Uint8Array[], overrides?: CallOverrides): Promise<OcrResultOutput[]> {
    this.ocrRequests += 1;
    return super.ocr(model, images, overrides);
  }
}

type Harness = ExtractorHarness<CountingInferenceClient> & {
  /** Width × height of every image the image-descriptor model received inside the worker. */
  describedSizes: Array<[number, number]>;
};

/** A real worker with the real models (image-descriptor wrapped to record what it is sent), a client and a blob store in a temp dir. */
async function startHarness(): Promise<Harness> {
  const descriptor = createImageDescriptorModel();
  const describedSizes: Array<[number, number]> = [];
  const recordingDescriptor = defineModel<Uint8Array, ImageDescription>({
    name: descriptor.name,
    task: descriptor.task,
    dims: descriptor.dims,
    load: () => descriptor.load(),
    infer: async (inputs) => {
      for (const bytes of inputs) {
        const meta = await sharp(bytes).metadata();
        describedSizes.push([meta.width, meta.height]);
      }
      return descriptor.infer(inputs);
    },
  });
  const harness = await startExtractorHarness({
    name: 'image-extractor',
    models: [recordingDescriptor, createPaddleOcrModel(), createHashedNgramTextModel()],
    client: (o) => new CountingInferenceClient(o),
  });
  return { ...harness, describedSizes };
}

function input(image: unknown, parameters: Record<string, unknown> = {}, mimeType = 'image/png'): ExtractorInput {
  return { objectId: 'obj_test', mimeType, fields: image === undefined ? {} : { image }, parameters };
}


async function putBlob(blobs: LocalBlobStore, name: string, bytes: Buffer, contentType: string): Promise<BlobReference> {
  const key = `org_test/ns_test/objects/${name}/content`;
  const info = await blobs.put(key, bytes, { contentType });
  return { storage_key: key, content_type: info.contentType, size_bytes: info.size };
}

async function readBlob(blobs: LocalBlobStore, key: string): Promise<Buffer> {
  const { body } = await blobs.get(key);
  const parts: Buffer[] = [];
  for await (const chunk of body as AsyncIterable<Buffer>) parts.push(chunk);
  return Buffer.concat(parts);
}

// ------------------------------------------------------------------------------------------------ contract

const CONTRACT_PNG = await textPng(['TESSERA 2026']);
const CONTRACT_JPEG = await textImage(['OPEN SEARCH'], { background: '#dde8ff' }).jpeg({ quality: 88 }).toBuffer();

runExtractorContract(imageExtractor, {
  inputs: [
    input({ storage_key: 'org_test/ns_test/objects/obj_contract/content', content_type: 'image/png', size_bytes: CONTRACT_PNG.length }),
    input(CONTRACT_JPEG.toString('base64'), { thumbnail_size: 64 }, 'image/jpeg'),
    input(`data:image/jpeg;base64,${CONTRACT_JPEG.toString('base64')}`, { enable_ocr: false }, 'image/jpeg'),
  ],
  context: async () => {
    const harness = await startHarness();
    await harness.blobs.put('org_test/ns_test/objects/obj_contract/content', CONTRACT_PNG, { contentType: 'image/png' });
    return { ctx: harness.ctx, cleanup: () => harness.cleanup() };
  },
});

// ------------------------------------------------------------------------------------------------ behaviour

describe('image_extractor', () => {
  let harness: Harness;

  beforeAll(async () => {
    harness = await startHarness();
  });

  afterAll(async () => {
    await harness?.cleanup();
  });

  it('describes a PNG with text: size, format, colours, hash, a JPEG thumbnail in the blob store, OCR text, embedding', async () => {
    const png = await textPng(['HELLO WORLD', 'TESSERA 2026'], { width: 1000, height: 300 });
    const ref = await putBlob(harness.blobs, 'obj_text', png, 'image/png');
    const drafts = await collect(imageExtractor.extract(harness.ctx, input(ref)));
    expect(drafts).toHaveLength(1);
    const [draft] = drafts;
    expect(draft!.key).toBe('image');
    const fields = draft!.fields;
    expect(fields).toMatchObject({ width: 1000, height: 300, format: 'png', size_bytes: png.length });
    expect(squash(String(fields.ocr_text))).toContain('HELLOWORLD');
    expect(squash(String(fields.ocr_text))).toContain('TESSERA2026');
    expect(String(fields.ocr_text).split('\n')).toHaveLength(2);
    // Mostly white picture: the most frequent colour is light.
    const colours = fields.dominant_colours as string[];
    expect(colours.length).toBeGreaterThan(0);
    const [r, g, b] = [1, 3, 5].map((i) => parseInt(colours[0]!.slice(i, i + 2), 16));
    expect(Math.min(r!, g!, b!)).toBeGreaterThan(0xd0);
    expect(fields.perceptual_hash).toMatch(/^[0-9a-f]{16}$/);

    const thumbnail = fields.thumbnail as BlobReference;
    expect(thumbnail.storage_key).toBe(`org_test/artifacts/col_test/obj_test/${THUMBNAIL_NAME}`);
    expect(thumbnail.content_type).toBe('image/jpeg');
    const stored = await readBlob(harness.blobs, thumbnail.storage_key);
    expect(stored.length).toBe(thumbnail.size_bytes);
    const meta = await sharp(stored).metadata();
    expect(meta.format).toBe('jpeg');
    expect([meta.width, meta.height]).toEqual([256, 77]); // 1000 × 300 inside 256 × 256

    const vector = draft!.features!.image_embedding!;
    expect(vector).toHaveLength(IMAGE_EMBEDDING_DIMS);
    expect(Math.hypot(...vector)).toBeCloseTo(1, 6);
    // The text read off the image is embedded too, as text is: the same vector as embedding the OCR text.
    const ocrVector = draft!.features!.ocr_text_embedding!;
    expect(ocrVector).toHaveLength(384);
    expect(ocrVector).toEqual((await harness.ctx.inference.embedText('hashed-ngram-text', [String(fields.ocr_text)]))[0]);
  });

  it('sizes the thumbnail by thumbnail_size and never enlarges a small image', async () => {
    const photo = await solidImage(400, 600, '#3366cc').jpeg().toBuffer();
    const [big] = await collect(imageExtractor.extract(harness.ctx, input(photo.toString('base64'), { thumbnail_size: 90, enable_ocr: false })));
    const bigThumb = await sharp(await readBlob(harness.blobs, (big!.fields.thumbnail as BlobReference).storage_key)).metadata();
    expect([bigThumb.width, bigThumb.height]).toEqual([60, 90]);
    expect(big!.fields.format).toBe('jpeg');

    const tiny = await solidImage(40, 30, '#cc3333').png().toBuffer();
    const [small] = await collect(imageExtractor.extract(harness.ctx, input(tiny.toString('base64'), { enable_ocr: false })));
    const smallThumb = await sharp(await readBlob(harness.blobs, (small!.fields.thumbnail as BlobReference).storage_key)).metadata();
    expect([smallThumb.width, smallThumb.height]).toEqual([40, 30]);
    // A red picture reads as red.
    const [r, g, b] = [1, 3, 5].map((i) => parseInt((small!.fields.dominant_colours as string[])[0]!.slice(i, i + 2), 16));
    expect(r!).toBeGreaterThan(g! + 80);
    expect(r!).toBeGreaterThan(b! + 80);
  });

  it('keeps a small upright JPEG as its own thumbnail, without its EXIF, and re-encodes one that must turn', async () => {
    const photo = await solidImage(120, 80, '#22aa44')
      .withExif({ IFD0: { Make: 'SecretCam' } })
      .jpeg({ quality: 90 })
      .toBuffer();
    const [draft] = await collect(imageExtractor.extract(harness.ctx, input(photo.toString('base64'), { enable_ocr: false }, 'image/jpeg')));
    const thumbnail = await readBlob(harness.blobs, (draft!.fields.thumbnail as BlobReference).storage_key);
    expect(thumbnail.includes('SecretCam')).toBe(false);
    expect(await sharp(thumbnail).raw().toBuffer()).toEqual(await sharp(photo).raw().toBuffer());
    expect((await sharp(thumbnail).metadata()).exif).toBeUndefined();

    // EXIF orientation 6: the thumbnail is turned upright (a real re-encode), 80 × 120 as seen.
    const sideways = await solidImage(120, 80, '#22aa44').withMetadata({ orientation: 6 }).jpeg().toBuffer();
    const [turned] = await collect(imageExtractor.extract(harness.ctx, input(sideways.toString('base64'), { enable_ocr: false }, 'image/jpeg')));
    const turnedMeta = await sharp(await readBlob(harness.blobs, (turned!.fields.thumbnail as BlobReference).storage_key)).metadata();
    expect([turnedMeta.width, turnedMeta.height, turnedMeta.orientation]).toEqual([80, 120, undefined]);
  });

  it('writes empty ocr_text when OCR finds nothing, and skips OCR (no field, no call) when enable_ocr is false', async () => {
    const blank = await solidImage(300, 200, '#ffffff').png().toBuffer();
    const [found] = await collect(imageExtractor.extract(harness.ctx, input(blank.toString('base64'))));
    expect(found!.fields.ocr_text).toBe('');
    expect(found!.features).not.toHaveProperty('ocr_text_embedding');

    const before = harness.client.ocrRequests;
    const text = await textPng(['NOT READ']);
    const [skipped] = await collect(imageExtractor.extract(harness.ctx, input(text.toString('base64'), { enable_ocr: false })));
    expect(harness.client.ocrRequests).toBe(before);
    expect(skipped!.fields).not.toHaveProperty('ocr_text');
    expect(skipped!.features!.image_embedding).toHaveLength(IMAGE_EMBEDDING_DIMS);
    expect(skipped!.features).not.toHaveProperty('ocr_text_embedding');
  });

  it('scales a large image down before it goes to the models, and still reads it', async () => {
    const width = 6000;
    const big = await textImage(['WIDE BANNER'], { width, height: 1500, fontSize: 400, x: 300, y: 400 }).png().toBuffer();
    const ref = await putBlob(harness.blobs, 'obj_big', big, 'image/png');
    const sentBefore = harness.describedSizes.length;
    const [draft] = await collect(imageExtractor.extract(harness.ctx, input(ref)));
    expect(draft!.fields).toMatchObject({ width, height: 1500 });
    expect(squash(String(draft!.fields.ocr_text))).toContain('WIDEBANNER');
    const sent = harness.describedSizes.slice(sentBefore);
    expect(sent).toEqual([[WORKING_MAX_SIDE, 512]]);
  });

  it('reports the size as seen after EXIF orientation', async () => {
    const rotated = await textImage(['SIDEWAYS'], { width: 800, height: 200 }).rotate(-90).withMetadata({ orientation: 6 }).jpeg().toBuffer();
    const [draft] = await collect(imageExtractor.extract(harness.ctx, input(rotated.toString('base64'))));
    expect(draft!.fields).toMatchObject({ width: 800, height: 200, format: 'jpeg' });
    expect(squash(String(draft!.fields.ocr_text))).toContain('SIDEWAYS');
  });

  it('rejects what is not a decodable image with an InputError', async () => {
    const png = await textPng(['CUT SHORT']);
    const truncated = png.subarray(0, Math.floor(png.length / 2));
    // Small JPEGs skip the thumbnail's decode (they are their own thumbnail): a cut one and one whose
    // compressed data is garbage behind an intact header and end marker still fail, the latter in the model.
    const jpeg = await textImage(['CUT SHORT'], { width: 200, height: 100 }).jpeg().toBuffer();
    const scan = jpeg.lastIndexOf(Buffer.from([0xff, 0xda]));
    const garbled = Buffer.concat([jpeg.subarray(0, scan + 20), Buffer.alloc(jpeg.length - scan - 22, 0xff), jpeg.subarray(jpeg.length - 2)]);
    const cases: unknown[] = [
      Buffer.from('this is plain text, not an image').toString('base64'),
      truncated.toString('base64'),
      jpeg.subarray(0, Math.floor(jpeg.length / 2)).toString('base64'),
      garbled.toString('base64'),
      'not base64 at all!',
      '',
      42,
      await putBlob(harness.blobs, 'obj_garbage', Buffer.from('%PDF-1.7 not an image'), 'application/octet-stream'),
    ];
    for (const image of cases) {
      await expect(collect(imageExtractor.extract(harness.ctx, input(image))), JSON.stringify(image).slice(0, 60)).rejects.toBeInstanceOf(
        InputError,
      );
    }
  });

  it('rejects parameters outside the schema with an InputError', async () => {
    const png = await textPng(['X']);
    await expect(collect(imageExtractor.extract(harness.ctx, input(png.toString('base64'), { thumbnail_size: 4 })))).rejects.toBeInstanceOf(
      InputError,
    );
  });
});
