/**
 * stripJpegMetadata (image_extractor/jpeg.ts): the copy a small JPEG becomes its own thumbnail through
 * decodes to the very same pixels, carries no EXIF, comment or XMP, and a file whose structure does not
 * parse (truncated, not a JPEG) gets no copy at all.
 */
import sharp from 'sharp';
import { describe, expect, it } from 'vitest';
import { stripJpegMetadata } from '../../../plugins/extractors/image_extractor/jpeg.js';
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
