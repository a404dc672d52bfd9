/** The embeddings decoder of the inference client reads every message as the generated decoder does. */
import { describe, expect, it } from 'vitest';
import { BinaryWriter, WireType } from '@bufbuild/protobuf/wire';
import { EmbedResponse } from '../../../generated/proto/tessera/inference/v1/inference.js';
import { decodeEmbedResponse } from '../../../kernel/inference/embed-response.js';

const same = (bytes: Uint8Array) => expect(decodeEmbedResponse(bytes)).toEqual(EmbedResponse.decode(bytes));

describe('decodeEmbedResponse', () => {
  it('reads what the generated encoder writes: vectors, extras, dims', () => {
    const vector = Array.from({ length: 384 }, (_, i) => Math.fround(Math.sin(i) * 3.5));
    for (const message of [
      { embeddings: [], dims: 0 },
      { embeddings: [{ vector, extrasJson: '' }], dims: 384 },
      { embeddings: [{ vector, extrasJson: '{"width":256,"colours":["#fff"]}' }, { vector: vector.slice(0, 3), extrasJson: 'ü ✓' }], dims: 384 },
      { embeddings: [{ vector: [], extrasJson: '{}' }, { vector: [Math.fround(1e-40), -0, Math.fround(3.4e38)], extrasJson: '' }], dims: 3 },
    ]) {
      const bytes = EmbedResponse.encode(message).finish();
      same(bytes);
      expect(decodeEmbedResponse(bytes)).toEqual(message);
    }
  });

  it('reads unpacked floats, a vector split over packed runs, and skips fields it does not know', () => {
    const embedding = new BinaryWriter();
    embedding.uint32((1 << 3) | WireType.Bit32).float(1.5); // one float, unpacked
    embedding.uint32((1 << 3) | WireType.LengthDelimited).fork().float(2.5).float(-3).join(); // a packed run
    embedding.uint32((7 << 3) | WireType.Varint).uint32(99); // unknown field
    embedding.uint32((2 << 3) | WireType.LengthDelimited).string('{"a":1}');
    embedding.uint32((1 << 3) | WireType.LengthDelimited).fork().float(4).join(); // another packed run
    const response = new BinaryWriter();
    response.uint32((1 << 3) | WireType.LengthDelimited).bytes(embedding.finish());
    response.uint32((9 << 3) | WireType.LengthDelimited).string('future field');
    response.uint32((2 << 3) | WireType.Varint).uint32(4);
    const bytes = response.finish();
    same(bytes);
    expect(decodeEmbedResponse(bytes)).toEqual({ embeddings: [{ vector: [1.5, 2.5, -3, 4], extrasJson: '{"a":1}' }], dims: 4 });
  });

  it('refuses a packed vector that is not whole floats', () => {
    const embedding = new BinaryWriter();
    embedding.uint32((1 << 3) | WireType.LengthDelimited).bytes(new Uint8Array(6));
    const response = new BinaryWriter();
    response.uint32((1 << 3) | WireType.LengthDelimited).bytes(embedding.finish());
    expect(() => decodeEmbedResponse(response.finish())).toThrow(/malformed embedding/);
  });
});
