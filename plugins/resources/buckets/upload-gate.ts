/**
 * The buckets plugin's answer to "may this presigned PUT still write?": only while the upload the URL
 * was issued for is PENDING and unexpired (its row goes with its bucket, so a deleted bucket's URL finds
 * none). The commit runs under a row lock on the upload, and confirm moves the upload out of PENDING with
 * an UPDATE on the same row, so a confirm waits for a PUT that is committing and then reads its bytes;
 * a PUT that commits after a confirm started is refused and leaves the confirmed bytes alone.
 */
import type { Knex } from 'knex';
import type { PresignedPutGate } from '../../../kernel/blobs/put-gate.js';
import type { Clock } from '../../../kernel/clock.js';
import { ConflictError, GoneError } from '../../../kernel/errors.js';
import type { UploadRow } from './upload-store.js';

type GateRow = Pick<UploadRow, 'upload_id' | 'status' | 'expires_at' | 'object_id'>;

export class UploadPutGate implements PresignedPutGate {
  constructor(
    private readonly db: Knex,
    private readonly clock: Clock,
  ) {}

  async admit(key: string): Promise<void> {
    this.refuseUnlessAccepting(await this.find(this.db, key, false));
  }

  async commit(key: string, publish: () => Promise<void>): Promise<void> {
    await this.db.transaction(async (trx) => {
      this.refuseUnlessAccepting(await this.find(trx, key, true));
      await publish();
    });
  }

  private find(db: Knex, key: string, lock: boolean): Promise<GateRow | undefined> {
    const query = db<UploadRow>('uploads').where({ storage_key: key }).first('upload_id', 'status', 'expires_at', 'object_id');
    return (lock ? query.forUpdate() : query) as Promise<GateRow | undefined>;
  }

  private refuseUnlessAccepting(upload: GateRow | undefined): void {
    if (!upload) {
      throw new GoneError('The upload this URL was issued for no longer exists (it or its bucket was deleted); request a new upload', {
        reason: 'deleted',
      });
    }
    const details = { upload_id: upload.upload_id, status: upload.status };
    if (upload.status === 'PROCESSING' || upload.status === 'COMPLETED') {
      throw new ConflictError(
        `Upload '${upload.upload_id}' is already ${upload.status === 'COMPLETED' ? 'confirmed' : 'being confirmed'}: its URL accepts no more bytes ` +
          'and a confirmed object never changes through it. To store a new file, request a new upload.',
        { ...details, reason: 'confirmed', ...(upload.object_id ? { object_id: upload.object_id } : {}) },
      );
    }
    if (upload.status !== 'PENDING') {
      throw new GoneError(`Upload '${upload.upload_id}' is ${upload.status}; its URL accepts no more bytes. Request a new upload.`, {
        ...details,
        reason: upload.status === 'CANCELED' ? 'expired' : 'failed',
      });
    }
    if (upload.expires_at.getTime() <= this.clock.now().getTime()) {
      throw new GoneError(`Upload '${upload.upload_id}' expired at ${upload.expires_at.toISOString()}; request a new upload`, {
        ...details,
        reason: 'expired',
      });
    }
  }
}
