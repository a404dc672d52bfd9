/**
 * pdf_extractor: one document per page with the page's text (line breaks kept), its number and the
 * document's page count, and a 384-d `text_embedding` (hashed-ngram-text). Pages without a text layer
 * (scans) are read by OCR: the pictures painted on them are decoded by pdf.js, encoded as PNG and sent to
 * the paddle-ocr model (`ocr_used` says so). Nothing is rendered (no canvas is needed).
 *
 * Pages with no text at all (blank, or a scan OCR finds nothing in, or a scan with ocr_scanned_pages off)
 * give no document: a page document is its text and that text's embedding, and the extractor contract
 * wants the embedding on every document. `page_count` on every document still tells the whole length.
 *
 * Draft keys are `page:<n>` (1-based), so re-running the same PDF replaces its documents.
 * An encrypted (password) or unreadable PDF is an InputError.
 */
import type { PDFPageProxy } from 'pdfjs-dist/legacy/build/pdf.mjs';
import { defineExtractor, type DocumentDraft, type ExtractorContext } from '../../../kernel/plugins.js';
import { readPdfInput } from './input.js';
import { pageImages, rawImageToPng } from './page-images.js';
import { pageText, tidy } from './page-text.js';
import { parametersSchema, resolveParameters } from './parameters.js';
import { openPdf, type OpenPdf } from './pdf-reader.js';

export const TEXT_EMBEDDING_DIMS = 384;
export const TEXT_MODEL = 'hashed-ngram-text';
export const OCR_MODEL = 'paddle-ocr';
/** Pages embedded per embedText call (and the most page texts held before they are yielded). */
export const EMBED_BATCH = 16;

interface PageResult {
  pageNumber: number;
  text: string;
  ocrUsed: boolean;
}

const hasText = (text: string): boolean => /\S/u.test(text);

/** OCR of the pictures on a page without a text layer; '' when there are none or they hold no text. */
async function ocrPage(ctx: ExtractorContext, pdf: OpenPdf, page: PDFPageProxy): Promise<string> {
  const images = await pageImages(pdf, page);
  const pngs: Buffer[] = [];
  for (const image of images) {
    const png = await rawImageToPng(image, page.rotate);
    if (png) pngs.push(png);
  }
  if (pngs.length === 0) return '';
  const results = await ctx.inference.ocr(OCR_MODEL, pngs);
  return tidy(
    results
      .map((r) => r.text.trim())
      .filter(hasText)
      .join('\n\n'),
  );
}

/** One page's text, from its text layer or else by OCR; undefined when pdf.js cannot read the page. */
async function readPage(ctx: ExtractorContext, pdf: OpenPdf, pageNumber: number, ocrScannedPages: boolean): Promise<PageResult | undefined> {
  let page: PDFPageProxy;
  let text: string;
  try {
    page = await pdf.guard(pdf.document.getPage(pageNumber));
    const content = await pdf.guard(page.getTextContent());
    text = pageText(content.items);
  } catch (err) {
    if (pdf.failed) throw err;
    // One damaged page must not cost the rest of the document.
    ctx.log.warn({ err, pageNumber }, 'pdf_extractor: page could not be read; skipped');
    return undefined;
  }
  try {
    if (hasText(text) || !ocrScannedPages) return { pageNumber, text, ocrUsed: false };
    return { pageNumber, text: await ocrPage(ctx, pdf, page), ocrUsed: true };
  } finally {
    page.cleanup();
  }
}

async function embed(ctx: ExtractorContext, pages: readonly PageResult[]): Promise<number[][]> {
  const vectors = await ctx.inference.embedText(
    TEXT_MODEL,
    pages.map((p) => p.text),
  );
  if (vectors.length !== pages.length) {
    throw new Error(`pdf_extractor: model ${TEXT_MODEL} returned ${vectors.length} vectors for ${pages.length} pages`);
  }
  for (const vector of vectors) {
    if (vector.length !== TEXT_EMBEDDING_DIMS) {
      throw new Error(`pdf_extractor: model ${TEXT_MODEL} gives ${vector.length}-d vectors; text_embedding needs ${TEXT_EMBEDDING_DIMS}`);
    }
  }
  return vectors;
}

export default defineExtractor({
  name: 'pdf_extractor',
  version: '1.0',
  description:
    'One document per PDF page with its text (line breaks kept) and a 384-d text embedding; pages without a text layer ' +
    '(scans) are read by OCR. Blank pages give no document.',
  accepts: ['application/pdf'],
  inputs: [
    {
      name: 'pdf',
      type: 'pdf',
      required: true,
      description: 'The PDF: a blob reference, or base64 data. Encrypted PDFs that need a password are refused.',
    },
  ],
  parameters: parametersSchema,
  features: [{ name: 'text_embedding', dims: TEXT_EMBEDDING_DIMS, distance: 'cosine', model: TEXT_MODEL }],
  fields: {
    type: 'object',
    additionalProperties: false,
    required: ['page_number', 'page_count', 'text', 'char_count', 'ocr_used'],
    properties: {
      page_number: { type: 'integer', minimum: 1, description: 'The page, from 1.' },
      page_count: { type: 'integer', minimum: 1, description: 'Pages in the whole PDF (also those beyond max_pages).' },
      text: { type: 'string', minLength: 1, description: 'The page text: one line per line, a blank line between paragraphs.' },
      char_count: { type: 'integer', minimum: 1, description: 'Characters (Unicode code points) in text.' },
      ocr_used: { type: 'boolean', description: 'The page had no text layer and its text was read by OCR.' },
    },
  },
  async *extract(ctx, input): AsyncIterable<DocumentDraft> {
    const params = resolveParameters(input.parameters);
    const bytes = await readPdfInput(ctx.blobs, input.fields.pdf);
    const pdf = await openPdf(bytes);
    try {
      const pageCount = pdf.document.numPages;
      const last = Math.min(pageCount, params.maxPages);
      if (last < pageCount) {
        ctx.log.warn({ objectId: input.objectId, pageCount, maxPages: params.maxPages }, 'pdf_extractor: pages beyond max_pages were not processed');
      }
      let pending: PageResult[] = [];
      const flush = async function* (): AsyncIterable<DocumentDraft> {
        const vectors = await embed(ctx, pending);
        for (const [i, page] of pending.entries()) {
          yield {
            key: `page:${page.pageNumber}`,
            fields: {
              page_number: page.pageNumber,
              page_count: pageCount,
              text: page.text,
              char_count: Array.from(page.text).length,
              ocr_used: page.ocrUsed,
            },
            features: { text_embedding: vectors[i]! },
          };
        }
        pending = [];
      };
      for (let pageNumber = 1; pageNumber <= last; pageNumber++) {
        const page = await readPage(ctx, pdf, pageNumber, params.ocrScannedPages);
        if (page && hasText(page.text)) pending.push(page);
        if (pending.length >= EMBED_BATCH) yield* flush();
      }
      if (pending.length > 0) yield* flush();
    } finally {
      await pdf.close();
    }
  },
});
