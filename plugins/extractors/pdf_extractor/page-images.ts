/**
 * The pictures painted on a page, for pages without a text layer (scans): found in the page's operator
 * list (paintImageXObject, paintImageXObjectRepeat, paintInlineImageXObject), their decoded pixels taken
 * from pdf.js's object store, and encoded as PNG by sharp (on libuv's thread pool) for the OCR model.
 */
import type { PDFPageProxy } from 'pdfjs-dist/legacy/build/pdf.mjs';
import type { Sharp, SharpOptions } from 'sharp';
import type { OpenPdf } from './pdf-reader.js';

type SharpFactory = (input: Uint8Array | Uint8ClampedArray, options?: SharpOptions) => Sharp;

/** Decoded pixels as pdf.js hands them over. */
export interface RawImage {
  width: number;
  height: number;
  /** pdf.js ImageKind: 1 = 1 bit grey (rows padded to whole bytes, 1 = white), 2 = RGB, 3 = RGBA. */
  kind: number;
  data: Uint8Array | Uint8ClampedArray;
}

/** Pictures smaller than this on either side are icons, rules or bullets, not scanned text. */
const MIN_SIDE = 32;
/** At most this many pictures of one page are read (the largest), so a page of tiles cannot flood OCR. */
export const MAX_IMAGES_PER_PAGE = 8;
/** Longest side sent to OCR (the paddle-ocr model works at 2048 at most); larger scans are scaled down here. */
const OCR_MAX_SIDE = 2048;
/** How long one image object may take to arrive from the parser thread before it is skipped. */
const OBJECT_TIMEOUT_MS = 60_000;

let sharpModule: Promise<SharpFactory> | undefined;

function loadSharp(): Promise<SharpFactory> {
  sharpModule ??= import('sharp').then(
    (mod) => mod.default as SharpFactory,
    (err: unknown) => {
      sharpModule = undefined;
      throw err;
    },
  );
  return sharpModule;
}

function isRawImage(value: unknown): value is RawImage {
  if (!value || typeof value !== 'object') return false;
  const v = value as { width?: unknown; height?: unknown; kind?: unknown; data?: unknown };
  return (
    Number.isInteger(v.width) &&
    Number.isInteger(v.height) &&
    (v.kind === 1 || v.kind === 2 || v.kind === 3) &&
    (v.data instanceof Uint8Array || v.data instanceof Uint8ClampedArray)
  );
}

/** Unpacks 1-bit rows (padded to bytes, most significant bit first) into 8-bit grey. */
function unpackBits(image: RawImage): Uint8Array {
  const rowBytes = Math.ceil(image.width / 8);
  const out = new Uint8Array(image.width * image.height);
  for (let y = 0; y < image.height; y++) {
    for (let x = 0; x < image.width; x++) {
      const byte = image.data[y * rowBytes + (x >> 3)]!;
      out[y * image.width + x] = (byte >> (7 - (x & 7))) & 1 ? 255 : 0;
    }
  }
  return out;
}

/**
 * A PNG of `image` turned by the page's rotation (so text reads upright as the page is shown), on white,
 * at most OCR_MAX_SIDE on the longer side; undefined when the pixel buffer does not match its size.
 */
export async function rawImageToPng(image: RawImage, rotation = 0): Promise<Buffer | undefined> {
  const channels = image.kind === 1 ? 1 : image.kind === 2 ? 3 : 4;
  const expected = image.kind === 1 ? Math.ceil(image.width / 8) * image.height : image.width * image.height * channels;
  if (image.width < 1 || image.height < 1 || image.data.length < expected) return undefined;
  const pixels = image.kind === 1 ? unpackBits(image) : image.data.subarray(0, expected);
  const sharp = await loadSharp();
  let pipeline = sharp(pixels, { raw: { width: image.width, height: image.height, channels } });
  if (channels === 4) pipeline = pipeline.flatten({ background: '#ffffff' });
  const turn = ((rotation % 360) + 360) % 360;
  if (turn !== 0) pipeline = pipeline.rotate(turn);
  return pipeline
    .resize({ width: OCR_MAX_SIDE, height: OCR_MAX_SIDE, fit: 'inside', withoutEnlargement: true })
    .png({ compressionLevel: 1 })
    .toBuffer();
}

/** The decoded image `objId` once the parser thread has sent it; undefined if it never comes. */
function imageObject(pdf: OpenPdf, page: PDFPageProxy, objId: string): Promise<unknown> {
  // Images used on several pages live in the document-wide store under 'g_' ids.
  const store = objId.startsWith('g_') ? page.commonObjs : page.objs;
  return pdf.guard(
    new Promise<unknown>((resolve) => {
      const timer = setTimeout(() => resolve(undefined), OBJECT_TIMEOUT_MS);
      store.get(objId, (data: unknown) => {
        clearTimeout(timer);
        resolve(data);
      });
    }),
  );
}

/** The page's pictures worth reading, largest first up to MAX_IMAGES_PER_PAGE, then in painting order. */
export async function pageImages(pdf: OpenPdf, page: PDFPageProxy): Promise<RawImage[]> {
  const { OPS } = pdf.pdfjs;
  const operators = await pdf.guard(page.getOperatorList());
  const found: RawImage[] = [];
  const seen = new Set<string>();
  for (let i = 0; i < operators.fnArray.length; i++) {
    const fn = operators.fnArray[i];
    const args = operators.argsArray[i] as unknown[] | undefined;
    let image: unknown;
    if (fn === OPS.paintInlineImageXObject) {
      image = args?.[0];
    } else if (fn === OPS.paintImageXObject || fn === OPS.paintImageXObjectRepeat) {
      const objId = args?.[0];
      if (typeof objId !== 'string' || seen.has(objId)) continue;
      seen.add(objId);
      image = await imageObject(pdf, page, objId);
    } else {
      continue;
    }
    if (isRawImage(image) && image.width >= MIN_SIDE && image.height >= MIN_SIDE) found.push(image);
  }
  const area = (img: RawImage) => img.width * img.height;
  const kept = new Set([...found].sort((a, b) => area(b) - area(a)).slice(0, MAX_IMAGES_PER_PAGE));
  return found.filter((img) => kept.has(img));
}
