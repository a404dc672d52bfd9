/** A reply with already encoded values is written as the same JSON text JSON.stringify would give. */
import { describe, expect, it } from 'vitest';
import { EncodedJson, encodedChunks, hasEncodedValues, plainReply } from '../../../kernel/http/encoded-json.js';

const text = (body: Record<string, unknown>) => Buffer.concat(encodedChunks(body)).toString('utf8');

describe('EncodedJson replies', () => {
  it('writes the text JSON.stringify gives, wherever the encoded values are', () => {
    const ids = ['obj_1', 'obj_ü', 'obj_"quoted"'];
    const bodies: Array<Record<string, unknown>> = [
      { a: 1, ids: EncodedJson.of(ids), b: 'x' },
      { ids: EncodedJson.of(ids) },
      { ids: EncodedJson.of(ids), none: EncodedJson.of(null), skipped: undefined, fn: () => 1, nested: { deep: [1, { ü: '✓' }] } },
      { 'key "with" quotes': EncodedJson.of([]), last: null },
    ];
    for (const body of bodies) {
      expect(hasEncodedValues(body)).toBe(true);
      expect(text(body)).toBe(JSON.stringify(body));
      expect(JSON.parse(text(body))).toEqual(JSON.parse(JSON.stringify(plainReply(body))));
    }
  });

  it('stands for its value elsewhere: JSON.stringify, and the plain body validators see', () => {
    const body = { ids: EncodedJson.of(['a', 'b']), n: 2 };
    expect(JSON.stringify(body)).toBe('{"ids":["a","b"],"n":2}');
    expect(plainReply(body)).toEqual({ ids: ['a', 'b'], n: 2 });
    expect((plainReply(body) as { ids: unknown }).ids).not.toBeInstanceOf(EncodedJson);
    // Bodies without encoded values pass through untouched.
    for (const plain of [{ a: 1 }, [EncodedJson.of(1)], null, 'text']) {
      expect(hasEncodedValues(plain)).toBe(false);
      expect(plainReply(plain)).toBe(plain);
    }
  });
});
