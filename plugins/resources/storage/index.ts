/**
 * The targets of the local blob store's presigned URLs: PUT streams the request body to disk (hashing
 * it on the way), GET streams the file back with Range support. The signed token is the credential; a PUT
 * also needs the gate's yes (its upload still PENDING, its bucket still there), before and at commit.
 */
import { attachmentDisposition } from '../../../kernel/blobs/blob-store.js';
import { verifyBlobToken } from '../../../kernel/blobs/local.js';
import { GoneError, InputError, PayloadTooLargeError, RangeNotSatisfiableError } from '../../../kernel/errors.js';
import { defineResource } from '../../../kernel/plugins.js';
import { BlobSigningSecret, BlobStore, Clock, PresignedPutGate } from '../../../kernel/tokens.js';

/** `bytes=start-end` / `bytes=start-` / `bytes=-suffix` → an inclusive range, given the blob size. */
function parseRange(header: string, size: number): { start: number; end: number } | 'unsatisfiable' | undefined {
  const m = /^bytes=(\d*)-(\d*)$/.exec(header.trim());
  if (!m || (m[1] === '' && m[2] === '')) return undefined;
  let start: number;
  let end: number;
  if (m[1] === '') {
    start = Math.max(0, size - Number(m[2]));
    end = size - 1;
  } else {
    start = Number(m[1]);
    end = m[2] === '' ? size - 1 : Math.min(Number(m[2]), size - 1);
  }
  if (start >= size || start > end) return 'unsatisfiable';
  return { start, end };
}

export default defineResource({
  name: 'storage',
  handlers: {
    putPresignedBlob: async ({ params, req, services }) => {
      const grant = verifyBlobToken(params.token, services.get(BlobSigningSecret), services.get(Clock).now(), 'PUT');
      // A signed URL alone is not enough: the upload it was issued for must still be waiting for its file.
      const gate = services.tryGet(PresignedPutGate);
      if (!gate) throw new GoneError('No upload accepts files through this URL any more; request a new upload');
      await gate.admit(grant.key);
      const sent = req.get('content-type');
      if (grant.contentType && sent?.split(';')[0]?.trim().toLowerCase() !== grant.contentType.toLowerCase()) {
        throw new InputError(`This upload URL requires Content-Type: ${grant.contentType}`, { content_type: sent ?? null });
      }
      const declared = Number(req.get('content-length') ?? Number.NaN);
      if (grant.maxBytes !== undefined && declared > grant.maxBytes) {
        throw new PayloadTooLargeError(`This upload URL accepts at most ${grant.maxBytes} bytes; Content-Length is ${declared}`, {
          max_size_bytes: grant.maxBytes,
        });
      }
      const info = await services.get(BlobStore).put(grant.key, req, {
        ...(grant.contentType ?? sent ? { contentType: (grant.contentType ?? sent)! } : {}),
        ...(grant.maxBytes !== undefined ? { maxBytes: grant.maxBytes } : {}),
        commit: (publish) => gate.commit(grant.key, publish),
      });
      return { status: 200, body: { size_bytes: info.size, etag: info.md5, sha256: info.sha256 }, headers: { ETag: `"${info.md5}"` } };
    },

    getPresignedBlob: async ({ params, req, services }) => {
      const grant = verifyBlobToken(params.token, services.get(BlobSigningSecret), services.get(Clock).now(), 'GET');
      const blobs = services.get(BlobStore);
      const head = await blobs.head(grant.key);
      const rangeHeader = req.get('range');
      const range = head && rangeHeader ? parseRange(rangeHeader, head.size) : undefined;
      const headers: Record<string, string> = { 'Accept-Ranges': 'bytes' };
      if (grant.filename) headers['Content-Disposition'] = attachmentDisposition(grant.filename);
      if (range === 'unsatisfiable') throw new RangeNotSatisfiableError(`Range ${rangeHeader} is outside the blob of ${head!.size} bytes`, head!.size);
      const { info, body } = await blobs.get(grant.key, range);
      headers['Content-Type'] = info.contentType;
      headers.ETag = `"${info.md5}"`;
      if (range) {
        headers['Content-Range'] = `bytes ${range.start}-${range.end}/${info.size}`;
        headers['Content-Length'] = String(range.end - range.start + 1);
        return { status: 206, body: undefined, headers, stream: body };
      }
      headers['Content-Length'] = String(info.size);
      return { status: 200, body: undefined, headers, stream: body };
    },
  },
});
