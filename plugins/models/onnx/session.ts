/**
 * onnxruntime, used only inside inference workers: imported on the first load() (the API process lists
 * these models but never loads the native runtime), one CPU session per model with a single intra-op
 * thread, because the server runs one worker process per core side by side.
 */
import type { InferenceSession, Tensor } from 'onnxruntime-node';

type Ort = typeof import('onnxruntime-node');

let importing: Promise<Ort> | undefined;

export function importOrt(): Promise<Ort> {
  // A failed import is not cached, so a later load() can try again.
  importing ??= import('onnxruntime-node').catch((error: unknown) => {
    importing = undefined;
    throw error;
  });
  return importing;
}

export interface ModelSession {
  ort: Ort;
  session: InferenceSession;
  /** Element type onnxruntime reports for each input ('int64', 'int32', 'float32', ...). */
  inputTypes: Map<string, string>;
}

export async function openSession(modelFile: string, expected: { inputs: readonly string[]; output: string }): Promise<ModelSession> {
  const ort = await importOrt();
  const session = await ort.InferenceSession.create(modelFile, {
    executionProviders: ['cpu'],
    intraOpNumThreads: 1,
    interOpNumThreads: 1,
    graphOptimizationLevel: 'all',
    // Warnings (e.g. about unused initializers) would flood the worker's log on every start.
    logSeverityLevel: 3,
  });
  // The signature was checked when the folder was read; this guards a file replaced since.
  const missing = expected.inputs.filter((name) => !session.inputNames.includes(name));
  if (missing.length > 0 || !session.outputNames.includes(expected.output)) {
    await session.release();
    throw new Error(`${modelFile} changed since it was read: expected inputs ${expected.inputs.join(', ')} and output ${expected.output}`);
  }
  const inputTypes = new Map<string, string>();
  for (const meta of session.inputMetadata) if (meta.isTensor) inputTypes.set(meta.name, meta.type);
  return { ort, session, inputTypes };
}

/** An integer input tensor in the element type the model declares (int64 unless it says int32). */
export function integerTensor(model: ModelSession, name: string, values: ArrayLike<number>, dims: readonly number[]): Tensor {
  if (model.inputTypes.get(name) === 'int32') return new model.ort.Tensor('int32', Int32Array.from(values), dims);
  const data = new BigInt64Array(values.length);
  for (let i = 0; i < values.length; i++) data[i] = BigInt(values[i]!);
  return new model.ort.Tensor('int64', data, dims);
}

/** Runs the session and returns the one output asked for, as data + dims. */
export async function runForOutput(model: ModelSession, feeds: Record<string, Tensor>, output: string): Promise<{ data: ArrayLike<number>; dims: readonly number[] }> {
  const results = await model.session.run(feeds, [output]);
  const tensor = results[output];
  if (!tensor) throw new Error(`the model returned no '${output}'`);
  const data = tensor.data;
  if (!(data instanceof Float32Array || data instanceof Float64Array)) throw new Error(`output '${output}' is ${tensor.type}, not float`);
  return { data, dims: tensor.dims };
}
