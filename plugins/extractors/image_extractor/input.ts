/**
 * Reads image_extractor's `image` input into memory: a blob reference (read from the blob store) or a
 * base64 string (optionally a `data:` URL). Images are decoded whole by sharp anyway, so they are read
 * whole, up to MAX_IMAGE_BYTES.
 */
import { InputError, NotFoundError } from '../../../kernel/errors.js';
import { readBlobBytes, type BlobStore } from '../../../kernel/blobs/blob-store.js';

/** Larger blobs are refused rather than read into memory. */
export const MAX_IMAGE_BYTES = 256 * 1024 * 1024;

interface BlobPointer {
  storage_key: string;
}

function isBlobPointer(value: unknown): value is BlobPointer {
  return (
    typeof value === 'object' &&
    value !== null &&
    !Array.isArray(value) &&
    typeof (value as { storage_key?: unknown }).storage_key === 'string' &&
    (value as BlobPointer).storage_key.length > 0
  );
}

async function readBlob(blobs: BlobStore, key: string): Promise<Buffer> {
  const info = await blobs.head(key);
  if (!info) throw new NotFoundError(`image_extractor: blob '${key}' not found`, { storage_key: key });
  if (info.size > MAX_IMAGE_BYTES) {
    throw new InputError(`image_extractor: the image is ${info.size} bytes, more than the ${MAX_IMAGE_BYTES} allowed`, {
      size_bytes: info.size,
    });
  }
  if (info.size === 0) throw new InputError('image_extractor: the image is empty', { storage_key: key });
  return readBlobBytes(await blobs.get(key));
}

const DATA_URL = /^data:[^;,]*(?:;[^;,]*)*;base64,/i;
const BASE64 = /^[A-Za-z0-9+/_-]*={0,2}$/;

function decodeBase64(value: string): Buffer {
  const payload = value.replace(DATA_URL, '').replace(/\s+/g, '');
  if (payload.length === 0 || !BASE64.test(payload)) {
    throw new InputError("image_extractor: input 'image' is a string but not base64 image data", { input: 'image' });
  }
  // Node's base64 decoder reads the URL-safe alphabet too.
  return Buffer.from(payload, 'base64');
}

/** The image's bytes. InputError when the input is missing or of the wrong kind. */
export async function readImageInput(blobs: BlobStore, value: unknown): Promise<Buffer> {
  if (value === undefined || value === null) {
    throw new InputError("image_extractor: the required input 'image' is missing (map an image field to it with input_mapping)", {
      input: 'image',
    });
  }
  if (isBlobPointer(value)) return readBlob(blobs, value.storage_key);
  if (typeof value === 'string') {
    const bytes = decodeBase64(value);
    if (bytes.length > MAX_IMAGE_BYTES) throw new InputError('image_extractor: the image is too large', { size_bytes: bytes.length });
    return bytes;
  }
  throw new InputError(`image_extractor: input 'image' must be a blob reference or base64 data, got ${typeof value}`, { input: 'image' });
}
