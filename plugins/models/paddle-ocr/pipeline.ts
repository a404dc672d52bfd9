/**
 * PaddleOCR v4 (detection + recognition) run on onnxruntime directly over all the pictures of a call at
 * once: their detections, then the text lines of all of them, on one pair of sessions (one thread per run;
 * several cores are several reader threads, see ./reader-threads.ts). Runs may take several pictures (same
 * detection size) or lines (same width rounded up to 32 px) each: DETECTION_BATCH and RECOGNITION_BATCH.
 * Measured on this project's 2-core machine with onnxruntime-node's CPU provider, one thread, CPU time per
 * item: detection of a 256×256 picture 14.5 ms alone, 18.2 ms in runs of 4; recognition of a 160 px line
 * 8.7 ms alone, 12.5 ms in runs of 4 and 13.9 ms in runs of 16. So runs take one item each.
 *
 * It follows the steps of `@gutenye/ocr-node` (the library this plugin used before): detection on the
 * picture scaled to multiples of 32, BGR channels in 0..1, a probability map cut at 0.03, each region
 * grown by PaddleOCR's unclip ratio 1.5, lines read at 48 px high with CTC decoding over the bundled
 * dictionary, lines below 0.5 mean confidence dropped, boxes on one line merged. Unlike the library,
 * regions are the map's connected components with axis-aligned boxes (the model reads horizontal text
 * only), so no opencv.js (and its wasm heap) is loaded, and pixels stay in typed arrays: the library built
 * JavaScript number arrays of every pixel, which cost more time and heap than the model itself.
 */
import type { InferenceSession, Tensor } from 'onnxruntime-node';
import type { SharpFactory } from './prepare.js';

/** One recognised line: text, mean character confidence, quadrilateral (4 × [x, y]) in prepared-image pixels. */
export interface RawLine {
  text: string;
  mean: number;
  box: number[][];
}

/** A decoded picture: RGB bytes, row-major. */
export interface RgbImage {
  data: Uint8Array;
  width: number;
  height: number;
}

type Ort = typeof import('onnxruntime-node');

export interface OcrSessions {
  ort: Ort;
  detection: InferenceSession;
  recognition: InferenceSession;
  /** Recognition classes: index 0 is CTC's blank, index i the dictionary's character i - 1. */
  dictionary: string[];
}

const BASE_SIZE = 32;
/**
 * Longer side of detection's input. Detection's time and memory grow with its area: a 1600×1200 page at
 * full size held several hundred MB of onnxruntime buffers per run.
 */
const DETECTION_MAX_SIDE = 960;
const MAP_THRESHOLD = 0.03;
const UNCLIP_RATIO = 1.5;
const MIN_SIDE = 3;
const LINE_HEIGHT = 48;
const MIN_CONFIDENCE = 0.5;
/** Pictures per detection run and lines per recognition run (see the measurements above). */
const DETECTION_BATCH = 1;
const RECOGNITION_BATCH = 1;
/** In runs of several lines, each line is padded to its width rounded up to this many pixels. */
const LINE_WIDTH_STEP = 32;

interface Region {
  /** Axis-aligned box in prepared-image pixels. */
  x0: number;
  y0: number;
  x1: number;
  y1: number;
}

interface LineCrop {
  picture: number;
  region: Region;
  /** 48 px high RGB crop. */
  pixels: RgbImage;
}

/** Planar B, G, R floats in 0..1 at `offset` of `out` (the layout both PaddleOCR graphs read, as the library fed them). */
function writePlanarBgr(image: RgbImage, out: Float32Array, offset: number, padToWidth = image.width): void {
  const { data, width, height } = image;
  const plane = height * padToWidth;
  for (let y = 0; y < height; y++) {
    const rowOut = offset + y * padToWidth;
    const rowIn = y * width * 3;
    for (let x = 0; x < padToWidth; x++) {
      // Past its own width a line repeats its last column: a neutral continuation of its background.
      const i = rowIn + Math.min(x, width - 1) * 3;
      out[rowOut + x] = data[i + 2]! / 255;
      out[rowOut + plane + x] = data[i + 1]! / 255;
      out[rowOut + 2 * plane + x] = data[i]! / 255;
    }
  }
}

/**
 * Detection's input size: the picture at most DETECTION_MAX_SIDE on its longer side (PaddleOCR's own
 * default limit), rounded up to multiples of 32. Lines are still cut from the full picture for recognition.
 */
function detectionSize(image: RgbImage): { width: number; height: number } {
  const ratio = Math.min(1, DETECTION_MAX_SIDE / Math.max(image.width, image.height));
  return {
    width: Math.max(Math.ceil((image.width * ratio) / BASE_SIZE) * BASE_SIZE, BASE_SIZE),
    height: Math.max(Math.ceil((image.height * ratio) / BASE_SIZE) * BASE_SIZE, BASE_SIZE),
  };
}

/**
 * Regions of one probability map (`width` × `height` at `offset`): 8-connected components above the
 * threshold, grown by the unclip distance, in prepared-image pixels (`sx`, `sy`: picture pixels per map pixel).
 */
function regionsOf(map: Float32Array, offset: number, width: number, height: number, sx: number, sy: number, picture: RgbImage): Region[] {
  const seen = new Uint8Array(width * height);
  const stack = new Int32Array(width * height);
  const regions: Region[] = [];
  for (let start = 0; start < width * height; start++) {
    if (seen[start] || map[offset + start]! <= MAP_THRESHOLD) continue;
    let top = 0;
    stack[top++] = start;
    seen[start] = 1;
    let x0 = width;
    let y0 = height;
    let x1 = -1;
    let y1 = -1;
    while (top > 0) {
      const p = stack[--top]!;
      const px = p % width;
      const py = (p - px) / width;
      if (px < x0) x0 = px;
      if (px > x1) x1 = px;
      if (py < y0) y0 = py;
      if (py > y1) y1 = py;
      for (let dy = -1; dy <= 1; dy++) {
        const ny = py + dy;
        if (ny < 0 || ny >= height) continue;
        for (let dx = -1; dx <= 1; dx++) {
          const nx = px + dx;
          if (nx < 0 || nx >= width) continue;
          const q = ny * width + nx;
          if (seen[q] || map[offset + q]! <= MAP_THRESHOLD) continue;
          seen[q] = 1;
          stack[top++] = q;
        }
      }
    }
    // Pixel extents, as a contour's bounding rectangle measures them.
    const w = x1 - x0 + 1;
    const h = y1 - y0 + 1;
    if (Math.min(w, h) < MIN_SIDE) continue;
    const distance = (w * h * UNCLIP_RATIO) / (2 * (w + h));
    if (Math.min(w, h) + 2 * distance < MIN_SIDE + 2) continue;
    const region = {
      x0: Math.max(0, Math.round((x0 - distance) * sx)),
      y0: Math.max(0, Math.round((y0 - distance) * sy)),
      x1: Math.min(picture.width, Math.round((x1 + 1 + distance) * sx)),
      y1: Math.min(picture.height, Math.round((y1 + 1 + distance) * sy)),
    };
    if (region.x1 - region.x0 <= 3 || region.y1 - region.y0 <= 3) continue;
    regions.push(region);
  }
  return regions;
}

/** Runs `work` over `items`, at most `limit` at a time; results in the items' order. */
async function mapLimited<T, R>(items: readonly T[], limit: number, work: (item: T) => Promise<R>): Promise<R[]> {
  const results: R[] = new Array(items.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(Math.max(1, limit), items.length) }, async () => {
      while (next < items.length) {
        const i = next++;
        results[i] = await work(items[i]!);
      }
    }),
  );
  return results;
}

function chunks<T>(items: readonly T[], size: number): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size));
  return out;
}

/** Detection over every picture: pictures of one input size may share a run. Returns each picture's text regions. */
async function detect(sessions: OcrSessions, sharp: SharpFactory, pictures: readonly RgbImage[], parallel: number): Promise<Region[][]> {
  const regions: Region[][] = pictures.map(() => []);
  const groups = new Map<string, number[]>();
  for (const [i, picture] of pictures.entries()) {
    const { width, height } = detectionSize(picture);
    const key = `${width}x${height}`;
    const group = groups.get(key);
    if (group) group.push(i);
    else groups.set(key, [i]);
  }
  const runs = [...groups.values()].flatMap((members) => chunks(members, DETECTION_BATCH));
  await mapLimited(runs, parallel, async (members) => {
    const { width, height } = detectionSize(pictures[members[0]!]!);
    const input = new Float32Array(members.length * 3 * width * height);
    for (const [slot, index] of members.entries()) {
      const picture = pictures[index]!;
      const scaled = picture.width === width && picture.height === height ? picture : await resizeRgb(sharp, picture, width, height);
      writePlanarBgr(scaled, input, slot * 3 * width * height);
    }
    const feeds = { [sessions.detection.inputNames[0]!]: new sessions.ort.Tensor('float32', input, [members.length, 3, height, width]) };
    const output = (await sessions.detection.run(feeds))[sessions.detection.outputNames[0]!] as Tensor;
    const map = output.data as Float32Array;
    const [, , mapHeight = height, mapWidth = width] = output.dims;
    for (const [slot, index] of members.entries()) {
      const picture = pictures[index]!;
      regions[index] = regionsOf(map, slot * mapWidth * mapHeight, mapWidth, mapHeight, picture.width / mapWidth, picture.height / mapHeight, picture);
    }
    output.dispose();
  });
  return regions;
}

async function resizeRgb(sharp: SharpFactory, image: RgbImage, width: number, height: number): Promise<RgbImage> {
  const { data, info } = await sharp(image.data, { raw: { width: image.width, height: image.height, channels: 3 } })
    .resize({ width, height, fit: 'fill' })
    .raw()
    .toBuffer({ resolveWithObject: true });
  return { data, width: info.width, height: info.height };
}

/** A region cut out of its picture and scaled to the recognition height, keeping its proportions. */
async function lineCrop(sharp: SharpFactory, picture: RgbImage, region: Region): Promise<RgbImage> {
  const width = region.x1 - region.x0;
  const height = region.y1 - region.y0;
  const { data, info } = await sharp(picture.data, { raw: { width: picture.width, height: picture.height, channels: 3 } })
    .extract({ left: region.x0, top: region.y0, width, height })
    .resize({ height: LINE_HEIGHT, width: Math.max(1, Math.round((width * LINE_HEIGHT) / height)), fit: 'fill' })
    .raw()
    .toBuffer({ resolveWithObject: true });
  return { data, width: info.width, height: info.height };
}

/** CTC greedy decoding of `steps` time steps of one line's class probabilities. */
function decodeLine(probs: Float32Array, offset: number, steps: number, classes: number, dictionary: readonly string[]): { text: string; mean: number } {
  let text = '';
  let sum = 0;
  let count = 0;
  let previous = -1;
  for (let t = 0; t < steps; t++) {
    const row = offset + t * classes;
    let best = 0;
    let bestProb = probs[row]!;
    for (let c = 1; c < classes; c++) {
      const p = probs[row + c]!;
      if (p > bestProb) {
        bestProb = p;
        best = c;
      }
    }
    if (best !== 0 && best !== previous) {
      text += dictionary[best - 1] ?? '';
      sum += bestProb;
      count += 1;
    }
    previous = best;
  }
  return { text, mean: count > 0 ? sum / count : 0 };
}

/**
 * The width a line is padded to in runs of several lines: its own rounded up to a multiple of 32,
 * whatever else is in the call, so a line reads the same (text and confidence) alone or in a batch.
 */
function paddedWidth(width: number): number {
  return RECOGNITION_BATCH > 1 ? Math.ceil(width / LINE_WIDTH_STEP) * LINE_WIDTH_STEP : width;
}

/** Recognition over every line of every picture: lines of one padded width may share a run. */
async function recognise(sessions: OcrSessions, crops: readonly LineCrop[], parallel: number): Promise<Array<{ text: string; mean: number }>> {
  const results: Array<{ text: string; mean: number }> = new Array(crops.length);
  const byWidth = new Map<number, number[]>();
  for (const [i, crop] of crops.entries()) {
    const width = paddedWidth(crop.pixels.width);
    const group = byWidth.get(width);
    if (group) group.push(i);
    else byWidth.set(width, [i]);
  }
  const runs = [...byWidth.entries()].flatMap(([width, members]) => chunks(members, RECOGNITION_BATCH).map((batch) => ({ width, batch })));
  await mapLimited(runs, parallel, async ({ width, batch }) => {
    const input = new Float32Array(batch.length * 3 * LINE_HEIGHT * width);
    for (const [slot, index] of batch.entries()) writePlanarBgr(crops[index]!.pixels, input, slot * 3 * LINE_HEIGHT * width, width);
    const feeds = { [sessions.recognition.inputNames[0]!]: new sessions.ort.Tensor('float32', input, [batch.length, 3, LINE_HEIGHT, width]) };
    const output = (await sessions.recognition.run(feeds))[sessions.recognition.outputNames[0]!] as Tensor;
    const [, steps = 0, classes = 0] = output.dims;
    const probs = output.data as Float32Array;
    for (const [slot, index] of batch.entries()) {
      // Only the time steps over the line itself: the padding after it is not part of it.
      const own = Math.min(steps, Math.ceil((steps * crops[index]!.pixels.width) / width));
      results[index] = decodeLine(probs, slot * steps * classes, own, classes, sessions.dictionary);
    }
    output.dispose();
  });
  return results;
}

interface ReadLine {
  text: string;
  mean: number;
  region: Region;
}

/** Boxes whose midlines are within half the mean box height are one line, read left to right (as the library did). */
function mergeLines(lines: readonly ReadLine[]): RawLine[] {
  if (lines.length === 0) return [];
  const meanHeight = lines.reduce((sum, l) => sum + (l.region.y1 - l.region.y0), 0) / lines.length;
  const groups: ReadLine[][] = [];
  for (const line of lines) {
    const mid = (line.region.y0 + line.region.y1) / 2;
    const group = groups.find((g) => Math.abs((g[0]!.region.y0 + g[0]!.region.y1) / 2 - mid) < meanHeight / 2);
    if (group) group.push(line);
    else groups.push([line]);
  }
  for (const group of groups) group.sort((a, b) => a.region.x0 - b.region.x0);
  groups.sort((a, b) => a[0]!.region.y0 - b[0]!.region.y0);
  return groups.map((group) => {
    const first = group[0]!.region;
    const last = group[group.length - 1]!.region;
    const y0 = Math.min(...group.map((l) => l.region.y0));
    const y1 = Math.max(...group.map((l) => l.region.y1));
    return {
      text: group.map((l) => l.text).join(' '),
      mean: group.reduce((sum, l) => sum + l.mean, 0) / group.length,
      box: [
        [first.x0, y0],
        [last.x1, y0],
        [last.x1, y1],
        [first.x0, y1],
      ],
    };
  });
}

/**
 * Reads every picture: all detections, then all their lines. onnxruntime-node runs a session on the
 * JavaScript thread, so runs go one at a time; cutting lines out (sharp, on libuv's threads) overlaps.
 */
export async function readPictures(sessions: OcrSessions, sharp: SharpFactory, pictures: readonly RgbImage[]): Promise<RawLine[][]> {
  const parallel = 1;
  const regions = await detect(sessions, sharp, pictures, parallel);
  const found = regions.flatMap((list, picture) => list.map((region) => ({ picture, region })));
  const crops: LineCrop[] = await mapLimited(found, parallel * 2, async ({ picture, region }) => ({
    picture,
    region,
    pixels: await lineCrop(sharp, pictures[picture]!, region),
  }));
  const read = await recognise(sessions, crops, parallel);
  const perPicture: ReadLine[][] = pictures.map(() => []);
  for (const [i, crop] of crops.entries()) {
    const { text, mean } = read[i]!;
    if (mean >= MIN_CONFIDENCE) perPicture[crop.picture]!.push({ text, mean, region: crop.region });
  }
  return perPicture.map(mergeLines);
}
