/**
 * A retriever's stages as clients write them (`{stage_name, stage_type, config: {stage_id, parameters},
 * batch_size, description}`), checked against the registered stages: the stage exists, names are unique,
 * placeholders name declared inputs, and parameters pass the stage's JSON Schema (ajv) — on definition
 * with placeholders still in (a placeholder's value is checked when it is filled, at run), and on every
 * run after filling. A stage may add its own definition check (`check`, e.g. templates parse) and name
 * parameters it reads `inputs` in itself (`rawParameters`), where `{{inputs.x}}` is not a placeholder.
 */
import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import { RequestValidationError, type FieldProblem } from '../errors.js';
import type { PluginRegistry, StagePlugin } from '../plugins.js';
import type { InputSchema } from './inputs.js';
import { fillPlaceholders, placeholdersIn, type PlaceholderUse } from './placeholders.js';

export interface StageSpec {
  stage_name: string;
  stage_type?: string;
  config: { stage_id: string; parameters?: Record<string, unknown> };
  batch_size?: string | number;
  description?: string | null;
}

export interface StageVersion {
  stage_name: string;
  stage_id: string;
  version: string;
}

export interface FeatureDependency {
  extractor: string;
  version: string;
  scheme: string;
  output: string;
}

const FEATURE_URI = /^([a-z][a-z0-9+.-]*):\/\/([^@/\s]+)@([^/\s]+)\/(.+)$/;

/** `tessera://text_extractor@1.0/text_embedding` → its parts; undefined when it is not such a URI. */
export function parseFeatureUri(uri: string): FeatureDependency | undefined {
  const m = FEATURE_URI.exec(uri);
  return m ? { scheme: m[1]!, extractor: m[2]!, version: m[3]!, output: m[4]! } : undefined;
}

/** The parameters in which `{{inputs.x}}` are placeholders: all but the stage's `rawParameters`. */
function fillable(stage: StagePlugin<never>, parameters: Record<string, unknown>): Record<string, unknown> {
  const raw = stage.rawParameters ?? [];
  return raw.length === 0 ? parameters : Object.fromEntries(Object.entries(parameters).filter(([k]) => !raw.includes(k)));
}

/** A stage's parameters with placeholders filled from `inputs`, its `rawParameters` passed as written. */
export function fillStageParameters(stage: StagePlugin<never>, parameters: Record<string, unknown>, inputs: Record<string, unknown>): Record<string, unknown> {
  const filled = fillPlaceholders(fillable(stage, parameters), inputs);
  for (const key of stage.rawParameters ?? []) if (key in parameters) filled[key] = structuredClone(parameters[key]);
  return filled;
}

function pointerToLoc(pointer: string): Array<string | number> {
  return pointer
    .split('/')
    .slice(1)
    .map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'))
    .map((s) => (/^\d+$/.test(s) ? Number(s) : s));
}

export class StageChecker {
  private readonly ajv = new Ajv({ allErrors: true, strict: false, useDefaults: true });
  private readonly validators = new Map<string, ValidateFunction>();

  constructor(private readonly registry: PluginRegistry) {}

  stageOf(stageId: string): StagePlugin<never> | undefined {
    return this.registry.stages.get(stageId);
  }

  /**
   * Checks a pipeline as defined (placeholders unfilled) and returns the stage versions it is built with.
   * `loc` is where the stages sit in the request (`['body', 'stages']`).
   */
  checkDefinition(stages: readonly StageSpec[], inputSchema: InputSchema, loc: Array<string | number>): StageVersion[] {
    const problems: FieldProblem[] = [];
    const names = new Set<string>();
    const versions: StageVersion[] = [];
    stages.forEach((spec, i) => {
      const at = [...loc, i];
      if (names.has(spec.stage_name)) problems.push({ loc: [...at, 'stage_name'], msg: `stage name '${spec.stage_name}' is used twice`, type: 'duplicate_stage' });
      names.add(spec.stage_name);
      const stage = this.stageOf(spec.config.stage_id);
      if (!stage) {
        const known = [...this.registry.stages.keys()].sort().join(', ');
        problems.push({ loc: [...at, 'config', 'stage_id'], msg: `unknown stage '${spec.config.stage_id}'; registered stages: ${known}`, type: 'unknown_stage' });
        return;
      }
      if (spec.stage_type !== undefined && spec.stage_type !== stage.type) {
        problems.push({ loc: [...at, 'stage_type'], msg: `stage '${stage.id}' is of type '${stage.type}', not '${spec.stage_type}'`, type: 'stage_type' });
      }
      const parameters = spec.config.parameters ?? {};
      const uses = placeholdersIn(fillable(stage, parameters));
      for (const use of uses) {
        if (!(use.input in inputSchema)) {
          problems.push({
            loc: [...at, 'config', 'parameters', ...pointerToLoc(use.pointer)],
            msg: `placeholder names input '${use.input}', which input_schema does not declare`,
            type: 'unknown_input',
          });
        }
      }
      const candidate = structuredClone(parameters);
      const schemaProblems = this.schemaProblems(stage, candidate, [...at, 'config', 'parameters'], uses);
      problems.push(...schemaProblems);
      if (schemaProblems.length === 0 && stage.check) {
        for (const problem of stage.check(candidate as never, { inputNames: Object.keys(inputSchema) })) {
          problems.push({ loc: [...at, 'config', 'parameters', ...problem.path], msg: `${stage.id}: ${problem.message}`, type: 'stage_check' });
        }
      }
      versions.push({ stage_name: spec.stage_name, stage_id: stage.id, version: stage.version });
    });
    if (problems.length > 0) throw new RequestValidationError(problems);
    return versions;
  }

  /** Checks filled parameters before a run (defaults filled in); throws a 422 naming the stage. */
  checkFilled(stage: StagePlugin<never>, parameters: Record<string, unknown>, loc: Array<string | number>): void {
    const problems = this.schemaProblems(stage, parameters, loc, []);
    if (problems.length > 0) throw new RequestValidationError(problems);
  }

  /** The features the stages read (every `feature_uri` in their parameters), once each. */
  featureDependencies(stages: readonly StageSpec[]): FeatureDependency[] {
    const found = new Map<string, FeatureDependency>();
    const walk = (value: unknown): void => {
      if (Array.isArray(value)) value.forEach(walk);
      else if (value && typeof value === 'object') {
        for (const [key, item] of Object.entries(value)) {
          const parsed = key === 'feature_uri' && typeof item === 'string' ? parseFeatureUri(item) : undefined;
          if (parsed) found.set(item as string, parsed);
          else walk(item);
        }
      }
    };
    for (const spec of stages) walk(spec.config.parameters ?? {});
    return [...found.values()];
  }

  private validatorOf(stage: StagePlugin<never>): ValidateFunction {
    const key = `${stage.id}@${stage.version}`;
    let validate = this.validators.get(key);
    if (!validate) {
      validate = this.ajv.compile(stage.parameters as object);
      this.validators.set(key, validate);
    }
    return validate;
  }

  private schemaProblems(stage: StagePlugin<never>, parameters: unknown, loc: Array<string | number>, placeholders: readonly PlaceholderUse[]): FieldProblem[] {
    const validate = this.validatorOf(stage);
    if (validate(parameters)) return [];
    const isPlaceholder = (e: ErrorObject) =>
      placeholders.some(
        (p) =>
          p.pointer === e.instancePath ||
          p.pointer.startsWith(`${e.instancePath}/`) && ['oneOf', 'anyOf', 'if', 'not', 'type'].includes(e.keyword) && e.instancePath !== '' ||
          e.instancePath.startsWith(`${p.pointer}/`),
      );
    return (validate.errors ?? [])
      .filter((e) => !isPlaceholder(e))
      .map((e) => ({
        loc: [...loc, ...pointerToLoc(e.instancePath), ...(e.keyword === 'required' ? [String(e.params.missingProperty)] : [])],
        msg: `${stage.id}: ${e.keyword === 'additionalProperties' ? `unknown parameter '${String(e.params.additionalProperty)}'` : e.message ?? 'is invalid'}`,
        type: e.keyword,
      }));
  }
}
