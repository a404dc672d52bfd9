/**
 * paddle-ocr's reader threads: the same lines as the engine on the calling thread, pictures of calls side
 * by side spread over the threads, large pictures kept to the first thread, a thread that dies failing
 * only the picture it held (and started again for the next), close(), and idle threads not keeping a
 * process alive.
 */
import { execFile } from 'node:child_process';
import { createRequire } from 'node:module';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openOcrEngine, type OcrEngine, type RgbImage } from '../../../plugins/models/paddle-ocr/engine.js';
import { prepareImage, type SharpFactory } from '../../../plugins/models/paddle-ocr/prepare.js';
import { LARGE_PICTURE_PIXELS, openReaderThreads, type ReaderThreads } from '../../../plugins/models/paddle-ocr/reader-threads.js';
import { squash, textPng } from '../../support/media/images.js';

const factory = sharp as unknown as SharpFactory;
const picture = async (lines: string[], width = 900): Promise<RgbImage> => (await prepareImage(factory, await textPng(lines, { width }))).rgb;

/** The message a read failed with ('read' when it did not fail), observed from the start. */
const failure = (read: Promise<unknown>): Promise<string> => read.then(() => 'read', (err: Error) => err.message);

const small = [await picture(['TESSERA 2026']), await picture(['OPEN SEARCH']), await picture(['HELLO WORLD', 'RIVER STONE'])];
const large = await picture(['LARGE PAGE', 'SECOND LINE', 'THIRD LINE', 'FOURTH LINE'], 1200);

describe('paddle-ocr reader threads', () => {
  let readers: ReaderThreads;
  let here: OcrEngine;

  beforeAll(async () => {
    readers = await openReaderThreads(2);
    here = await openOcrEngine(factory);
  });

  afterAll(async () => {
    await readers.close();
  });

  it('reads what the engine reads on the calling thread, for pictures side by side', async () => {
    expect(large.width * large.height).toBeGreaterThan(LARGE_PICTURE_PIXELS);
    const pictures = [...small, large, ...small];
    const [threaded, local] = await Promise.all([Promise.all(pictures.map((p) => readers.read(p))), here.read(pictures)]);
    expect(threaded).toEqual(local);
    expect(squash(threaded[0]!.map((line) => line.text).join(''))).toBe('TESSERA2026');
    expect(squash(threaded[3]!.map((line) => line.text).join(''))).toBe('LARGEPAGESECONDLINETHIRDLINEFOURTHLINE');
  });

  it('fails only the picture a dying thread held, and starts the thread again for the next', async () => {
    const reads = [readers.read(small[0]!), readers.read(small[1]!)].map(failure);
    // Both threads are busy now (one picture each): end both before they can answer.
    expect(readers.workers.every((worker) => worker !== undefined)).toBe(true);
    await Promise.all(readers.workers.map((worker) => worker?.terminate()));
    for (const message of await Promise.all(reads)) expect(message).toMatch(/reader thread stopped/);
    const again = await Promise.all(small.map((p) => readers.read(p)));
    expect(squash(again[1]!.map((line) => line.text).join(''))).toBe('OPENSEARCH');
  });

  it('keeps large pictures to the first thread', async () => {
    const reads = [readers.read(large), readers.read(large)];
    // Had the second large picture gone to the second thread, ending that thread would fail it.
    await readers.workers[1]?.terminate();
    const lines = await Promise.all(reads);
    for (const read of lines) expect(read).toHaveLength(4);
  });

  it('fails what is queued when closed, and every read after', async () => {
    const pool = await openReaderThreads(1);
    const reads = [pool.read(small[0]!), pool.read(small[1]!), pool.read(small[2]!)].map(failure);
    await pool.close();
    for (const message of await Promise.all(reads)) expect(message).toMatch(/closed|stopped/);
    await expect(pool.read(small[0]!)).rejects.toThrow(/closed/);
  });

  it('does not keep a process alive once its pictures are read', async () => {
    const threads = pathToFileURL(fileURLToPath(new URL('../../../plugins/models/paddle-ocr/reader-threads.ts', import.meta.url))).href;
    const tsx = pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href;
    const script = `
      const { openReaderThreads } = await import(${JSON.stringify(threads)});
      const readers = await openReaderThreads(2);
      const lines = await readers.read({ data: new Uint8Array(64 * 64 * 3).fill(255), width: 64, height: 64 });
      console.log('read', lines.length);`;
    const { stdout } = await promisify(execFile)(process.execPath, ['--import', tsx, '--input-type=module', '-e', script], { timeout: 60_000 });
    expect(stdout.trim()).toBe('read 0');
  }, 90_000);
});
