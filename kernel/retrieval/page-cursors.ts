/**
 * The opaque cursors of `cursor` and `keyset` pagination (kernel/retrieval/pagination.ts). A cursor is
 * base64url JSON (kernel/http/cursor.ts) with an expiry and an HMAC over its content and its binding: the
 * organization, namespace, retriever (or ad hoc pipeline), principal and inputs it was issued for. A cursor
 * altered, expired, or used by another caller, retriever or with other inputs is a 400 saying so — never a
 * page of someone else's ranking.
 */
import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import type { Clock } from '../clock.js';
import { InputError } from '../errors.js';
import { cursorFields, decodeCursor, encodeCursor } from '../http/cursor.js';
import { valueKey } from './documents.js';
import { KEYSET_MEMORY, type KeysetPosition } from './pagination.js';

export interface CursorBinding {
  organizationId: string;
  namespaceId: string;
  /** The saved retriever's id, or `adhoc:<hash of the pipeline>`. */
  retriever: string;
  principalId: string | null;
  /** The execution's inputs, as the request gave them. */
  inputs: Record<string, unknown>;
}

export interface SnapshotPosition {
  executionId: string;
  offset: number;
  pageSize: number;
}

const SNAPSHOT = {
  m: cursorFields.literal('cursor'),
  x: cursorFields.id('exec'),
  o: cursorFields.integer(0),
  n: cursorFields.integer(1),
  e: cursorFields.integer(0),
  s: cursorFields.text(),
};

const KEYSET = {
  m: cursorFields.literal('keyset'),
  k: cursorFields.text(),
  n: cursorFields.integer(1),
  e: cursorFields.integer(0),
  s: cursorFields.text(),
};

/** A stable digest of any JSON value (object keys in any order). */
export function digestOf(value: unknown): string {
  return createHash('sha256').update(valueKey(value)).digest('base64url');
}

export class PageCursors {
  private readonly key: Buffer;

  constructor(
    secret: Buffer,
    private readonly clock: Clock,
    /** How long a cursor stays usable. */
    private readonly ttlSeconds = 3600,
  ) {
    // A key of its own, so a cursor signature can never stand in for another signed value (blob URLs).
    this.key = createHmac('sha256', secret).update('tessera retrieval page cursor v1').digest();
  }

  issueSnapshot(binding: CursorBinding, position: SnapshotPosition): string {
    const body = { m: 'cursor', x: position.executionId, o: position.offset, n: position.pageSize, e: this.expiry() };
    return encodeCursor({ ...body, s: this.sign(binding, body) });
  }

  readSnapshot(raw: string, binding: CursorBinding): SnapshotPosition {
    const { s, ...body } = decodeCursor(raw, SNAPSHOT);
    this.check(raw, binding, body, s);
    return { executionId: body.x, offset: body.o, pageSize: body.n };
  }

  issueKeyset(binding: CursorBinding, after: KeysetPosition, pageSize: number): string {
    const body = { m: 'keyset', k: JSON.stringify([after.ids.slice(-KEYSET_MEMORY), after.document_id, after.score, after.served]), n: pageSize, e: this.expiry() };
    return encodeCursor({ ...body, s: this.sign(binding, body) });
  }

  readKeyset(raw: string, binding: CursorBinding): { after: KeysetPosition; pageSize: number } {
    const { s, ...body } = decodeCursor(raw, KEYSET);
    this.check(raw, binding, body, s);
    // Signed by us, so well formed; checked anyway, as everything read from a request is.
    const parsed: unknown = JSON.parse(body.k);
    if (!Array.isArray(parsed) || parsed.length !== 4) throw this.refused(raw);
    const [ids, documentId, score, served] = parsed as unknown[];
    const isId = (v: unknown): v is string => typeof v === 'string' && v.length > 0 && v.length <= 200;
    if (
      !Array.isArray(ids) || ids.length > KEYSET_MEMORY || !ids.every(isId) || !isId(documentId) ||
      !(score === null || (typeof score === 'number' && Number.isFinite(score))) || !(typeof served === 'number' && Number.isSafeInteger(served) && served >= 0)
    ) {
      throw this.refused(raw);
    }
    return { after: { ids, document_id: documentId, score, served }, pageSize: body.n };
  }

  private expiry(): number {
    return Math.floor(this.clock.now().getTime() / 1000) + this.ttlSeconds;
  }

  private sign(binding: CursorBinding, body: object): string {
    const bound = [binding.organizationId, binding.namespaceId, binding.retriever, binding.principalId, digestOf(binding.inputs), body];
    return createHmac('sha256', this.key).update(valueKey(bound)).digest('base64url');
  }

  private check(raw: string, binding: CursorBinding, body: { e: number }, signature: string): void {
    const expected = Buffer.from(this.sign(binding, body));
    const given = Buffer.from(signature);
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) throw this.refused(raw);
    if (body.e * 1000 <= this.clock.now().getTime()) {
      throw new InputError('pagination.cursor has expired: request the first page again (without a cursor)', { cursor: raw.slice(0, 200) });
    }
  }

  private refused(raw: string): InputError {
    return new InputError(
      'pagination.cursor was not issued for this retriever, API key principal and inputs, or it was altered: ' +
        'send the cursor a previous page returned, with the same inputs, or request the first page without one',
      { cursor: raw.slice(0, 200) },
    );
  }
}
