/**
 * From a model's output tensor to one vector per batch row: pooling over tokens or frames (mean that
 * skips padded positions, or the first token), then optional L2 normalisation. Sums run in float64 in a
 * fixed order per row, so a row's result does not depend on what else was in its batch.
 */
import type { Pooling } from './manifest.js';

export interface OutputTensor {
  data: ArrayLike<number>;
  dims: readonly number[];
}

/**
 * `mask(row, position)` says whether a position holds a real token (null: all do). `pooling` null
 * means "by rank": [batch, dims] as is, [batch, tokens, dims] by mean.
 */
export function poolRows(output: OutputTensor, pooling: Pooling | null, mask: ((row: number, position: number) => boolean) | null): Float64Array[] {
  const { data, dims } = output;
  if (dims.length === 2) {
    if (pooling !== null && pooling !== 'none') throw new Error(`output is [batch, dims]; pooling '${pooling}' needs [batch, tokens, dims]`);
    const [batch, width] = dims as [number, number];
    return Array.from({ length: batch }, (_, b) => Float64Array.from({ length: width }, (_, i) => data[b * width + i]!));
  }
  if (dims.length !== 3) throw new Error(`output has shape [${dims.join(', ')}]; [batch, dims] or [batch, tokens, dims] is supported`);
  const [batch, tokens, width] = dims as [number, number, number];
  const mode = pooling ?? 'mean';
  if (mode === 'none') throw new Error(`output is [batch, tokens, dims]; pooling must be "mean" or "cls"`);
  return Array.from({ length: batch }, (_, b) => {
    const vector = new Float64Array(width);
    const base = b * tokens * width;
    if (mode === 'cls') {
      for (let i = 0; i < width; i++) vector[i] = data[base + i]!;
      return vector;
    }
    let count = 0;
    for (let t = 0; t < tokens; t++) {
      if (mask && !mask(b, t)) continue;
      count++;
      const offset = base + t * width;
      for (let i = 0; i < width; i++) vector[i]! += data[offset + i]!;
    }
    if (count > 0) for (let i = 0; i < width; i++) vector[i]! /= count;
    return vector;
  });
}

/**
 * The finished vector as a plain array (it crosses gRPC as JSON-like data). Non-finite values mean a
 * broken model, not a bad input. A zero vector stays zero: it has no direction to keep.
 */
export function finishVector(vector: Float64Array, normalize: boolean, modelName: string): number[] {
  let sum = 0;
  for (const v of vector) {
    if (!Number.isFinite(v)) throw new Error(`onnx model ${modelName} produced a non-finite value`);
    sum += v * v;
  }
  const scale = normalize && sum > 0 ? 1 / Math.sqrt(sum) : 1;
  return Array.from(vector, (v) => v * scale);
}
