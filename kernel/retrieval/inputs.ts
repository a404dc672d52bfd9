/**
 * A retriever's `input_schema`: a map of input name to `{type, required, description, default}`. It is
 * checked when the retriever is defined, and every execution's `inputs` are checked against it (422 naming
 * the input), with defaults filled in.
 */
import { RequestValidationError, type FieldProblem } from '../errors.js';

export const INPUT_TYPES = ['string', 'text', 'number', 'integer', 'boolean', 'array', 'object'] as const;
export type InputType = (typeof INPUT_TYPES)[number];

export interface InputDefinition {
  type: InputType;
  required?: boolean;
  description?: string;
  default?: unknown;
}

export type InputSchema = Record<string, InputDefinition>;

const NAME = /^[A-Za-z_][A-Za-z0-9_]{0,63}$/;

function typeOk(type: InputType, value: unknown): boolean {
  switch (type) {
    case 'string':
    case 'text':
      return typeof value === 'string';
    case 'number':
      return typeof value === 'number' && Number.isFinite(value);
    case 'integer':
      return typeof value === 'number' && Number.isInteger(value);
    case 'boolean':
      return typeof value === 'boolean';
    case 'array':
      return Array.isArray(value);
    case 'object':
      return typeof value === 'object' && value !== null && !Array.isArray(value);
  }
}

/** Checks an input schema as a client sent it (`loc` is where it sits in the request). */
export function checkInputSchema(schema: unknown, loc: Array<string | number>): InputSchema {
  const problems: FieldProblem[] = [];
  if (typeof schema !== 'object' || schema === null || Array.isArray(schema)) {
    throw new RequestValidationError([{ loc, msg: 'must be an object mapping input names to {type, required, description}', type: 'input_schema' }]);
  }
  for (const [name, definition] of Object.entries(schema)) {
    const at = [...loc, name];
    if (!NAME.test(name)) problems.push({ loc: at, msg: 'input names are letters, digits and _ (at most 64), not starting with a digit', type: 'input_schema' });
    const d = definition as Partial<InputDefinition> | null;
    if (typeof d !== 'object' || d === null || Array.isArray(d)) {
      problems.push({ loc: at, msg: 'must be an object {type, required, description, default}', type: 'input_schema' });
      continue;
    }
    if (!INPUT_TYPES.includes(d.type as InputType)) {
      problems.push({ loc: [...at, 'type'], msg: `must be one of ${INPUT_TYPES.join(', ')}`, type: 'input_schema' });
      continue;
    }
    if (d.required !== undefined && typeof d.required !== 'boolean') problems.push({ loc: [...at, 'required'], msg: 'must be a boolean', type: 'input_schema' });
    if (d.default !== undefined && !typeOk(d.type as InputType, d.default)) {
      problems.push({ loc: [...at, 'default'], msg: `must be of type ${d.type}`, type: 'input_schema' });
    }
  }
  if (problems.length > 0) throw new RequestValidationError(problems);
  return schema as InputSchema;
}

/** The execution's inputs checked against the schema, defaults filled in; inputs the schema does not name are kept. */
export function checkInputs(schema: InputSchema, inputs: Record<string, unknown>): Record<string, unknown> {
  const problems: FieldProblem[] = [];
  const out: Record<string, unknown> = { ...inputs };
  for (const [name, definition] of Object.entries(schema)) {
    const value = inputs[name];
    if (value === undefined || value === null) {
      if (definition.default !== undefined) out[name] = structuredClone(definition.default);
      else if (definition.required) problems.push({ loc: ['body', 'inputs', name], msg: `input '${name}' is required`, type: 'missing_input' });
      continue;
    }
    if (!typeOk(definition.type, value)) {
      problems.push({ loc: ['body', 'inputs', name], msg: `input '${name}' must be of type ${definition.type}`, type: 'input_type' });
    }
  }
  if (problems.length > 0) throw new RequestValidationError(problems);
  return out;
}
