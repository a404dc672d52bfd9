/**
 * A few helpers over onnx-proto to write small, real ONNX models (graphs of standard operators with
 * their weights inline), so tests run onnxruntime on models they build themselves instead of downloads.
 */
import onnxProto from 'onnx-proto';

const { onnx } = onnxProto;

/** The ONNX element types these helpers use (values of TensorProto.DataType). */
export const ElemType = {
  float: onnx.TensorProto.DataType.FLOAT,
  int32: onnx.TensorProto.DataType.INT32,
  int64: onnx.TensorProto.DataType.INT64,
} as const;
export type ElemType = (typeof ElemType)[keyof typeof ElemType];

/** A dimension: a fixed size, or a symbolic name (batch, sequence) left free. */
export type Dim = number | string;

export type Tensor = InstanceType<typeof onnx.TensorProto>;
export type Node = InstanceType<typeof onnx.NodeProto>;
export type ValueInfo = InstanceType<typeof onnx.ValueInfoProto>;

export function valueInfo(name: string, elemType: ElemType, shape: readonly Dim[]): ValueInfo {
  return onnx.ValueInfoProto.create({
    name,
    type: {
      tensorType: {
        elemType,
        shape: { dim: shape.map((d) => (typeof d === 'number' ? { dimValue: d } : { dimParam: d })) },
      },
    },
  });
}

/** A float initializer (weights) of the given shape, row-major values. */
export function floatTensor(name: string, dims: readonly number[], values: readonly number[]): Tensor {
  const size = dims.reduce((a, b) => a * b, 1);
  if (values.length !== size) throw new Error(`tensor ${name}: ${values.length} values for shape [${dims.join(', ')}]`);
  return onnx.TensorProto.create({ name, dims: [...dims], dataType: ElemType.float, floatData: [...values] });
}

export function int64Tensor(name: string, dims: readonly number[], values: readonly number[]): Tensor {
  return onnx.TensorProto.create({ name, dims: [...dims], dataType: ElemType.int64, int64Data: [...values] });
}

type AttributeValue = number | readonly number[];

/** One operator node; integer attributes (axis, keepdims) and integer lists (axes) are all these models need. */
export function node(opType: string, inputs: readonly string[], outputs: readonly string[], attributes: Record<string, AttributeValue> = {}): Node {
  const AttributeType = onnx.AttributeProto.AttributeType;
  return onnx.NodeProto.create({
    opType,
    input: [...inputs],
    output: [...outputs],
    attribute: Object.entries(attributes).map(([name, value]) =>
      typeof value === 'number'
        ? { name, type: AttributeType.INT, i: value }
        : { name, type: AttributeType.INTS, ints: [...value] },
    ),
  });
}

export interface GraphSpec {
  name: string;
  nodes: readonly Node[];
  initializers: readonly Tensor[];
  inputs: readonly ValueInfo[];
  outputs: readonly ValueInfo[];
}

/** Opset 13: ReduceMean/ReduceMax take `axes` as an attribute there, Unsqueeze takes them as an input. */
export const OPSET = 13;

/** The serialized ModelProto. */
export function modelBytes(graph: GraphSpec): Uint8Array {
  const model = onnx.ModelProto.create({
    irVersion: 7,
    opsetImport: [{ domain: '', version: OPSET }],
    producerName: 'tessera-tests',
    graph: onnx.GraphProto.create({
      name: graph.name,
      node: [...graph.nodes],
      initializer: [...graph.initializers],
      input: [...graph.inputs],
      output: [...graph.outputs],
    }),
  });
  return onnx.ModelProto.encode(model).finish();
}
