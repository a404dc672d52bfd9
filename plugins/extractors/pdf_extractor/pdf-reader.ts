/**
 * Opens a PDF with pdf.js (the legacy build, for Node) whose parser runs on a worker thread of its own.
 * In Node, pdf.js otherwise parses on the calling thread ("fake worker"), and content streams, fonts and
 * image decoding are synchronous work that would stall the event loop the API and task runner share.
 * The thread also bounds what a hostile PDF can do: it has a heap limit, and it is ended after each document.
 */
import { createRequire } from 'node:module';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { MessageChannel, Worker } from 'node:worker_threads';
import type { PDFDocumentProxy } from 'pdfjs-dist/legacy/build/pdf.mjs';
import { InputError } from '../../../kernel/errors.js';

export type PdfJs = typeof import('pdfjs-dist/legacy/build/pdf.mjs');

/** Heap of the parser thread; a PDF that needs more fails instead of taking the process down. */
const PARSER_HEAP_MB = 1024;

const require = createRequire(import.meta.url);
const PDFJS_ROOT = path.dirname(require.resolve('pdfjs-dist/package.json'));
const asDirectory = (dir: string): string => path.join(PDFJS_ROOT, dir) + path.sep;

/**
 * Runs inside the thread (plain CommonJS, evaluated as is: no TypeScript loader there). It serves
 * pdf.js's worker protocol on the port it is given.
 */
const THREAD_SOURCE = `
const { workerData } = require('node:worker_threads');
import(workerData.workerUrl).then(({ WorkerMessageHandler }) => {
  workerData.port.start();
  WorkerMessageHandler.initializeFromPort(workerData.port);
});
`;

let pdfjsModule: Promise<PdfJs> | undefined;

function loadPdfJs(): Promise<PdfJs> {
  pdfjsModule ??= import('pdfjs-dist/legacy/build/pdf.mjs').catch((err: unknown) => {
    pdfjsModule = undefined;
    throw err;
  });
  return pdfjsModule;
}

export interface OpenPdf {
  pdfjs: PdfJs;
  document: PDFDocumentProxy;
  /** Settles like `work`, or rejects once the parser thread has died (pdf.js would otherwise wait forever). */
  guard<T>(work: Promise<T>): Promise<T>;
  /** Whether the parser thread died (then nothing more can be read). */
  readonly failed: boolean;
  close(): Promise<void>;
}

/** pdf.js reports these by exception name; all mean the bytes are not a PDF we can read. */
const UNREADABLE = new Set(['InvalidPDFException', 'FormatError', 'UnknownErrorException', 'MissingPDFException', 'ResponseException']);

function openError(err: unknown): Error {
  const name = err && typeof err === 'object' ? (err as { name?: unknown }).name : undefined;
  const message = err instanceof Error ? err.message : String(err);
  if (name === 'PasswordException') {
    return new InputError('pdf_extractor: the PDF is encrypted and needs a password', { reason: 'encrypted' });
  }
  if (typeof name === 'string' && UNREADABLE.has(name)) {
    return new InputError(`pdf_extractor: not a readable PDF: ${message}`, { reason: 'invalid' });
  }
  return err instanceof Error ? err : new Error(message);
}

export async function openPdf(bytes: Uint8Array): Promise<OpenPdf> {
  const pdfjs = await loadPdfJs();
  const { port1, port2 } = new MessageChannel();
  const thread = new Worker(THREAD_SOURCE, {
    eval: true,
    workerData: { workerUrl: pathToFileURL(path.join(PDFJS_ROOT, 'legacy/build/pdf.worker.mjs')).href, port: port2 },
    transferList: [port2],
    resourceLimits: { maxOldGenerationSizeMb: PARSER_HEAP_MB },
  });
  let closing = false;
  let failed = false;
  const died = new Promise<never>((_, reject) => {
    const fail = (error: Error) => {
      if (closing || failed) return;
      failed = true;
      reject(error);
    };
    thread.once('error', (err: Error & { code?: string }) => {
      // The same PDF would exhaust the heap again: that is the input's doing, not worth a retry.
      if (err.code === 'ERR_WORKER_OUT_OF_MEMORY') {
        fail(new InputError(`pdf_extractor: the PDF needs more than the ${PARSER_HEAP_MB} MB the parser may use`, { reason: 'too_complex' }));
      } else {
        fail(new Error(`pdf_extractor: the PDF parser thread failed: ${err.message}`, { cause: err }));
      }
    });
    thread.once('exit', (code) => fail(new Error(`pdf_extractor: the PDF parser thread stopped (exit code ${code})`)));
  });
  died.catch(() => undefined); // observed through guard(); never an unhandled rejection
  const guard = <T>(work: Promise<T>): Promise<T> => Promise.race([work, died]);

  port1.start();
  // pdf.js types `port` as a web Worker; a MessagePort speaks the same postMessage/addEventListener protocol.
  const worker = new pdfjs.PDFWorker({ port: port1 as unknown as null, verbosity: pdfjs.VerbosityLevel.ERRORS });
  const task = pdfjs.getDocument({
    // A copy: pdf.js transfers the buffer to the thread, which would detach the caller's bytes.
    data: new Uint8Array(bytes),
    worker,
    verbosity: pdfjs.VerbosityLevel.ERRORS,
    isEvalSupported: false,
    disableFontFace: true,
    useSystemFonts: false,
    isOffscreenCanvasSupported: false,
    isImageDecoderSupported: false,
    enableXfa: false,
    // Character maps and standard fonts ship with pdfjs-dist: text from CJK and base-14 fonts decodes offline.
    cMapUrl: asDirectory('cmaps'),
    cMapPacked: true,
    standardFontDataUrl: asDirectory('standard_fonts'),
    wasmUrl: asDirectory('wasm'),
  });

  const close = async (): Promise<void> => {
    closing = true;
    await task.destroy().catch(() => undefined);
    worker.destroy();
    port1.close();
    await thread.terminate();
  };

  let document: PDFDocumentProxy;
  try {
    document = await guard(task.promise);
  } catch (err) {
    await close();
    throw openError(err);
  }
  return {
    pdfjs,
    document,
    guard,
    get failed() {
      return failed;
    },
    close,
  };
}
