/**
 * Test PDFs built by the tests themselves with pdf-lib: pages of real text (a text layer), "scanned" pages
 * that are only a picture (RGB, or 1-bit like a fax or a black-and-white scanner), turned pages, blank
 * pages, and an encrypted PDF that needs a password.
 */
import {
  PDFDocument,
  PDFHexString,
  PDFName,
  StandardFonts,
  concatTransformationMatrix,
  degrees,
  drawObject,
  popGraphicsState,
  pushGraphicsState,
} from 'pdf-lib';
import sharp from 'sharp';

const PAGE: [number, number] = [612, 792]; // US Letter, in points

export type PdfPageSpec =
  /** Paragraphs of lines drawn as text (Helvetica 18 pt), a blank line's worth of space between paragraphs. */
  | { kind: 'text'; paragraphs: ReadonlyArray<readonly string[]> }
  /** Runs drawn on one baseline with gaps between them (separate text operations, one visual line). */
  | { kind: 'runs'; runs: readonly string[] }
  /**
   * An encoded picture (PNG or JPEG) filling most of the page, and nothing else: a scan. With `rotation`
   * the page is shown turned clockwise by that much (/Rotate) and the picture is stored turned the other
   * way, so the page reads upright as shown (a sheet fed into the scanner sideways).
   */
  | { kind: 'scan'; image: Buffer; rotation?: 0 | 90 | 180 | 270 }
  /** A picture stored as a 1-bit DeviceGray image (drawn from any image by thresholding it). */
  | { kind: 'scan-1bit'; image: Buffer }
  | { kind: 'blank' };

/** Packs a picture into 1-bit rows (MSB first, rows padded to bytes, 1 = white): DeviceGray, BitsPerComponent 1. */
async function oneBitImage(image: Buffer): Promise<{ data: Uint8Array; width: number; height: number }> {
  const { data, info } = await sharp(image).flatten({ background: '#ffffff' }).greyscale().raw().toBuffer({ resolveWithObject: true });
  const rowBytes = Math.ceil(info.width / 8);
  const packed = new Uint8Array(rowBytes * info.height);
  for (let y = 0; y < info.height; y++) {
    for (let x = 0; x < info.width; x++) {
      if (data[(y * info.width + x) * info.channels]! >= 128) packed[y * rowBytes + (x >> 3)]! |= 0x80 >> (x & 7);
    }
  }
  return { data: packed, width: info.width, height: info.height };
}

export async function buildPdf(pages: readonly PdfPageSpec[]): Promise<Uint8Array> {
  const doc = await PDFDocument.create();
  const font = await doc.embedFont(StandardFonts.Helvetica);
  for (const spec of pages) {
    const page = doc.addPage(PAGE);
    switch (spec.kind) {
      case 'text': {
        let y = 720;
        for (const paragraph of spec.paragraphs) {
          for (const line of paragraph) {
            page.drawText(line, { x: 72, y, size: 18, font });
            y -= 24;
          }
          y -= 36;
        }
        break;
      }
      case 'runs': {
        let x = 72;
        for (const run of spec.runs) {
          page.drawText(run, { x, y: 720, size: 18, font });
          x += font.widthOfTextAtSize(run, 18) + 12;
        }
        break;
      }
      case 'scan': {
        const stored = spec.rotation ? await sharp(spec.image).rotate(-spec.rotation).png().toBuffer() : spec.image;
        const meta = await sharp(stored).metadata();
        const embedded = meta.format === 'jpeg' ? await doc.embedJpg(stored) : await doc.embedPng(stored);
        const scale = Math.min(500 / embedded.width, 700 / embedded.height);
        page.drawImage(embedded, { x: 56, y: 60, width: embedded.width * scale, height: embedded.height * scale });
        if (spec.rotation) page.setRotation(degrees(spec.rotation));
        break;
      }
      case 'scan-1bit': {
        const bits = await oneBitImage(spec.image);
        const stream = doc.context.stream(bits.data, {
          Type: 'XObject',
          Subtype: 'Image',
          Width: bits.width,
          Height: bits.height,
          ColorSpace: 'DeviceGray',
          BitsPerComponent: 1,
        });
        const name = page.node.newXObject('Scan', doc.context.register(stream));
        const scale = Math.min(500 / bits.width, 700 / bits.height);
        page.pushOperators(
          pushGraphicsState(),
          concatTransformationMatrix(bits.width * scale, 0, 0, bits.height * scale, 56, 60),
          drawObject(name),
          popGraphicsState(),
        );
        break;
      }
      case 'blank':
        break;
    }
  }
  return doc.save();
}

/**
 * A PDF that declares the standard security handler with a user password (its /U entry matches no
 * password, so even the empty one fails): readers must ask for a password.
 */
export async function encryptedPdf(): Promise<Uint8Array> {
  const doc = await PDFDocument.create();
  doc.addPage(PAGE).drawText('secret', { x: 72, y: 700, size: 18, font: await doc.embedFont(StandardFonts.Helvetica) });
  const encrypt = doc.context.obj({
    Filter: PDFName.of('Standard'),
    V: 1,
    R: 2,
    O: PDFHexString.of('7a'.repeat(32)),
    U: PDFHexString.of('3c'.repeat(32)),
    P: -44,
  });
  doc.context.trailerInfo.Encrypt = doc.context.register(encrypt);
  const id = PDFHexString.of('0123456789abcdef0123456789abcdef');
  doc.context.trailerInfo.ID = doc.context.obj([id, id]);
  // Object streams would be "encrypted" too; keep plain objects so only the password stands in the way.
  return doc.save({ useObjectStreams: false });
}
