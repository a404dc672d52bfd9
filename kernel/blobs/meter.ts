/** Counts and hashes bytes as they stream past, and stops the stream once it grows past a limit. */
import { createHash, type Hash } from 'node:crypto';
import { Readable, Transform, type TransformCallback } from 'node:stream';
import { PayloadTooLargeError } from '../errors.js';

export interface Digests {
  size: number;
  md5: string;
  sha256: string;
}

export class BlobMeter extends Transform {
  private bytes = 0;
  private readonly md5: Hash = createHash('md5');
  private readonly sha256: Hash = createHash('sha256');
  private result: Digests | undefined;

  constructor(private readonly maxBytes?: number) {
    super();
  }

  override _transform(chunk: Buffer | string, _encoding: BufferEncoding, callback: TransformCallback): void {
    const buf = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
    this.bytes += buf.length;
    // Checked per chunk, so at most one chunk past the limit is ever read before the writer gives up.
    if (this.maxBytes !== undefined && this.bytes > this.maxBytes) {
      callback(new PayloadTooLargeError(`Blob exceeds the limit of ${this.maxBytes} bytes`, { max_bytes: this.maxBytes }));
      return;
    }
    this.md5.update(buf);
    this.sha256.update(buf);
    callback(null, buf);
  }

  /** Valid once the stream has ended. */
  digests(): Digests {
    this.result ??= { size: this.bytes, md5: this.md5.digest('hex'), sha256: this.sha256.digest('hex') };
    return this.result;
  }
}

export function checkBufferSize(body: Buffer, maxBytes: number | undefined): void {
  if (maxBytes !== undefined && body.length > maxBytes) {
    throw new PayloadTooLargeError(`Blob exceeds the limit of ${maxBytes} bytes`, { max_bytes: maxBytes });
  }
}

export function digestBuffer(body: Buffer): Digests {
  return {
    size: body.length,
    md5: createHash('md5').update(body).digest('hex'),
    sha256: createHash('sha256').update(body).digest('hex'),
  };
}

/** A Buffer or any readable stream as a Node Readable, without copying the Buffer. */
export function toReadable(body: NodeJS.ReadableStream | Buffer): Readable {
  if (Buffer.isBuffer(body)) return Readable.from([body]);
  return body instanceof Readable ? body : Readable.from(body);
}
