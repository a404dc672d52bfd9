/**
 * Turns text_extractor's `text` input into a string of at most `maxChars` UTF-16 code units: an inline
 * string, a JSON value, or a blob reference read from the blob store. Large blobs are read with a byte
 * range so a huge upload never has to be held in memory whole.
 */
import { StringDecoder } from 'node:string_decoder';
import { InputError, NotFoundError } from '../../../kernel/errors.js';
import type { BlobRead, BlobStore } from '../../../kernel/blobs/blob-store.js';

/** How media inputs arrive (ExtractorInput.fields): a pointer into the blob store. */
export interface BlobReference {
  storage_key: string;
  content_type?: string;
  size_bytes?: number;
}

export interface ResolvedText {
  text: string;
  /** The input was longer than `maxChars` and was cut. */
  truncated: boolean;
}

export function isBlobReference(value: unknown): value is BlobReference {
  return (
    typeof value === 'object' &&
    value !== null &&
    !Array.isArray(value) &&
    typeof (value as { storage_key?: unknown }).storage_key === 'string' &&
    (value as { storage_key: string }).storage_key.length > 0
  );
}

/** Cuts `text` to at most `maxChars` code units without leaving half a surrogate pair. */
export function capText(text: string, maxChars: number): ResolvedText {
  if (text.length <= maxChars) return { text, truncated: false };
  let cut = maxChars;
  const last = text.charCodeAt(cut - 1);
  if (last >= 0xd800 && last <= 0xdbff) cut -= 1;
  return { text: text.slice(0, cut), truncated: true };
}

async function readBlobText(blobs: BlobStore, ref: BlobReference, maxChars: number): Promise<ResolvedText> {
  if (ref.size_bytes === 0) return { text: '', truncated: false };
  // A UTF-16 code unit takes at most 3 UTF-8 bytes (a 4-byte sequence is 2 units), so this many bytes
  // always hold maxChars units; the extra 3 cover a sequence cut at the end of the range. One ranged read
  // (clamped to the blob) serves small and large blobs alike, without asking for the size first.
  const byteCap = maxChars * 3 + 3;
  let read;
  try {
    read = await blobs.get(ref.storage_key, { start: 0, end: byteCap - 1 });
  } catch (err) {
    if (err instanceof NotFoundError) throw new NotFoundError(`text_extractor: blob '${ref.storage_key}' not found`, { storage_key: ref.storage_key });
    // An empty blob whose reference did not say so: nothing to read.
    if (err instanceof InputError && (await blobs.head(ref.storage_key))?.size === 0) return { text: '', truncated: false };
    throw err;
  }
  const ranged = read.info.size > byteCap;
  let text = read.bytes && !ranged ? read.bytes.toString('utf8') : await decodeText(read, ranged);
  if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
  const capped = capText(text, maxChars);
  return { text: capped.text, truncated: capped.truncated || ranged };
}

/**
 * The body as text. StringDecoder keeps an incomplete trailing sequence back instead of turning it into
 * U+FFFD; with a ranged read that sequence is simply the part we did not fetch.
 */
async function decodeText(read: BlobRead, ranged: boolean): Promise<string> {
  const decoder = new StringDecoder('utf8');
  const parts: string[] = [];
  if (read.bytes) parts.push(decoder.write(read.bytes));
  else {
    for await (const chunk of read.body as AsyncIterable<Buffer | string>) parts.push(typeof chunk === 'string' ? chunk : decoder.write(chunk));
  }
  if (!ranged) parts.push(decoder.end());
  return parts.join('');
}

/**
 * The text to chunk. Strings are used as they are, numbers and booleans as their string form, other JSON
 * values (from an application/json source) as compact JSON; a missing value is the caller's mistake.
 */
export async function resolveText(blobs: BlobStore, value: unknown, maxChars: number): Promise<ResolvedText> {
  if (value === undefined || value === null) {
    throw new InputError("text_extractor: the required input 'text' is missing (map a text field to it with input_mapping)", {
      input: 'text',
    });
  }
  if (typeof value === 'string') return capText(value, maxChars);
  if (typeof value === 'number' || typeof value === 'boolean') return capText(String(value), maxChars);
  if (isBlobReference(value)) return readBlobText(blobs, value, maxChars);
  if (typeof value === 'object') return capText(JSON.stringify(value), maxChars);
  throw new InputError(`text_extractor: input 'text' must be a string or a blob reference, got ${typeof value}`, { input: 'text' });
}
