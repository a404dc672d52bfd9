/**
 * EmbedResponse.decode for the hot path of batches: each packed vector is read into an array of its final
 * length at once. The generated decoder pushes float by float, regrowing the array as it goes: ~11.6 KB of
 * garbage per 384-d vector, 15 % of everything a batch of short texts allocated. Same result as the
 * generated decoder for every well-formed message (test/kernel/inference/embed-response.test.ts).
 */
import { BinaryReader, WireType } from '@bufbuild/protobuf/wire';
import type { EmbedResponse, Embedding } from '../../generated/proto/tessera/inference/v1/inference.js';

/** Field tags (field number << 3 | wire type) of the messages read here. */
const EMBEDDINGS = (1 << 3) | WireType.LengthDelimited;
const DIMS = (2 << 3) | WireType.Varint;
const VECTOR_PACKED = (1 << 3) | WireType.LengthDelimited;
const VECTOR_ONE = (1 << 3) | WireType.Bit32;
const EXTRAS_JSON = (2 << 3) | WireType.LengthDelimited;

export function decodeEmbedResponse(bytes: Uint8Array): EmbedResponse {
  const reader = new BinaryReader(bytes);
  const response: EmbedResponse = { embeddings: [], dims: 0 };
  while (reader.pos < reader.len) {
    const tag = reader.uint32();
    if (tag === EMBEDDINGS) response.embeddings.push(decodeEmbedding(new BinaryReader(reader.bytes())));
    else if (tag === DIMS) response.dims = reader.uint32();
    else reader.skip((tag & 7) as WireType, tag >>> 3);
  }
  return response;
}

function decodeEmbedding(reader: BinaryReader): Embedding {
  const embedding: Embedding = { vector: [], extrasJson: '' };
  while (reader.pos < reader.len) {
    const tag = reader.uint32();
    if (tag === VECTOR_PACKED) {
      const packed = reader.bytes();
      if (packed.byteLength % 4 !== 0) throw new Error(`malformed embedding: ${packed.byteLength} bytes of packed floats`);
      const view = new DataView(packed.buffer, packed.byteOffset, packed.byteLength);
      const values = new Array<number>(packed.byteLength / 4);
      for (let i = 0; i < values.length; i++) values[i] = view.getFloat32(4 * i, true);
      // A vector split over several packed runs (legal protobuf) is their concatenation.
      embedding.vector = embedding.vector.length === 0 ? values : embedding.vector.concat(values);
    } else if (tag === VECTOR_ONE) embedding.vector.push(reader.float());
    else if (tag === EXTRAS_JSON) embedding.extrasJson = reader.string();
    else reader.skip((tag & 7) as WireType, tag >>> 3);
  }
  return embedding;
}
