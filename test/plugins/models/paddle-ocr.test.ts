/**
 * paddle-ocr: the model contract's checks that apply to an `ocr` model (see the note below), then reading
 * text the test draws itself: words, line order, box positions in source pixels (also for a picture
 * scaled down before detection), EXIF orientation, transparency, empty pictures, undecodable bytes, and
 * the same through a real inference worker and client.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InputError } from '../../../kernel/errors.js';
import { InferenceClient } from '../../../kernel/inference/client.js';
import { startInferenceWorker, type InferenceWorker } from '../../../kernel/inference/worker.js';
import { PluginRegistry } from '../../../kernel/plugins.js';
import model, { MAX_SIDE, createPaddleOcrModel, toOcrResult, type OcrResult } from '../../../plugins/models/paddle-ocr/index.js';
import { solidImage, squash, textImage, textPng } from '../../support/media/images.js';
import { silentLogger } from '../../support/logs.js';
import { runModelContract } from '../../support/model-contract.js';

const log = silentLogger();

// Made at import (top-level await) so every block can use them: text PNGs, a JPEG, a transparent PNG,
// an empty picture and a 1×1 one.
const samples = {
  tessera: await textPng(['TESSERA 2026']),
  twoLines: await textPng(['HELLO WORLD', 'TESSERA 2026'], { width: 1000 }),
  jpeg: await textImage(['OPEN SEARCH'], { background: '#f4f4dc', colour: '#202060' }).jpeg({ quality: 85 }).toBuffer(),
  transparent: await textImage(['GLASS DOOR'], { background: 'none' }).png().toBuffer(),
  blank: await solidImage(320, 200, '#ffffff').png().toBuffer(),
  dot: await solidImage(1, 1, '#808080').png().toBuffer(),
};
const sampleInputs: Uint8Array[] = Object.values(samples);

function expectOcrShape(result: OcrResult, width: number, height: number): void {
  expect(typeof result.text).toBe('string');
  expect(Array.isArray(result.boxes)).toBe(true);
  expect(result.text).toBe(result.boxes.map((b) => b.text).join('\n'));
  for (const box of result.boxes) {
    expect(box.text.length).toBeGreaterThan(0);
    for (const n of [box.confidence, box.x, box.y, box.width, box.height]) expect(Number.isFinite(n)).toBe(true);
    expect(box.confidence).toBeGreaterThanOrEqual(0);
    expect(box.confidence).toBeLessThanOrEqual(1);
    expect(box.x).toBeGreaterThanOrEqual(0);
    expect(box.y).toBeGreaterThanOrEqual(0);
    expect(box.x + box.width).toBeLessThanOrEqual(width);
    expect(box.y + box.height).toBeLessThanOrEqual(height);
  }
}

runModelContract(model, { sampleInputs, create: createPaddleOcrModel });

describe('paddle-ocr and the process', () => {
  it('leaves process error handlers alone (loading the model adds none)', async () => {
    const handlers = [process.listenerCount('uncaughtException'), process.listenerCount('unhandledRejection')];
    await model.load();
    await Promise.all([model.load(), model.load()]);
    expect([process.listenerCount('uncaughtException'), process.listenerCount('unhandledRejection')]).toEqual(handlers);
  });
});

describe('paddle-ocr reads drawn text', () => {
  beforeAll(async () => {
    await model.load();
  });

  it('reads a line of large text (ignoring case and spacing)', async () => {
    const [result] = await model.infer([samples.tessera]);
    expect(squash(result!.text)).toContain('TESSERA2026');
    expectOcrShape(result!, 900, 200);
    expect(result!.boxes).toHaveLength(1);
    expect(result!.boxes[0]!.confidence).toBeGreaterThan(0.8);
  });

  it('gives lines top to bottom, each with a box around where it was drawn', async () => {
    const [result] = await model.infer([samples.twoLines]);
    expectOcrShape(result!, 1000, 270);
    expect(result!.boxes).toHaveLength(2);
    const [first, second] = result!.boxes;
    expect(squash(first!.text)).toBe('HELLOWORLD');
    expect(squash(second!.text)).toBe('TESSERA2026');
    expect(result!.text.split('\n')).toHaveLength(2);
    // Drawn with baselines at y = 112 and 227 (72 px bold DejaVu), starting at x = 40.
    expect(first!.y + first!.height).toBeLessThanOrEqual(second!.y + 10);
    expect(first!.y).toBeGreaterThan(20);
    expect(first!.y).toBeLessThan(112);
    expect(second!.y).toBeGreaterThan(112);
    expect(Math.abs(first!.x - 40)).toBeLessThan(25);
  });

  it('reads coloured text from a JPEG and dark text on a transparent background', async () => {
    const [jpeg, transparent] = await model.infer([samples.jpeg, samples.transparent]);
    expect(squash(jpeg!.text)).toContain('OPENSEARCH');
    expect(squash(transparent!.text)).toContain('GLASSDOOR');
  });

  it('returns empty text and no boxes for a picture without text, and for a single pixel', async () => {
    expect(await model.infer([samples.blank, samples.dot])).toEqual([
      { text: '', boxes: [] },
      { text: '', boxes: [] },
    ]);
  });

  it('scales pictures larger than MAX_SIDE down for detection but reports boxes in source pixels', async () => {
    const width = MAX_SIDE * 2;
    const big = await textImage(['FAR RIGHT'], { width, height: 600, fontSize: 160, x: width - 1200, y: 200 }).png().toBuffer();
    const [result] = await model.infer([big]);
    expect(squash(result!.text)).toContain('FARRIGHT');
    expectOcrShape(result!, width, 600);
    const box = result!.boxes[0]!;
    expect(Math.abs(box.x - (width - 1200))).toBeLessThan(60);
    expect(box.width).toBeGreaterThan(500);
  });

  it('applies EXIF orientation before reading', async () => {
    // Stored rotated by 90° with an EXIF tag (6) saying to turn it back: upright once oriented.
    const rotated = await textImage(['UPRIGHT']).rotate(-90).withMetadata({ orientation: 6 }).jpeg({ quality: 92 }).toBuffer();
    const [result] = await model.infer([rotated]);
    expect(squash(result!.text)).toContain('UPRIGHT');
    expectOcrShape(result!, 900, 200);
  });

  it('rejects bytes that are not an image with an InputError naming the index', async () => {
    await expect(model.infer([samples.tessera, Buffer.from('definitely not an image')])).rejects.toSatisfy(
      (err: unknown) => err instanceof InputError && /image 1/.test(err.message),
    );
  });

  it('toOcrResult scales boxes to source pixels, clamps them and drops empty lines', () => {
    const result = toOcrResult(
      [
        { text: '  two   words ', mean: 0.91234, box: [[10, 5], [60, 5], [60, 25], [10, 25]] },
        { text: ' ', mean: 0.9, box: [[0, 0], [1, 0], [1, 1], [0, 1]] },
        { text: 'edge', mean: 1.2, box: [[90, 40], [130, 40], [130, 60], [90, 60]] },
      ],
      2,
      240,
      100,
    );
    expect(result).toEqual({
      text: 'two words\nedge',
      boxes: [
        { text: 'two words', confidence: 0.9123, x: 20, y: 10, width: 100, height: 40 },
        { text: 'edge', confidence: 1, x: 180, y: 80, width: 60, height: 20 },
      ],
    });
  });
});

describe('paddle-ocr reads the pictures of a call in one pass', () => {
  it('gives the same text, boxes and confidences for pictures read together as read one by one', async () => {
    // Several of one size (they share the detection step) and one of another.
    const words = ['RIVER 12', 'CEDAR LAMP', 'NORTH 48', 'GLACIER', 'ORBIT 7'];
    const pictures = [
      ...(await Promise.all(words.map((w) => textImage([w], { width: 640, height: 200, fontSize: 64 }).jpeg({ quality: 90 }).toBuffer()))),
      await textPng(['HELLO WORLD', 'TESSERA 2026'], { width: 1000 }),
    ];
    const together = await model.infer(pictures);
    const oneByOne = [];
    for (const picture of pictures) oneByOne.push((await model.infer([picture]))[0]);
    expect(together).toEqual(oneByOne);
    expect(together.slice(0, words.length).map((r) => squash(r.text))).toEqual(words.map(squash));
    expect(squash(together[words.length]!.text)).toBe('HELLOWORLDTESSERA2026');
  });
});

describe('paddle-ocr behind a real inference worker', () => {
  let worker: InferenceWorker;
  let client: InferenceClient;

  beforeAll(async () => {
    worker = await startInferenceWorker({ models: [createPaddleOcrModel()], address: '127.0.0.1:0', log });
    client = new InferenceClient({ addresses: [worker.address], log, timeoutMs: 60_000 });
  });

  afterAll(async () => {
    client?.close();
    await worker?.stop(0);
  });

  it('answers InferenceClient.ocr with text and boxes, and maps a bad image to InputError', async () => {
    const [drawn, blank] = await client.ocr('paddle-ocr', [samples.twoLines, samples.blank]);
    expect(squash(drawn!.text)).toBe('HELLOWORLDTESSERA2026');
    expect(drawn!.boxes).toHaveLength(2);
    expect(blank).toEqual({ text: '', boxes: [] });
    await expect(client.ocr('paddle-ocr', [Buffer.from('nope')])).rejects.toBeInstanceOf(InputError);
  });
});
