/**
 * The contract every model plugin must pass (DESIGN.md "Plugin contracts"): call
 * `runModelContract(model, { sampleInputs, expectDims })` at the top level of a test file.
 *
 * Models run inside inference workers and their results cross process boundaries, so beyond the
 * registry's own checks this asks for: idempotent load(), batch in = batch out (same length and order,
 * and batching must not change an item's result), vectors of the declared size that are finite and
 * unit-length, structured-clone-safe outputs, and determinism (same input → identical output, also
 * from a freshly created instance).
 */
import { describe, expect, it } from 'vitest';
import { PluginRegistry, type ModelPlugin, type ModelTask } from '../../kernel/plugins.js';

export interface ModelContractOptions<I, O> {
  /** At least two inputs with different expected outputs; include the edge cases (empty, tiny, ...). */
  sampleInputs: readonly I[];
  /** Length of every output vector; must equal the model's declared `dims` (embedding models only). */
  expectDims?: number;
  /** Makes a fresh, independent instance, for determinism across instances (recommended). */
  create?: () => ModelPlugin<I, O>;
  /** Where the vector is in an output. Default: the output itself if it is an array/typed array, else `.vector`. */
  vectorOf?: (output: O) => ArrayLike<number>;
  /** Allowed deviation of |v| from 1. Default 1e-6. */
  normTolerance?: number;
}

const TASKS: readonly ModelTask[] = ['embed_text', 'embed_image', 'embed_audio', 'rerank', 'ocr', 'transcribe'];
/** Tasks whose outputs are vectors of `dims` numbers. */
const VECTOR_TASKS: ReadonlySet<ModelTask> = new Set(['embed_text', 'embed_image', 'embed_audio']);

function defaultVectorOf(output: unknown): ArrayLike<number> {
  if (Array.isArray(output) || output instanceof Float32Array || output instanceof Float64Array) return output as ArrayLike<number>;
  if (output && typeof output === 'object' && 'vector' in output) return defaultVectorOf((output as { vector: unknown }).vector);
  throw new Error(`model output has no vector: ${JSON.stringify(output)?.slice(0, 200)}`);
}

function norm(v: ArrayLike<number>): number {
  let s = 0;
  for (let i = 0; i < v.length; i++) s += v[i]! * v[i]!;
  return Math.sqrt(s);
}

export function runModelContract<I, O>(model: ModelPlugin<I, O>, options: ModelContractOptions<I, O>): void {
  const { sampleInputs, expectDims, create } = options;
  const vectorOf = options.vectorOf ?? ((o: O) => defaultVectorOf(o));
  const tolerance = options.normTolerance ?? 1e-6;

  describe(`model contract: ${model.name}`, () => {
    it('is a well-formed model that a PluginRegistry accepts', () => {
      expect(model.kind).toBe('model');
      expect(TASKS).toContain(model.task);
      if (VECTOR_TASKS.has(model.task)) {
        expect(Number.isInteger(expectDims)).toBe(true);
        expect(model.dims).toBe(expectDims);
      } else {
        expect(model.dims).toBeUndefined();
      }
      const registry = new PluginRegistry();
      expect(() => registry.add(model, 'contract')).not.toThrow();
      expect(registry.models.get(model.name)).toBe(model);
      expect(sampleInputs.length).toBeGreaterThanOrEqual(2);
    });

    it('load() resolves, and is idempotent (repeated and concurrent calls)', async () => {
      await model.load();
      await model.load();
      await Promise.all([model.load(), model.load(), model.load()]);
    });

    it('infer([]) resolves to []', async () => {
      await model.load();
      await expect(model.infer([])).resolves.toEqual([]);
    });

    it('returns one output per input, in input order, independent of batching', async () => {
      await model.load();
      const batch = await model.infer([...sampleInputs]);
      expect(batch).toHaveLength(sampleInputs.length);
      const reversed = await model.infer([...sampleInputs].reverse());
      expect(reversed).toEqual([...batch].reverse());
      for (let i = 0; i < sampleInputs.length; i++) {
        const single = await model.infer([sampleInputs[i]!]);
        expect(single).toHaveLength(1);
        expect(single[0]).toEqual(batch[i]);
      }
    });

    // Only the checks that apply to the model's task are registered (nothing is reported as skipped).
    if (model.task === 'ocr') it('gives text, and boxes with finite positions, that tell the sample inputs apart', async () => {
      await model.load();
      const outputs = (await model.infer([...sampleInputs])) as unknown[];
      for (const output of outputs) {
        if (typeof output === 'string') continue;
        const { text, boxes } = output as { text: unknown; boxes?: unknown };
        expect(typeof text).toBe('string');
        for (const box of (boxes ?? []) as Array<Record<string, unknown>>) {
          for (const key of ['x', 'y', 'width', 'height', 'confidence']) expect(Number.isFinite(box[key])).toBe(true);
          expect(typeof box.text).toBe('string');
        }
      }
      const texts = outputs.map((o) => (typeof o === 'string' ? o : (o as { text: string }).text));
      expect(new Set(texts).size).toBeGreaterThan(1);
    });

    if (VECTOR_TASKS.has(model.task)) it(`gives ${expectDims}-d finite, L2-normalised vectors that tell the sample inputs apart`, async () => {
      await model.load();
      const outputs = await model.infer([...sampleInputs]);
      const vectors = outputs.map((o) => Array.from(vectorOf(o)));
      for (const v of vectors) {
        expect(v).toHaveLength(expectDims ?? -1);
        expect(v.every((x) => typeof x === 'number' && Number.isFinite(x))).toBe(true);
        expect(Math.abs(norm(v) - 1)).toBeLessThan(tolerance);
      }
      // Not a constant function: the samples must not all map to the same vector.
      expect(new Set(vectors.map((v) => v.join(','))).size).toBeGreaterThan(1);
    });

    it('outputs survive structured cloning (they cross worker and gRPC boundaries)', async () => {
      await model.load();
      const outputs = await model.infer([...sampleInputs]);
      expect(structuredClone(outputs)).toEqual(outputs);
    });

    it('is deterministic: same input, identical output, also from a fresh instance', async () => {
      await model.load();
      const first = await model.infer([...sampleInputs]);
      const second = await model.infer([...sampleInputs]);
      expect(second).toEqual(first);
      if (create) {
        const fresh = create();
        expect(fresh).not.toBe(model);
        await fresh.load();
        expect(await fresh.infer([...sampleInputs])).toEqual(first);
      }
    });
  });
}
