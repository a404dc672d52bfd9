/**
 * pdf_extractor: the extractor contract, then behaviour on PDFs the test builds with pdf-lib, against a
 * real in-process inference worker serving the real paddle-ocr and hashed-ngram-text models: text pages
 * keep their lines and paragraphs, scanned pages (RGB, 1-bit, turned by /Rotate) are read by OCR, blank
 * pages give no document, max_pages and ocr_scanned_pages hold, encrypted and broken PDFs are
 * InputErrors, and pdf.js never parses on the calling thread.
 */
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InputError } from '../../../kernel/errors.js';
import { InferenceClient, type CallOverrides, type OcrResultOutput } from '../../../kernel/inference/client.js';
import type { ExtractorInput } from '../../../kernel/plugins.js';
import pdfExtractor, { TEXT_EMBEDDING_DIMS } from '../../../plugins/extractors/pdf_extractor/index.js';
import { rawImageToPng } from '../../../plugins/extractors/pdf_extractor/page-images.js';
import { pageText, type TextRun } from '../../../plugins/extractors/pdf_extractor/page-text.js';
import { createHashedNgramTextModel, hashedNgramEmbedding } from '../../../plugins/models/hashed-ngram-text/index.js';
import { createPaddleOcrModel } from '../../../plugins/models/paddle-ocr/index.js';
import { runExtractorContract } from '../../support/extractor-contract.js';
import { squash, textPng } from '../../support/media/images.js';
import { buildPdf, encryptedPdf } from '../../support/media/pdf.js';
import { collectDrafts as collect, startExtractorHarness, type ExtractorHarness } from '../../support/extractor-harness.js';


/** A client that counts OCR calls, so tests can tell OCR was (not) used without timing anything. */
class CountingInferenceClient extends InferenceClient {
  ocrImages = 0;

  override async ocr(model: string, images: readonly Uint8Array[], overrides?: CallOverrides): Promise<OcrResultOutput[]> {
    this.ocrImages += images.length;
    return super.ocr(model, images, overrides);
  }
}

type Harness = ExtractorHarness<CountingInferenceClient>;

function startHarness(): Promise<Harness> {
  return startExtractorHarness({
    name: 'pdf-extractor',
    models: [createPaddleOcrModel(), createHashedNgramTextModel()],
    client: (o) => new CountingInferenceClient(o),
  });
}

function input(pdf: unknown, parameters: Record<string, unknown> = {}): ExtractorInput {
  return { objectId: 'obj_test', mimeType: 'application/pdf', fields: pdf === undefined ? {} : { pdf }, parameters };
}


const base64 = (bytes: Uint8Array): string => Buffer.from(bytes).toString('base64');

// Made at import (top-level await): the contract needs its inputs when its suite is declared.
const SCAN = await textPng(['HELLO WORLD', 'SCANNED PAGE'], { width: 1000 });
/** Two text pages, a scan, a blank page: the PDF of the task. */
const MIXED = await buildPdf([
  { kind: 'text', paragraphs: [['First page line one', 'First page line two'], ['A second paragraph']] },
  { kind: 'text', paragraphs: [['Second page about tessellation']] },
  { kind: 'scan', image: SCAN },
  { kind: 'blank' },
]);
const MIXED_KEY = 'org_test/ns_test/objects/obj_pdf/content';

// ------------------------------------------------------------------------------------------------ contract

runExtractorContract(pdfExtractor, {
  inputs: [
    input({ storage_key: MIXED_KEY, content_type: 'application/pdf', size_bytes: MIXED.length }),
    input(base64(await buildPdf([{ kind: 'text', paragraphs: [['only page']] }, { kind: 'blank' }])), { max_pages: 1 }),
  ],
  context: async () => {
    const harness = await startHarness();
    await harness.blobs.put(MIXED_KEY, Buffer.from(MIXED), { contentType: 'application/pdf' });
    return { ctx: harness.ctx, cleanup: () => harness.cleanup() };
  },
});

// ------------------------------------------------------------------------------------------------ behaviour

describe('pdf_extractor', () => {
  let harness: Harness;

  beforeAll(async () => {
    harness = await startHarness();
    await harness.blobs.put(MIXED_KEY, Buffer.from(MIXED), { contentType: 'application/pdf' });
  });

  afterAll(async () => {
    await harness?.cleanup();
  });

  it('gives one document per page with text: text pages from their text layer, the scan by OCR, the blank page none', async () => {
    const before = harness.client.ocrImages;
    const drafts = await collect(
      pdfExtractor.extract(harness.ctx, input({ storage_key: MIXED_KEY, content_type: 'application/pdf', size_bytes: MIXED.length })),
    );
    expect(drafts.map((d) => d.key)).toEqual(['page:1', 'page:2', 'page:3']);
    expect(drafts[0]!.fields).toEqual({
      page_number: 1,
      page_count: 4,
      text: 'First page line one\nFirst page line two\n\nA second paragraph',
      char_count: 59,
      ocr_used: false,
    });
    expect(drafts[1]!.fields).toMatchObject({ page_number: 2, page_count: 4, text: 'Second page about tessellation', ocr_used: false });
    const scanned = drafts[2]!.fields;
    expect(scanned).toMatchObject({ page_number: 3, page_count: 4, ocr_used: true });
    expect(squash(String(scanned.text))).toBe('HELLOWORLDSCANNEDPAGE');
    expect(String(scanned.text).split('\n')).toHaveLength(2);
    expect(scanned.char_count).toBe(Array.from(String(scanned.text)).length);
    // Only the scanned page went to OCR (one picture); the blank page has none to send.
    expect(harness.client.ocrImages - before).toBe(1);

    for (const draft of drafts) {
      const vector = draft.features!.text_embedding!;
      expect(vector).toHaveLength(TEXT_EMBEDDING_DIMS);
      // The embedding is the text model's embedding of exactly the page text.
      const expected = hashedNgramEmbedding(String(draft.fields.text));
      expect(vector.map((x, i) => Math.abs(x - expected[i]!)).every((d) => d < 1e-6)).toBe(true);
    }
  });

  it('reads scans stored as 1-bit images and scans on pages turned by /Rotate', async () => {
    const pdf = await buildPdf([
      { kind: 'scan-1bit', image: SCAN },
      { kind: 'scan', image: await textPng(['TURNED SHEET']), rotation: 90 },
      { kind: 'scan', image: await sharp(await textPng(['JPEG SCAN'])).jpeg({ quality: 85 }).toBuffer(), rotation: 180 },
    ]);
    const drafts = await collect(pdfExtractor.extract(harness.ctx, input(base64(pdf))));
    expect(drafts.map((d) => [d.key, d.fields.ocr_used])).toEqual([
      ['page:1', true],
      ['page:2', true],
      ['page:3', true],
    ]);
    expect(squash(String(drafts[0]!.fields.text))).toBe('HELLOWORLDSCANNEDPAGE');
    expect(squash(String(drafts[1]!.fields.text))).toBe('TURNEDSHEET');
    expect(squash(String(drafts[2]!.fields.text))).toBe('JPEGSCAN');
  });

  it('skips scanned pages without OCR when ocr_scanned_pages is false', async () => {
    const before = harness.client.ocrImages;
    const drafts = await collect(pdfExtractor.extract(harness.ctx, input(base64(MIXED), { ocr_scanned_pages: false })));
    expect(drafts.map((d) => d.key)).toEqual(['page:1', 'page:2']);
    expect(harness.client.ocrImages).toBe(before);
  });

  it('processes only max_pages pages, still reporting the whole page_count', async () => {
    const drafts = await collect(pdfExtractor.extract(harness.ctx, input(base64(MIXED), { max_pages: 2 })));
    expect(drafts.map((d) => [d.key, d.fields.page_count])).toEqual([
      ['page:1', 4],
      ['page:2', 4],
    ]);
  });

  it('separates runs drawn apart on one line with spaces', async () => {
    const pdf = await buildPdf([{ kind: 'runs', runs: ['left', 'middle', 'right'] }]);
    const [draft] = await collect(pdfExtractor.extract(harness.ctx, input(base64(pdf))));
    expect(draft!.fields.text).toBe('left middle right');
  });

  it('rejects encrypted, corrupt and non-PDF input with an InputError', async () => {
    const valid = await buildPdf([{ kind: 'text', paragraphs: [['fine']] }]);
    const cases: unknown[] = [
      base64(await encryptedPdf()),
      base64(Buffer.from('just some text, not a PDF')),
      base64(valid.subarray(0, 20)),
      'not base64!',
      { not: 'a blob reference' },
    ];
    for (const pdf of cases) {
      await expect(collect(pdfExtractor.extract(harness.ctx, input(pdf))), JSON.stringify(pdf).slice(0, 40)).rejects.toBeInstanceOf(InputError);
    }
    await expect(collect(pdfExtractor.extract(harness.ctx, input(base64(await encryptedPdf()))))).rejects.toThrow(/encrypted/);
  });

  it('never runs pdf.js on the calling thread (its worker module is not loaded here)', async () => {
    await collect(pdfExtractor.extract(harness.ctx, input(base64(MIXED), { ocr_scanned_pages: false })));
    // pdf.js's worker module registers itself on globalThis when it loads; it must only load in the parser thread.
    expect((globalThis as { pdfjsWorker?: unknown }).pdfjsWorker).toBeUndefined();
  });

  it('closes the parser when the consumer stops early, and can read again afterwards', async () => {
    for await (const draft of pdfExtractor.extract(harness.ctx, input(base64(MIXED), { ocr_scanned_pages: false }))) {
      expect(draft.key).toBe('page:1');
      break;
    }
    const drafts = await collect(pdfExtractor.extract(harness.ctx, input(base64(MIXED), { max_pages: 1 })));
    expect(drafts.map((d) => d.key)).toEqual(['page:1']);
  });
});

describe('pdf_extractor page text', () => {
  const run = (str: string, x: number, y: number, hasEOL = false, size = 12): TextRun => ({
    str,
    transform: [size, 0, 0, size, x, y],
    width: str.length * size * 0.5,
    height: size,
    hasEOL,
  });

  it('breaks lines at hasEOL and at baseline jumps, leaves a blank line at a paragraph gap, spaces apart runs', () => {
    const items = [
      run('Title', 72, 700, true),
      run('first', 72, 684),
      run('line', 110, 684), // a gap of 8 pt after "first" (ends at 102)
      run('second line', 72, 668), // baseline jump without hasEOL
      { type: 'beginMarkedContent', id: 'x' }, // marked content is not text
      run('new paragraph', 72, 620, true),
      run('', 0, 0, true),
    ];
    expect(pageText(items)).toBe('Title\nfirst line\nsecond line\n\nnew paragraph');
  });

  it('gives an empty string for a page with no text runs', () => {
    expect(pageText([])).toBe('');
    expect(pageText([run('   ', 72, 700, true)])).toBe('');
  });
});

describe('pdf_extractor image pixels', () => {
  it('turns pdf.js 1-bit, RGB and RGBA pixels into PNGs (1 = white; alpha laid on white) and applies rotation', async () => {
    // 10 × 2, 1 bit: row 0 all white but the first pixel, row 1 all black; rows padded to 2 bytes.
    const oneBit = await rawImageToPng({ width: 10, height: 2, kind: 1, data: Uint8Array.from([0x7f, 0xc0, 0x00, 0x00]) });
    const grey = await sharp(oneBit!).raw().toBuffer({ resolveWithObject: true });
    expect([grey.info.width, grey.info.height]).toEqual([10, 2]);
    const px = (x: number, y: number) => grey.data[(y * 10 + x) * grey.info.channels]!;
    expect([px(0, 0), px(1, 0), px(9, 0), px(0, 1), px(9, 1)]).toEqual([0, 255, 255, 0, 0]);

    const rgb = await rawImageToPng({ width: 2, height: 1, kind: 2, data: Uint8Array.from([255, 0, 0, 0, 0, 255]) }, 90);
    const turned = await sharp(rgb!).raw().toBuffer({ resolveWithObject: true });
    // Turned clockwise: the left (red) pixel is now on top.
    expect([turned.info.width, turned.info.height]).toEqual([1, 2]);
    expect(Array.from(turned.data.subarray(0, 3))).toEqual([255, 0, 0]);

    const rgba = await rawImageToPng({ width: 1, height: 1, kind: 3, data: Uint8Array.from([0, 0, 0, 0]) });
    const flat = await sharp(rgba!).raw().toBuffer({ resolveWithObject: true });
    expect(Array.from(flat.data.subarray(0, 3))).toEqual([255, 255, 255]);

    // A buffer shorter than its declared size is not an image.
    expect(await rawImageToPng({ width: 4, height: 4, kind: 2, data: new Uint8Array(10) })).toBeUndefined();
  });
});
