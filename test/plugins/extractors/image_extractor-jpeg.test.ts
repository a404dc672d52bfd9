/**
 * stripJpegMetadata (image_extractor/jpeg.ts): the copy a small JPEG becomes its own thumbnail through
 * decodes to the very same pixels, carries no EXIF, comment or XMP, and a file whose structure does not
 * parse (truncated, not a JPEG) gets no copy at all.
 */
import sharp from 'sharp';
import { describe, expect, it } from 'vitest';
import { readJpegHeader, stripJpegMetadata } from '../../../plugins/extractors/image_extractor/jpeg.js';
import { textImage } from '../../support/media/images.js';

async function pixels(bytes: Buffer): Promise<Buffer> {
  return sharp(bytes).raw().toBuffer();
}

/** Inserts a COM segment (a comment) after SOI. */
function withComment(jpeg: Buffer, text: string): Buffer {
  const body = Buffer.from(text, 'latin1');
  const segment = Buffer.concat([Buffer.from([0xff, 0xfe, (body.length + 2) >> 8, (body.length + 2) & 0xff]), body]);
  return Buffer.concat([jpeg.subarray(0, 2), segment, jpeg.subarray(2)]);
}

describe('stripJpegMetadata', () => {
  it('drops EXIF, XMP and comments and keeps every pixel', async () => {
    const original = await textImage(['GPS'], { width: 200, height: 120 })
      .withExif({ IFD0: { Make: 'SecretCam', Copyright: 'someone' }, IFD3: { GPSLatitudeRef: 'N', GPSLatitude: '51/1 30/1 0/1' } })
      .withXmp('<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#"/></x:xmpmeta>')
      .jpeg({ quality: 80 })
      .toBuffer();
    const commented = withComment(original, 'taken at home');
    const before = await sharp(commented).metadata();
    expect(before.exif).toBeDefined();
    expect(before.xmp).toBeDefined();
    expect(commented.includes('SecretCam')).toBe(true);

    const stripped = stripJpegMetadata(commented)!;
    expect(stripped).toBeInstanceOf(Buffer);
    expect(stripped.length).toBeLessThan(commented.length);
    for (const secret of ['SecretCam', 'someone', 'taken at home', 'xmpmeta']) expect(stripped.includes(secret)).toBe(false);
    const after = await sharp(stripped).metadata();
    expect(after).toMatchObject({ format: 'jpeg', width: 200, height: 120 });
    expect(after.exif).toBeUndefined();
    expect(after.xmp).toBeUndefined();
    expect((await pixels(stripped)).equals(await pixels(original))).toBe(true);
  });

  it('keeps a progressive JPEG and a greyscale one decodable, pixel for pixel', async () => {
    for (const image of [
      await textImage(['PROG']).jpeg({ progressive: true }).toBuffer(),
      await textImage(['GREY']).greyscale().jpeg().toBuffer(),
    ]) {
      const stripped = stripJpegMetadata(image)!;
      expect((await pixels(stripped)).equals(await pixels(image))).toBe(true);
    }
  });

  it('gives nothing for a truncated file, a segment running past the end, or what is not a JPEG', async () => {
    const jpeg = await textImage(['CUT']).jpeg().toBuffer();
    expect(stripJpegMetadata(jpeg.subarray(0, Math.floor(jpeg.length / 2)))).toBeUndefined();
    expect(stripJpegMetadata(Buffer.from([0xff, 0xd8, 0xff, 0xe1, 0x7f, 0xff, 0x00, 0xff, 0xd9]))).toBeUndefined();
    expect(stripJpegMetadata(Buffer.from([0xff, 0xd8, 0xff, 0xd9]))).toBeUndefined();
    expect(stripJpegMetadata(await textImage(['PNG']).png().toBuffer())).toBeUndefined();
    expect(stripJpegMetadata(Buffer.alloc(0))).toBeUndefined();
  });
});

/** A big-endian ("MM") EXIF block holding only IFD0's orientation tag, inserted after SOI. */
function withBigEndianOrientation(jpeg: Buffer, orientation: number): Buffer {
  const tiff = Buffer.alloc(8 + 2 + 12 + 4);
  tiff.write('MM', 0, 'latin1');
  tiff.writeUInt16BE(42, 2);
  tiff.writeUInt32BE(8, 4);
  tiff.writeUInt16BE(1, 8);
  tiff.writeUInt16BE(0x0112, 10);
  tiff.writeUInt16BE(3, 12);
  tiff.writeUInt32BE(1, 14);
  tiff.writeUInt16BE(orientation, 18);
  const body = Buffer.concat([Buffer.from('Exif\0\0', 'latin1'), tiff]);
  const segment = Buffer.concat([Buffer.from([0xff, 0xe1, (body.length + 2) >> 8, (body.length + 2) & 0xff]), body]);
  return Buffer.concat([jpeg.subarray(0, 2), segment, jpeg.subarray(2)]);
}

/** What sharp says of the same file, in readJpegHeader's terms. */
async function sharpHeader(bytes: Buffer): Promise<Record<string, unknown>> {
  const meta = await sharp(bytes, { autoOrient: true }).metadata();
  return {
    width: meta.autoOrient?.width ?? meta.width,
    height: meta.autoOrient?.height ?? meta.height,
    orientation: meta.orientation,
    space: meta.space,
    hasProfile: meta.hasProfile === true,
  };
}

describe('readJpegHeader', () => {
  it('says what sharp says: size as seen, EXIF orientation (either byte order), colour space, ICC profile', async () => {
    const base = () => textImage(['HEAD'], { width: 200, height: 120 });
    const cases: Array<[string, Buffer]> = [
      ['baseline', await base().jpeg().toBuffer()],
      ['progressive', await base().jpeg({ progressive: true }).toBuffer()],
      ['grey', await base().toColourspace('b-w').jpeg().toBuffer()],
      ['cmyk', await base().toColourspace('cmyk').jpeg().toBuffer()],
      ['orientation 6', await base().withMetadata({ orientation: 6 }).jpeg().toBuffer()],
      ['orientation 3 with EXIF fields', await base().withExif({ IFD0: { Make: 'Cam' } }).withMetadata({ orientation: 3 }).jpeg().toBuffer()],
      ['orientation 8, big-endian EXIF', withBigEndianOrientation(await base().jpeg().toBuffer(), 8)],
      ['ICC profile', await base().withIccProfile('p3').jpeg().toBuffer()],
      ['comment', withComment(await base().jpeg().toBuffer(), 'hello')],
    ];
    for (const [name, bytes] of cases) {
      const header = readJpegHeader(bytes);
      expect(header, name).toBeDefined();
      expect({ ...header }, name).toEqual(await sharpHeader(bytes));
    }
    // The cases do differ where they should.
    expect(readJpegHeader(cases[4]![1])).toMatchObject({ width: 120, height: 200, orientation: 6 });
    expect(readJpegHeader(cases[2]![1])!.space).toBe('b-w');
    expect(readJpegHeader(cases[7]![1])!.hasProfile).toBe(true);
  });

  it('leaves sharp to answer for what is not a plain JPEG header', async () => {
    const jpeg = await textImage(['ODD']).jpeg().toBuffer();
    expect(readJpegHeader(await textImage(['PNG']).png().toBuffer())).toBeUndefined();
    expect(readJpegHeader(jpeg.subarray(0, 100))).toBeUndefined(); // cut before the scan
    expect(readJpegHeader(withBigEndianOrientation(jpeg, 0))).toBeUndefined(); // an orientation out of range
    expect(readJpegHeader(Buffer.from([0xff, 0xd8, 0xff, 0xda, 0, 2]))).toBeUndefined(); // a scan without a frame header
    expect(readJpegHeader(Buffer.alloc(0))).toBeUndefined();
  });
});
