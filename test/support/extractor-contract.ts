/**
 * The contract every extractor plugin must pass (DESIGN.md "Plugin contracts"): call
 * `runExtractorContract(extractor, { inputs, context })` at the top level of a test file.
 *
 * Extractors feed the batch runner, which redelivers tasks after crashes and writes documents keyed by
 * draft key, so beyond the registry's own checks this asks for: parameter schemas that fill defaults and
 * reject nonsense, drafts whose fields match the declared output schema and whose features match the
 * declared feature specs exactly, idempotence (same input → same keys and fields, so a redelivery
 * replaces rather than duplicates), and a typed InputError — not a crash — when a required input is missing.
 */
import { Ajv, type AnySchema, type ValidateFunction } from 'ajv';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InputError } from '../../kernel/errors.js';
import { PluginRegistry, type DocumentDraft, type ExtractorContext, type ExtractorInput, type ExtractorPlugin } from '../../kernel/plugins.js';
import { collectDrafts as collect } from './extractor-harness.js';

export interface ExtractorContractOptions {
  /** Sample inputs; together they must produce at least one draft. Parameters are filled with defaults first. */
  inputs: readonly ExtractorInput[];
  /** Makes the context drafts are extracted with (real inference worker, blob store, ...); cleaned up after the suite. */
  context: () => Promise<{ ctx: ExtractorContext; cleanup(): Promise<void> }>;
  /** Parameter objects the schema must reject. Default: a non-object and, per typed property, a value of the wrong type. */
  invalidParameters?: readonly unknown[];
}

const DISTANCES = ['cosine', 'l2', 'dot'];
const INPUT_TYPES = ['text', 'image', 'video', 'audio', 'pdf', 'json', 'any'];
const MIME_PATTERN = /^(\*|[a-z0-9][a-z0-9!#$&^_.+-]*)\/(\*|[a-z0-9][a-z0-9!#$&^_.+-]*)$/i;

function newAjv(useDefaults: boolean): Ajv {
  // strict: false, like the kernel's registry: schemas may carry annotations ajv does not know.
  return new Ajv({ strict: false, allErrors: true, useDefaults });
}

/** A value of a type `schema` does not allow, or undefined when there is no obvious one. */
function wrongValueFor(schema: unknown): unknown {
  if (!schema || typeof schema !== 'object') return undefined;
  const { type, enum: allowed } = schema as { type?: unknown; enum?: unknown };
  if (Array.isArray(allowed)) return allowed.every((v) => v !== '__contract-not-allowed__') ? '__contract-not-allowed__' : undefined;
  switch (type) {
    case 'string':
      return 12345;
    case 'integer':
    case 'number':
      return 'not a number';
    case 'boolean':
      return 'not a boolean';
    case 'array':
      return 'not an array';
    case 'object':
      return 42;
    default:
      return undefined;
  }
}

/** The default invalid parameter objects derived from a parameters schema. */
function invalidParametersFor(schema: unknown): unknown[] {
  const invalid: unknown[] = ['not an object'];
  const properties = schema && typeof schema === 'object' ? (schema as { properties?: Record<string, unknown> }).properties : undefined;
  for (const [name, property] of Object.entries(properties ?? {})) {
    const wrong = wrongValueFor(property);
    if (wrong !== undefined) invalid.push({ [name]: wrong });
  }
  return invalid;
}


export function runExtractorContract(extractor: ExtractorPlugin, options: ExtractorContractOptions): void {
  const defaultsAjv = newAjv(true);
  const fillDefaults: ValidateFunction = defaultsAjv.compile(extractor.parameters as AnySchema);

  /** What the collection service hands the extractor: parameters validated, defaults filled in. */
  function prepared(input: ExtractorInput): ExtractorInput {
    const parameters = structuredClone(input.parameters);
    if (!fillDefaults(parameters)) {
      throw new Error(`sample input parameters are invalid: ${defaultsAjv.errorsText(fillDefaults.errors)}`);
    }
    return { ...input, fields: structuredClone(input.fields), parameters };
  }

  describe(`extractor contract: ${extractor.name}@${extractor.version}`, () => {
    let ctx: ExtractorContext;
    let cleanup: (() => Promise<void>) | undefined;
    let firstRun: DocumentDraft[][] = [];

    beforeAll(async () => {
      const made = await options.context();
      ctx = made.ctx;
      cleanup = made.cleanup;
      firstRun = [];
      for (const input of options.inputs) firstRun.push(await collect(extractor.extract(ctx, prepared(input))));
    });

    afterAll(async () => {
      await cleanup?.();
    });

    it('is a well-formed extractor that a PluginRegistry accepts', () => {
      expect(extractor.kind).toBe('extractor');
      const registry = new PluginRegistry();
      expect(() => registry.add(extractor, 'contract')).not.toThrow();
      expect(registry.extractors.get(extractor.name)).toBe(extractor);
      // A second registration is a duplicate: the registry must say so at boot.
      expect(() => registry.add(extractor, 'contract')).toThrow();

      expect(extractor.description.trim().length).toBeGreaterThan(0);
      expect(extractor.accepts.length).toBeGreaterThan(0);
      for (const mime of extractor.accepts) expect(mime).toMatch(MIME_PATTERN);

      const inputNames = extractor.inputs.map((i) => i.name);
      expect(new Set(inputNames).size).toBe(inputNames.length);
      for (const input of extractor.inputs) {
        expect(input.name).toMatch(/^[a-z][a-z0-9_]*$/);
        expect(INPUT_TYPES).toContain(input.type);
        expect(typeof input.required).toBe('boolean');
      }

      const featureNames = extractor.features.map((f) => f.name);
      expect(new Set(featureNames).size).toBe(featureNames.length);
      const fieldNames = Object.keys((extractor.fields as { properties?: object }).properties ?? {});
      for (const feature of extractor.features) {
        expect(feature.name).toMatch(/^[a-z][a-z0-9_]*$/);
        expect(Number.isInteger(feature.dims) && feature.dims > 0).toBe(true);
        expect(DISTANCES).toContain(feature.distance);
        expect(feature.model.length).toBeGreaterThan(0);
        // A feature and a field of one name would collide in the collection's output schema.
        expect(fieldNames).not.toContain(feature.name);
      }
      expect(options.inputs.length).toBeGreaterThan(0);
    });

    it('accepts {} as parameters (every parameter has a default or is optional)', () => {
      const validate = newAjv(true).compile(extractor.parameters as AnySchema);
      const parameters = {};
      expect(validate(parameters), JSON.stringify(validate.errors)).toBe(true);
    });

    it('rejects obviously wrong parameters', () => {
      const validate = newAjv(false).compile(extractor.parameters as AnySchema);
      const invalid = options.invalidParameters ?? invalidParametersFor(extractor.parameters);
      expect(invalid.length).toBeGreaterThan(0);
      for (const parameters of invalid) {
        expect(validate(structuredClone(parameters)), `should reject ${JSON.stringify(parameters)}`).toBe(false);
      }
    });

    it('yields drafts with non-empty unique keys and fields valid against the declared schema', () => {
      const validateFields = newAjv(false).compile(extractor.fields as AnySchema);
      expect(firstRun.flat().length, 'the sample inputs gave no drafts at all').toBeGreaterThan(0);
      for (const drafts of firstRun) {
        const keys = drafts.map((d) => d.key);
        for (const key of keys) expect(typeof key === 'string' && key.length > 0).toBe(true);
        expect(new Set(keys).size, 'draft keys must be unique within one source record').toBe(keys.length);
        for (const draft of drafts) {
          expect(draft.fields && typeof draft.fields === 'object' && !Array.isArray(draft.fields)).toBe(true);
          expect(validateFields(draft.fields), `${draft.key}: ${JSON.stringify(validateFields.errors)}`).toBe(true);
          // Fields are stored as JSON: they must survive the round trip unchanged.
          expect(JSON.parse(JSON.stringify(draft.fields))).toEqual(draft.fields);
        }
      }
    });

    it('yields every required feature and only declared ones, each of the declared size with finite numbers', () => {
      const declared = new Map(extractor.features.map((f) => [f.name, f]));
      for (const draft of firstRun.flat()) {
        const features = draft.features ?? {};
        const required = [...declared.values()].filter((f) => !f.optional).map((f) => f.name);
        for (const name of required) expect(features, `${draft.key} lacks required feature ${name}`).toHaveProperty(name);
        for (const name of Object.keys(features)) expect(declared.has(name), `${draft.key}.${name} is not a declared feature`).toBe(true);
        for (const [name, vector] of Object.entries(features)) {
          expect(Array.isArray(vector), `${draft.key}.${name} is not an array`).toBe(true);
          expect(vector, `${draft.key}.${name}`).toHaveLength(declared.get(name)!.dims);
          expect(vector.every((x) => typeof x === 'number' && Number.isFinite(x)), `${draft.key}.${name} has a non-finite value`).toBe(true);
        }
      }
    });

    it('is idempotent: the same input gives the same keys and fields again', async () => {
      for (const [i, input] of options.inputs.entries()) {
        const again = await collect(extractor.extract(ctx, prepared(input)));
        const first = firstRun[i]!;
        expect(again.map((d) => d.key)).toEqual(first.map((d) => d.key));
        expect(again.map((d) => d.fields)).toEqual(first.map((d) => d.fields));
      }
    });

    const required = extractor.inputs.filter((i) => i.required);
    if (required.length > 0) it('rejects an input missing a required input with an InputError', async () => {
      for (const spec of required) {
        for (const input of options.inputs) {
          const { [spec.name]: _dropped, ...fields } = input.fields;
          const missing = { ...prepared(input), fields };
          await expect(collect(extractor.extract(ctx, missing)), `without '${spec.name}'`).rejects.toBeInstanceOf(InputError);
        }
      }
    });
  });
}
