/**
 * Presigned PUT URLs of the local blob store are bearer credentials that live for their whole expiry.
 * The plugin that issues them (buckets, for uploads) decides, at the moment the bytes arrive, whether
 * the key may still be written: only while its upload waits for its file. The storage route asks the
 * gate before it reads the body and again around the commit, so a URL does one thing, once.
 */
export interface PresignedPutGate {
  /** Throws a typed ApiError (409/410) unless `key` belongs to an upload that still accepts bytes. */
  admit(key: string): Promise<void>;
  /**
   * Runs `publish` (the step that makes the bytes visible under `key`) while holding the upload against a
   * concurrent confirm, after checking again that it still accepts bytes; throws like `admit` otherwise.
   */
  commit(key: string, publish: () => Promise<void>): Promise<void>;
}
