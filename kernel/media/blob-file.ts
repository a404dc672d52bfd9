/**
 * ffmpeg reads files (mp4 and mov keep their index at the end, so a pipe is not enough): media held in
 * the blob store is copied to a private temp folder first, and the folder is removed when done.
 */
import { createWriteStream } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import type { BlobStore } from '../blobs/blob-store.js';

export interface TempMediaFile {
  /** The copy's path (inside a folder of its own). */
  path: string;
  /** Removes the copy and its folder; safe to call more than once. */
  dispose(): Promise<void>;
}

/** File name extensions ffmpeg's format guessing likes, for types whose content alone is ambiguous. */
const EXTENSIONS: Record<string, string> = {
  'audio/mpeg': '.mp3',
  'audio/mp3': '.mp3',
  'audio/aac': '.aac',
  'audio/wav': '.wav',
  'audio/x-wav': '.wav',
  'audio/wave': '.wav',
  'audio/flac': '.flac',
  'audio/ogg': '.ogg',
  'audio/opus': '.opus',
  'audio/webm': '.webm',
  'audio/mp4': '.m4a',
  'video/mp4': '.mp4',
  'video/quicktime': '.mov',
  'video/webm': '.webm',
  'video/x-matroska': '.mkv',
  'video/x-msvideo': '.avi',
  'video/mpeg': '.mpg',
  'video/mp2t': '.ts',
  'video/ogg': '.ogv',
};

export function extensionFor(contentType: string | undefined): string {
  const base = contentType?.split(';')[0]?.trim().toLowerCase() ?? '';
  return EXTENSIONS[base] ?? '';
}

export interface CopyBlobOptions {
  /** Picks the temp file's extension (see EXTENSIONS). */
  contentType?: string;
  signal?: AbortSignal;
}

/** Copies the blob under `storageKey` to a temp file (streamed). NotFoundError from the store when it is missing. */
export async function copyBlobToTempFile(blobs: BlobStore, storageKey: string, options: CopyBlobOptions = {}): Promise<TempMediaFile> {
  const dir = await mkdtemp(path.join(tmpdir(), 'tessera-media-'));
  const file = path.join(dir, `input${extensionFor(options.contentType)}`);
  let disposed = false;
  const dispose = async (): Promise<void> => {
    if (disposed) return;
    disposed = true;
    await rm(dir, { recursive: true, force: true });
  };
  try {
    const { body } = await blobs.get(storageKey);
    await pipeline(body, createWriteStream(file, { flags: 'wx' }), options.signal ? { signal: options.signal } : {});
  } catch (err) {
    await dispose();
    throw err;
  }
  return { path: file, dispose };
}
