/**
 * Reads pdf_extractor's `pdf` input into memory: a blob reference (read from the blob store) or base64
 * data. pdf.js parses from one buffer, so the document is read whole, up to MAX_PDF_BYTES.
 */
import { InputError, NotFoundError } from '../../../kernel/errors.js';
import { readBlobBytes, type BlobStore } from '../../../kernel/blobs/blob-store.js';

/** Larger blobs are refused rather than read into memory. */
export const MAX_PDF_BYTES = 512 * 1024 * 1024;

function storageKeyOf(value: unknown): string | undefined {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return undefined;
  const key = (value as { storage_key?: unknown }).storage_key;
  return typeof key === 'string' && key.length > 0 ? key : undefined;
}

async function readBlob(blobs: BlobStore, key: string): Promise<Buffer> {
  const info = await blobs.head(key);
  if (!info) throw new NotFoundError(`pdf_extractor: blob '${key}' not found`, { storage_key: key });
  if (info.size > MAX_PDF_BYTES) {
    throw new InputError(`pdf_extractor: the PDF is ${info.size} bytes, more than the ${MAX_PDF_BYTES} allowed`, { size_bytes: info.size });
  }
  if (info.size === 0) throw new InputError('pdf_extractor: the PDF is empty', { storage_key: key });
  return readBlobBytes(await blobs.get(key));
}

const DATA_URL = /^data:[^;,]*(?:;[^;,]*)*;base64,/i;
const BASE64 = /^[A-Za-z0-9+/_-]*={0,2}$/;

/** The PDF's bytes. InputError when the input is missing or of the wrong kind. */
export async function readPdfInput(blobs: BlobStore, value: unknown): Promise<Buffer> {
  if (value === undefined || value === null) {
    throw new InputError("pdf_extractor: the required input 'pdf' is missing (map a PDF field to it with input_mapping)", { input: 'pdf' });
  }
  const key = storageKeyOf(value);
  if (key) return readBlob(blobs, key);
  if (typeof value === 'string') {
    const payload = value.replace(DATA_URL, '').replace(/\s+/g, '');
    if (payload.length === 0 || !BASE64.test(payload)) {
      throw new InputError("pdf_extractor: input 'pdf' is a string but not base64 PDF data", { input: 'pdf' });
    }
    // Node's base64 decoder reads the URL-safe alphabet too.
    return Buffer.from(payload, 'base64');
  }
  throw new InputError(`pdf_extractor: input 'pdf' must be a blob reference or base64 data, got ${typeof value}`, { input: 'pdf' });
}
