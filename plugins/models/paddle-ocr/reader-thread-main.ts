/**
 * A reader thread's entry (./reader-threads.ts starts it): its own pair of onnxruntime sessions (./engine.ts),
 * reading the pictures it is sent. The sender has one picture under way per thread at a time.
 */
import { parentPort } from 'node:worker_threads';
import { openOcrEngine, type RawLine, type RgbImage } from './engine.js';
import type { SharpFactory } from './prepare.js';

export interface ReadRequest {
  picture: RgbImage;
}

export type ReaderMessage =
  | { ready: true }
  | { ready: false; error: { message: string; name: string } }
  | { ok: true; lines: RawLine[] }
  | { ok: false; error: { message: string; name: string } };

const port = parentPort!;

function describe(err: unknown): { message: string; name: string } {
  return err instanceof Error ? { message: err.message, name: err.name } : { message: String(err), name: 'Error' };
}

try {
  const sharp = (await import('sharp')).default as SharpFactory;
  const engine = await openOcrEngine(sharp);
  port.on('message', (request: ReadRequest) => {
    engine.read([request.picture]).then(
      ([lines]) => port.postMessage({ ok: true, lines: lines ?? [] } satisfies ReaderMessage),
      (err: unknown) => port.postMessage({ ok: false, error: describe(err) } satisfies ReaderMessage),
    );
  });
  port.postMessage({ ready: true } satisfies ReaderMessage);
} catch (err) {
  port.postMessage({ ready: false, error: describe(err) } satisfies ReaderMessage);
}
