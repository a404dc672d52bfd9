/**
 * Test pictures drawn by the tests themselves (no downloads): text rendered through an SVG with the
 * DejaVu fonts installed on the machine, and plain colour fields. Rasterised by sharp (librsvg).
 */
import sharp, { type Sharp } from 'sharp';

export interface TextImageOptions {
  width?: number;
  height?: number;
  /** Pixel size of the font; large and bold by default so OCR reads it reliably. */
  fontSize?: number;
  /** Top-left corner of the first line's box. */
  x?: number;
  y?: number;
  /** Vertical distance between baselines, default 1.6 × fontSize. */
  lineHeight?: number;
  background?: string;
  colour?: string;
}

function escapeXml(text: string): string {
  return text.replace(/[<>&'"]/g, (c) => ({ '<': '&lt;', '>': '&gt;', '&': '&amp;', "'": '&apos;', '"': '&quot;' })[c]!);
}

/** An SVG with `lines` of text, one below the other (background 'none' leaves it transparent). */
export function textSvg(lines: readonly string[], options: TextImageOptions = {}): Buffer {
  const fontSize = options.fontSize ?? 72;
  const lineHeight = options.lineHeight ?? Math.round(fontSize * 1.6);
  const width = options.width ?? 900;
  const height = options.height ?? Math.max(200, lineHeight * lines.length + fontSize);
  const x = options.x ?? 40;
  const y = options.y ?? 40;
  const background = options.background ?? '#ffffff';
  const colour = options.colour ?? '#000000';
  const texts = lines
    .map(
      (line, i) =>
        `<text x="${x}" y="${y + fontSize + i * lineHeight}" font-family="DejaVu Sans" font-weight="bold" ` +
        `font-size="${fontSize}" fill="${colour}">${escapeXml(line)}</text>`,
    )
    .join('');
  const fill = background === 'none' ? '' : `<rect width="100%" height="100%" fill="${background}"/>`;
  return Buffer.from(`<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}">${fill}${texts}</svg>`);
}

/** A sharp pipeline over the rendered text (encode it as PNG, JPEG, ... as the test needs). */
export function textImage(lines: readonly string[], options: TextImageOptions = {}): Sharp {
  return sharp(textSvg(lines, options));
}

/** A PNG with `lines` of large black text on white. */
export function textPng(lines: readonly string[], options: TextImageOptions = {}): Promise<Buffer> {
  return textImage(lines, options).png().toBuffer();
}

/** A picture of one colour. */
export function solidImage(width: number, height: number, colour: string): Sharp {
  return sharp({ create: { width, height, channels: 3, background: colour } });
}

/** Upper-cases and drops whitespace, so OCR output compares to the drawn text whatever spacing it read. */
export function squash(text: string): string {
  return text.toUpperCase().replace(/\s+/gu, '');
}
