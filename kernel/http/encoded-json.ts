/**
 * A reply value whose JSON is already encoded, for a large value read again and again unchanged (a
 * submitted batch's 10,000 object ids, polled every second): `sendJson` writes its bytes as they are,
 * beside the rest of the reply, instead of stringifying and encoding it again. Honoured at the top level
 * of a reply body; anywhere else, and for anything that serializes the body itself (res.json under response
 * validation), it stands for `value` (see `plainReply`).
 */
export class EncodedJson<T = unknown> {
  constructor(
    readonly value: T,
    /** UTF-8 of JSON.stringify(value). */
    readonly bytes: Buffer,
  ) {}

  static of<T>(value: T): EncodedJson<T> {
    return new EncodedJson(value, Buffer.from(JSON.stringify(value)));
  }

  toJSON(): T {
    return this.value;
  }
}

/** The body with its top-level EncodedJson values replaced by their values (what a validator must see). */
export function plainReply(body: unknown): unknown {
  if (!hasEncodedValues(body)) return body;
  return Object.fromEntries(Object.entries(body).map(([key, value]) => [key, value instanceof EncodedJson ? value.value : value]));
}

export function hasEncodedValues(body: unknown): body is Record<string, unknown> {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) return false;
  for (const value of Object.values(body)) if (value instanceof EncodedJson) return true;
  return false;
}

/**
 * The body's JSON as chunks to write in order: the encoded values' own bytes between the encoded rest. The
 * same text JSON.stringify(body) gives (keys in order, undefined values left out).
 */
export function encodedChunks(body: Record<string, unknown>): Buffer[] {
  const chunks: Buffer[] = [];
  let text = '{';
  let first = true;
  for (const [key, value] of Object.entries(body)) {
    const encoded = value instanceof EncodedJson ? undefined : (JSON.stringify(value) as string | undefined);
    if (!(value instanceof EncodedJson) && encoded === undefined) continue;
    text += `${first ? '' : ','}${JSON.stringify(key)}:`;
    first = false;
    if (value instanceof EncodedJson) {
      chunks.push(Buffer.from(text), value.bytes);
      text = '';
    } else text += encoded;
  }
  chunks.push(Buffer.from(`${text}}`));
  return chunks;
}
