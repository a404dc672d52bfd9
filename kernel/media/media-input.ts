/**
 * How a media extractor gets at its input: the input field must be a blob reference
 * (`{ storage_key, content_type, size_bytes }`); the blob is copied to a temp file ffmpeg can read.
 */
import type { BlobStore } from '../blobs/blob-store.js';
import { InputError } from '../errors.js';
import type { BlobReference } from '../plugins.js';
import { copyBlobToTempFile, type TempMediaFile } from './blob-file.js';

export function isBlobReference(value: unknown): value is Pick<BlobReference, 'storage_key'> & Partial<BlobReference> {
  return (
    typeof value === 'object' &&
    value !== null &&
    !Array.isArray(value) &&
    typeof (value as { storage_key?: unknown }).storage_key === 'string' &&
    (value as { storage_key: string }).storage_key.length > 0
  );
}

export interface MediaInputOptions {
  /** The extractor's name, for messages. */
  extractor: string;
  /** The input's name (e.g. `audio`), for messages. */
  input: string;
  signal?: AbortSignal;
}

/**
 * Validates `value` as a blob reference and copies the blob to a temp file; the caller must `dispose()`
 * it (in a `finally`). InputError when the input is missing or not a blob reference.
 */
export async function openMediaInput(blobs: BlobStore, value: unknown, options: MediaInputOptions): Promise<TempMediaFile> {
  const { extractor, input } = options;
  if (value === undefined || value === null) {
    throw new InputError(`${extractor}: the required input '${input}' is missing (map a media field to it with input_mapping)`, { input });
  }
  if (!isBlobReference(value)) {
    throw new InputError(`${extractor}: input '${input}' must be a blob reference ({ storage_key, content_type, size_bytes })`, { input });
  }
  return copyBlobToTempFile(blobs, value.storage_key, {
    ...(typeof value.content_type === 'string' ? { contentType: value.content_type } : {}),
    ...(options.signal ? { signal: options.signal } : {}),
  });
}
