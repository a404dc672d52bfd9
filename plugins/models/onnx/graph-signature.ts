/**
 * Reads a model's graph inputs and outputs (names, element types, shapes) straight from the .onnx
 * protobuf, synchronously and without loading the weights: the plugin must know its `dims` and check
 * its tensor names when the module is imported, and the API process (which only lists models) must not
 * pay for onnxruntime or hundreds of megabytes of initializers to do so. Length-delimited fields that
 * are not needed (initializer data, nodes) are skipped by offset, so only a few KiB are read.
 *
 * Wire format: https://protobuf.dev/programming-guides/encoding/ ; field numbers from onnx.proto
 * (ModelProto.graph = 7; GraphProto.initializer = 5, input = 11, output = 12; ValueInfoProto.name = 1,
 * type = 2; TypeProto.tensor_type = 1; Tensor.elem_type = 1, shape = 2; TensorShapeProto.dim = 1;
 * Dimension.dim_value = 1, dim_param = 2; TensorProto.name = 8).
 */
import { closeSync, fstatSync, openSync, readSync } from 'node:fs';

/** A dimension: its size, a symbolic name (`batch`), or null when the graph does not say. */
export type GraphDim = number | string | null;

export interface TensorSignature {
  name: string;
  /** ONNX TensorProto.DataType (1 float, 6 int32, 7 int64, 10 float16, 11 double); 0 when unknown. */
  elemType: number;
  /** null when the graph does not declare a shape (rank unknown). */
  shape: GraphDim[] | null;
}

export interface GraphSignature {
  /** Inputs a caller must feed (initializers listed as inputs, as older exporters do, are left out). */
  inputs: TensorSignature[];
  outputs: TensorSignature[];
}

export const ELEM_TYPE = { float: 1, int32: 6, int64: 7, float16: 10, double: 11 } as const;

const WINDOW = 64 * 1024;
const WIRE = { varint: 0, fixed64: 1, bytes: 2, fixed32: 5 } as const;

/** Random access to bytes, a window at a time, so skipping a 100 MB initializer costs nothing. */
class ByteSource {
  private window = Buffer.alloc(0);
  private windowStart = 0;

  constructor(
    private readonly fd: number,
    readonly size: number,
  ) {}

  byte(pos: number): number {
    if (pos < this.windowStart || pos >= this.windowStart + this.window.length) this.fill(pos, 1);
    return this.window[pos - this.windowStart]!;
  }

  bytes(pos: number, length: number): Buffer {
    if (pos < this.windowStart || pos + length > this.windowStart + this.window.length) this.fill(pos, length);
    return this.window.subarray(pos - this.windowStart, pos - this.windowStart + length);
  }

  private fill(pos: number, length: number): void {
    if (pos + length > this.size) throw new Error('truncated protobuf');
    const buffer = Buffer.alloc(Math.max(WINDOW, length));
    const read = readSync(this.fd, buffer, 0, Math.min(buffer.length, this.size - pos), pos);
    this.window = buffer.subarray(0, read);
    this.windowStart = pos;
  }
}

interface Field {
  number: number;
  wire: number;
  /** varint value (wire 0; precise up to 2^53, larger values come out approximate). */
  value: number;
  /** [start, end) of a length-delimited value (wire 2). */
  start: number;
  end: number;
}

function readVarint(src: ByteSource, pos: number, end: number): { value: number; next: number } {
  let value = 0;
  let scale = 1;
  for (let i = 0; i < 10; i++) {
    if (pos >= end) throw new Error('truncated varint');
    const b = src.byte(pos++);
    value += (b & 0x7f) * scale;
    if ((b & 0x80) === 0) return { value, next: pos };
    scale *= 128;
  }
  throw new Error('varint longer than 10 bytes');
}

/** Calls `visit` for every field of the message in [start, end). */
function forEachField(src: ByteSource, start: number, end: number, visit: (field: Field) => void): void {
  let pos = start;
  while (pos < end) {
    const tag = readVarint(src, pos, end);
    pos = tag.next;
    const number = Math.floor(tag.value / 8);
    const wire = tag.value % 8;
    if (number === 0) throw new Error('field number 0');
    switch (wire) {
      case WIRE.varint: {
        const v = readVarint(src, pos, end);
        visit({ number, wire, value: v.value, start: pos, end: v.next });
        pos = v.next;
        break;
      }
      case WIRE.bytes: {
        const length = readVarint(src, pos, end);
        const valueEnd = length.next + length.value;
        if (valueEnd > end) throw new Error('length-delimited field runs past its message');
        visit({ number, wire, value: length.value, start: length.next, end: valueEnd });
        pos = valueEnd;
        break;
      }
      case WIRE.fixed64:
        pos += 8;
        break;
      case WIRE.fixed32:
        pos += 4;
        break;
      default:
        throw new Error(`unsupported wire type ${wire}`);
    }
  }
  if (pos !== end) throw new Error('message ends inside a field');
}

function text(src: ByteSource, field: Field): string {
  return src.bytes(field.start, field.end - field.start).toString('utf8');
}

function readDimension(src: ByteSource, start: number, end: number): GraphDim {
  let dim: GraphDim = null;
  forEachField(src, start, end, (f) => {
    // A dim_value of 0 or less (or one past 2^53) is not a usable size: treat it as unknown.
    if (f.number === 1 && f.wire === WIRE.varint) dim = f.value > 0 && f.value <= Number.MAX_SAFE_INTEGER ? f.value : null;
    else if (f.number === 2 && f.wire === WIRE.bytes) dim = text(src, f) || null;
  });
  return dim;
}

function readValueInfo(src: ByteSource, start: number, end: number): TensorSignature {
  const signature: TensorSignature = { name: '', elemType: 0, shape: null };
  forEachField(src, start, end, (f) => {
    if (f.number === 1 && f.wire === WIRE.bytes) signature.name = text(src, f);
    if (f.number !== 2 || f.wire !== WIRE.bytes) return;
    forEachField(src, f.start, f.end, (typeField) => {
      if (typeField.number !== 1 || typeField.wire !== WIRE.bytes) return; // not a tensor (sequence, map)
      forEachField(src, typeField.start, typeField.end, (tensorField) => {
        if (tensorField.number === 1 && tensorField.wire === WIRE.varint) signature.elemType = tensorField.value;
        if (tensorField.number === 2 && tensorField.wire === WIRE.bytes) {
          const shape: GraphDim[] = [];
          forEachField(src, tensorField.start, tensorField.end, (dimField) => {
            if (dimField.number === 1 && dimField.wire === WIRE.bytes) shape.push(readDimension(src, dimField.start, dimField.end));
          });
          signature.shape = shape;
        }
      });
    });
  });
  return signature;
}

function readGraph(src: ByteSource, start: number, end: number): GraphSignature {
  const inputs: TensorSignature[] = [];
  const outputs: TensorSignature[] = [];
  const initializers = new Set<string>();
  forEachField(src, start, end, (f) => {
    if (f.wire !== WIRE.bytes) return;
    if (f.number === 11) inputs.push(readValueInfo(src, f.start, f.end));
    else if (f.number === 12) outputs.push(readValueInfo(src, f.start, f.end));
    else if (f.number === 5) {
      forEachField(src, f.start, f.end, (t) => {
        if (t.number === 8 && t.wire === WIRE.bytes) initializers.add(text(src, t));
      });
    }
  });
  return { inputs: inputs.filter((i) => !initializers.has(i.name)), outputs };
}

/** The graph signature of the .onnx file at `file`; throws when it is not an ONNX model. */
export function readGraphSignature(file: string): GraphSignature {
  const fd = openSync(file, 'r');
  try {
    const src = new ByteSource(fd, fstatSync(fd).size);
    let graph: GraphSignature | undefined;
    try {
      forEachField(src, 0, src.size, (f) => {
        if (f.number === 7 && f.wire === WIRE.bytes) graph = readGraph(src, f.start, f.end);
      });
    } catch (error) {
      throw new Error(`not an ONNX model (${(error as Error).message})`, { cause: error });
    }
    if (!graph) throw new Error('not an ONNX model (no graph)');
    if (graph.outputs.length === 0) throw new Error('the ONNX graph has no outputs');
    return graph;
  } finally {
    closeSync(fd);
  }
}
