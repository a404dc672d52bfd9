/**
 * `query.content`: an image or an audio clip to search with, as base64 (a `data:` URL is fine) or an
 * http(s) URL, embedded by the feature's own model (`embed_image` / `embed_audio`) in the inference
 * workers, like a text query. URLs are fetched with the kernel's SSRF-safe fetcher (public addresses only
 * unless the server allows private ones, a size cap, a deadline). The bytes decide the media type, never a
 * declared one. Audio is decoded with ffmpeg to mono 16 kHz (the rate the audio extractor embeds at), at
 * most MAX_AUDIO_SECONDS of it. Every problem is an InputError naming the search, so the execution fails
 * with a readable error, as a text query on a feature that does not embed text does.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileTypeFromBuffer } from 'file-type';
import { ApiError, InputError } from '../../../kernel/errors.js';
import type { InferenceClient } from '../../../kernel/inference/client.js';
import { decodeAudio } from '../../../kernel/media/audio.js';
import { safeFetch } from '../../../kernel/net/safe-fetch.js';
import type { StageContext } from '../../../kernel/plugins.js';
import type { RetrievalFeature } from '../../../kernel/retrieval/documents.js';
import { Config, resolve } from '../../../kernel/tokens.js';

/** Largest content accepted, inline or fetched (bytes). */
export const MAX_CONTENT_BYTES = 10 * 1024 * 1024;
/** Base64 characters of MAX_CONTENT_BYTES (4 per 3 bytes), plus room for a data: prefix and line breaks. */
export const MAX_CONTENT_CHARS = Math.ceil(MAX_CONTENT_BYTES / 3) * 4 + 1024;
/** A search waits at most this long for a URL (or the server's own URL timeout, when shorter). */
export const CONTENT_FETCH_TIMEOUT_MS = 10_000;
export const AUDIO_SAMPLE_RATE = 16_000;
export const MAX_AUDIO_SECONDS = 30;

const BASE64 = /^[A-Za-z0-9+/_-]*={0,2}$/;

export interface QueryMedia {
  bytes: Buffer;
  mime: string;
}

/** The bytes of a base64 string or data: URL; InputError when it is not base64. */
export function decodeBase64(content: string, where: string): Buffer {
  let data = content;
  const dataUrl = /^data:([^,;]*)(;[^,]*)?,/i.exec(content);
  if (dataUrl) {
    if (!/;base64/i.test(dataUrl[2] ?? '')) throw new InputError(`${where}: a data: URL must be base64 (data:<type>;base64,...)`);
    data = content.slice(dataUrl[0].length);
  }
  const compact = data.replace(/\s+/g, '');
  if (compact.length === 0 || !BASE64.test(compact) || compact.length % 4 === 1) {
    throw new InputError(`${where}: content is neither an http(s) URL nor valid base64`);
  }
  const bytes = Buffer.from(compact.replace(/-/g, '+').replace(/_/g, '/'), 'base64');
  if (bytes.length > MAX_CONTENT_BYTES) throw new InputError(`${where}: content is larger than ${MAX_CONTENT_BYTES} bytes`);
  return bytes;
}

async function fetchContent(ctx: StageContext, url: string, where: string): Promise<Buffer> {
  const config = resolve(ctx.container, Config);
  try {
    const fetched = await safeFetch(url, {
      allowPrivate: config.allowPrivateUrlFetch,
      timeoutMs: Math.min(CONTENT_FETCH_TIMEOUT_MS, config.urlFetchTimeoutMs),
      maxBytes: MAX_CONTENT_BYTES,
    });
    const chunks: Buffer[] = [];
    for await (const chunk of fetched.body) chunks.push(Buffer.from(chunk as Buffer));
    return Buffer.concat(chunks);
  } catch (err) {
    // The fetcher's errors are typed and readable (private address, HTTP status, size, time): say which search.
    if (err instanceof ApiError) throw new InputError(`${where}: ${err.message}`, err.details);
    throw new InputError(`${where}: fetching ${url} failed: ${(err as Error).message}`);
  }
}

/** The query's bytes and their sniffed media type. */
export async function readQueryContent(ctx: StageContext, content: string, where: string): Promise<QueryMedia> {
  const bytes = /^https?:\/\//i.test(content) ? await fetchContent(ctx, content, where) : decodeBase64(content, where);
  if (bytes.length === 0) throw new InputError(`${where}: content is empty`);
  const detected = await fileTypeFromBuffer(bytes);
  return { bytes, mime: detected?.mime ?? 'application/octet-stream' };
}

function kindOf(mime: string): 'image' | 'audio' | undefined {
  if (mime.startsWith('image/')) return 'image';
  // A video's sound track is audio to an audio feature.
  if (mime.startsWith('audio/') || mime.startsWith('video/') || mime === 'application/ogg') return 'audio';
  return undefined;
}

async function decodeClip(bytes: Buffer, where: string): Promise<Float32Array> {
  const dir = await mkdtemp(path.join(tmpdir(), 'tessera-query-audio-'));
  try {
    const file = path.join(dir, 'query');
    await writeFile(file, bytes);
    const samples = await decodeAudio(file, {
      sampleRate: AUDIO_SAMPLE_RATE,
      durationSeconds: MAX_AUDIO_SECONDS,
      // A second of slack: the resampler may give a few samples past the cut.
      maxSamples: AUDIO_SAMPLE_RATE * (MAX_AUDIO_SECONDS + 1),
      timeoutMs: 30_000,
    });
    if (samples.length === 0) throw new InputError(`${where}: the audio content has no samples`);
    return samples;
  } catch (err) {
    if (err instanceof InputError) throw err;
    throw new InputError(`${where}: the audio content cannot be decoded: ${(err as Error).message.split('\n')[0]}`);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/**
 * The vector of `media` by the feature's model. The feature must embed images or audio, and the content
 * must be of that kind.
 */
export async function embedQueryContent(inference: InferenceClient, feature: RetrievalFeature, media: QueryMedia, where: string): Promise<number[]> {
  const kind = kindOf(media.mime);
  const wanted = feature.task === 'embed_image' ? 'image' : feature.task === 'embed_audio' ? 'audio' : feature.task === null ? kind : undefined;
  if (wanted === undefined) {
    throw new InputError(
      `${where}: feature '${feature.feature_uri}' is computed by '${feature.model}' (${feature.task ?? 'unknown task'}), which embeds neither images nor audio; search it with query.text or query.vector`,
    );
  }
  if (kind !== wanted) {
    throw new InputError(`${where}: content is ${media.mime}, but feature '${feature.feature_uri}' embeds ${wanted}`, { media_type: media.mime });
  }
  if (wanted === 'image') {
    const [result] = await inference.embedImage(feature.model, [media.bytes]);
    if (!result) throw new InputError(`model '${feature.model}' returned no vector`);
    return result.vector;
  }
  const samples = await decodeClip(media.bytes, where);
  const [result] = await inference.embedAudio(feature.model, [{ samples, sampleRate: AUDIO_SAMPLE_RATE }]);
  if (!result) throw new InputError(`model '${feature.model}' returned no vector`);
  return result.vector;
}
