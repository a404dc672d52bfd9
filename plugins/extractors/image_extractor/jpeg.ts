/**
 * JPEG structure read in JavaScript, for the two things image_extractor needs of most pictures without
 * starting a libvips pipeline (~1 ms of CPU each on this host, whatever the size):
 * - the header (size, EXIF orientation, colour space, ICC profile), as sharp would report it;
 * - a small JPEG as its own thumbnail: decoding and encoding it again costs more CPU than the rest of
 *   image_extractor's own work, and gives a copy no better than the original. What must not travel with
 *   it is its metadata (EXIF: GPS position, camera serial, a thumbnail of the uncropped picture), so the
 *   copy keeps only the segments that decoding needs.
 */

/** Markers whose segments the copy keeps: everything but APP1–APP13, APP15 and COM. APP0 (JFIF) and APP14 (Adobe: colour transform) change how it decodes. */
function keeps(marker: number): boolean {
  if (marker >= 0xe1 && marker <= 0xef) return marker === 0xee;
  return marker !== 0xfe;
}

const SOI = 0xd8;
const EOI = 0xd9;
const SOS = 0xda;

/** A marker segment before the scan: `start` at its 0xff, `end` past its last byte. */
interface Segment {
  marker: number;
  start: number;
  end: number;
}

/**
 * The segments from SOI up to the first scan (SOS), and where that scan's marker starts; undefined when the
 * structure does not parse (no start marker, a segment running past the end, no scan).
 */
function segmentsBeforeScan(bytes: Uint8Array): { segments: Segment[]; scanStart: number } | undefined {
  const n = bytes.length;
  if (n < 4 || bytes[0] !== 0xff || bytes[1] !== SOI) return undefined;
  const segments: Segment[] = [];
  let pos = 2;
  while (pos < n) {
    if (bytes[pos] !== 0xff) return undefined;
    let marker = bytes[pos + 1]!;
    let start = pos;
    // Fill bytes (0xff repeated) may precede a marker.
    while (marker === 0xff && start + 2 < n) {
      start++;
      marker = bytes[start + 1]!;
    }
    if (marker === SOS) return { segments, scanStart: start };
    // Standalone markers have no length; none belongs before the scan but TEM and RSTn are harmless.
    if (marker === 0x01 || (marker >= 0xd0 && marker <= 0xd7)) {
      segments.push({ marker, start, end: start + 2 });
      pos = start + 2;
      continue;
    }
    if (marker === SOI || marker === EOI || start + 4 > n) return undefined;
    const end = start + 2 + ((bytes[start + 2]! << 8) | bytes[start + 3]!);
    if (end > n || end < start + 4) return undefined;
    segments.push({ marker, start, end });
    pos = end;
  }
  return undefined;
}

/**
 * The JPEG without its metadata segments, or undefined when its structure does not parse: no start
 * marker, a segment running past the end, or no end marker (a truncated file: it goes through a real
 * decode instead, which reports it).
 */
export function stripJpegMetadata(bytes: Uint8Array): Buffer | undefined {
  const n = bytes.length;
  if (bytes[n - 2] !== 0xff || bytes[n - 1] !== EOI) return undefined;
  const parsed = segmentsBeforeScan(bytes);
  if (!parsed) return undefined;
  const parts: Uint8Array[] = [bytes.subarray(0, 2)];
  for (const { marker, start, end } of parsed.segments) if (keeps(marker)) parts.push(bytes.subarray(start, end));
  parts.push(bytes.subarray(parsed.scanStart));
  return Buffer.concat(parts);
}

/** What image.ts needs to know of a JPEG, as sharp's metadata() reports it. */
export interface JpegHeader {
  /** Size after EXIF orientation, as the picture is seen. */
  width: number;
  height: number;
  /** EXIF orientation (1–8), when the file has one. */
  orientation: number | undefined;
  /** libvips' name of the colour space: `b-w` (1 component), `srgb` (3), `cmyk` (4). */
  space: 'b-w' | 'srgb' | 'cmyk';
  /** An ICC profile (APP2 ICC_PROFILE) is embedded. */
  hasProfile: boolean;
}

/** Start-of-frame markers (SOF0–SOF15 but DHT, JPG and DAC, which share the range). */
function isFrameStart(marker: number): boolean {
  return marker >= 0xc0 && marker <= 0xcf && marker !== 0xc4 && marker !== 0xc8 && marker !== 0xcc;
}

const SPACES: Record<number, JpegHeader['space']> = { 1: 'b-w', 3: 'srgb', 4: 'cmyk' };

function startsWith(bytes: Uint8Array, at: number, text: string): boolean {
  for (let i = 0; i < text.length; i++) if (bytes[at + i] !== text.charCodeAt(i)) return false;
  return true;
}

/**
 * The JPEG's size, orientation, colour space and profile, read from its segments. Undefined whenever anything is
 * unusual (no single frame header, a height given later by DNL, an EXIF block that does not parse, another
 * component count): the caller then asks sharp, so the answer is always sharp's.
 */
export function readJpegHeader(bytes: Uint8Array): JpegHeader | undefined {
  const parsed = segmentsBeforeScan(bytes);
  if (!parsed) return undefined;
  let frame: Segment | undefined;
  let exif: Segment | undefined;
  let hasProfile = false;
  for (const segment of parsed.segments) {
    const { marker, start } = segment;
    if (isFrameStart(marker)) {
      if (frame) return undefined;
      frame = segment;
    } else if (marker === 0xe1 && startsWith(bytes, start + 4, 'Exif\0\0')) {
      // libvips reads the first EXIF block; a second one is unusual enough to leave to it.
      if (exif) return undefined;
      exif = segment;
    } else if (marker === 0xe2 && startsWith(bytes, start + 4, 'ICC_PROFILE\0')) {
      hasProfile = true;
    }
  }
  if (!frame || frame.end - frame.start < 10) return undefined;
  const at = frame.start + 4;
  const height = (bytes[at + 1]! << 8) | bytes[at + 2]!;
  const width = (bytes[at + 3]! << 8) | bytes[at + 4]!;
  const space = SPACES[bytes[at + 5]!];
  if (!width || !height || !space) return undefined;
  const orientation = exif ? exifOrientation(bytes.subarray(exif.start + 10, exif.end)) : undefined;
  if (orientation === null) return undefined;
  const turned = orientation !== undefined && orientation >= 5;
  return { width: turned ? height : width, height: turned ? width : height, orientation, space, hasProfile };
}

/** The orientation tag (0x0112) of IFD0 in a TIFF block; undefined when absent, null when the block does not parse. */
function exifOrientation(tiff: Uint8Array): number | undefined | null {
  if (tiff.length < 8) return null;
  const little = tiff[0] === 0x49 && tiff[1] === 0x49;
  if (!little && !(tiff[0] === 0x4d && tiff[1] === 0x4d)) return null;
  const view = new DataView(tiff.buffer, tiff.byteOffset, tiff.byteLength);
  if (view.getUint16(2, little) !== 42) return null;
  const ifd = view.getUint32(4, little);
  if (ifd + 2 > tiff.length) return null;
  const entries = view.getUint16(ifd, little);
  if (ifd + 2 + entries * 12 > tiff.length) return null;
  for (let i = 0; i < entries; i++) {
    const entry = ifd + 2 + i * 12;
    if (view.getUint16(entry, little) !== 0x0112) continue;
    // SHORT, one value: held in the first two bytes of the value field.
    if (view.getUint16(entry + 2, little) !== 3 || view.getUint32(entry + 4, little) !== 1) return null;
    const value = view.getUint16(entry + 8, little);
    return value >= 1 && value <= 8 ? value : null;
  }
  return undefined;
}
