/**
 * How much one instantiation copies at most. An instantiation is one request that must answer in seconds
 * (the contract says under 5): a larger source is refused up front with a 400 naming the limit, rather than
 * running for minutes. Measured here (2 busy cores, embedded database, 384-dim vectors): 10,000 documents
 * with one vector each took 6-9 s, most of it the vector engine indexing the copies; 5,000 take about half.
 */
import { InputError } from '../../../kernel/errors.js';

export interface CloneLimits {
  documents: number;
  buckets: number;
  collections: number;
  retrievers: number;
  /** Bytes of the stored files (thumbnails, keyframes, object blobs) documents refer to. */
  fileBytes: number;
}

export const DEFAULT_CLONE_LIMITS: CloneLimits = {
  documents: 5_000,
  buckets: 100,
  collections: 100,
  retrievers: 100,
  fileBytes: 256 * 1024 * 1024,
};

export type SourceSize = Omit<CloneLimits, 'fileBytes'>;

/** A 400 naming the first limit the source exceeds. */
export function checkSize(size: Partial<CloneLimits>, limits: CloneLimits, namespaceName: string): void {
  for (const limit of Object.keys(limits) as Array<keyof CloneLimits>) {
    const value = size[limit];
    if (value !== undefined && value > limits[limit]) {
      const what = limit === 'fileBytes' ? `${value} bytes of document files` : `${value} ${limit}`;
      throw new InputError(
        `Namespace '${namespaceName}' is too large to instantiate from a template: it holds ${what}, the limit is ${limits[limit]}`,
        { limit, value, max: limits[limit] },
      );
    }
  }
}
