/**
 * A small JPEG can be its own thumbnail: decoding and encoding it again costs more CPU than the rest of
 * image_extractor's own work (libvips' fixed cost per pipeline is ~1 ms here, whatever the size), and
 * gives a copy no better than the original. What must not travel with it is its metadata (EXIF: GPS
 * position, camera serial, a thumbnail of the uncropped picture), so the copy keeps only the segments
 * that decoding needs.
 */

/** Markers whose segments the copy keeps: everything but APP1–APP13, APP15 and COM. APP0 (JFIF) and APP14 (Adobe: colour transform) change how it decodes. */
function keeps(marker: number): boolean {
  if (marker >= 0xe1 && marker <= 0xef) return marker === 0xee;
  return marker !== 0xfe;
}

const SOI = 0xd8;
const EOI = 0xd9;
const SOS = 0xda;

/**
 * The JPEG without its metadata segments, or undefined when its structure does not parse: no start
 * marker, a segment running past the end, or no end marker (a truncated file: it goes through a real
 * decode instead, which reports it).
 */
export function stripJpegMetadata(bytes: Uint8Array): Buffer | undefined {
  const n = bytes.length;
  if (n < 4 || bytes[0] !== 0xff || bytes[1] !== SOI || bytes[n - 2] !== 0xff || bytes[n - 1] !== EOI) return undefined;
  const parts: Uint8Array[] = [bytes.subarray(0, 2)];
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
    if (marker === SOS) {
      parts.push(bytes.subarray(start));
      return Buffer.concat(parts);
    }
    // Standalone markers have no length; none belongs before the scan but TEM and RSTn are harmless.
    if (marker === 0x01 || (marker >= 0xd0 && marker <= 0xd7)) {
      parts.push(bytes.subarray(start, start + 2));
      pos = start + 2;
      continue;
    }
    if (marker === SOI || marker === EOI || start + 4 > n) return undefined;
    const end = start + 2 + ((bytes[start + 2]! << 8) | bytes[start + 3]!);
    if (end > n || end < start + 4) return undefined;
    if (keeps(marker)) parts.push(bytes.subarray(start, end));
    pos = end;
  }
  return undefined;
}
