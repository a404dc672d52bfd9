/**
 * The manifest's schema check, against the `Manifest` schema of the served OpenAPI document (the one
 * place the format is written down), with every problem at its manifest path.
 */
import { Ajv2020, type ErrorObject, type ValidateFunction } from 'ajv/dist/2020.js';
import { pathOf, type ManifestProblem } from './problems.js';

type Json = Record<string, unknown>;

export class ManifestSchema {
  private readonly check: ValidateFunction;

  constructor(apiDocument: Json) {
    const ajv = new Ajv2020({ strict: false, allErrors: true, validateFormats: false, validateSchema: false });
    const schemas = ((apiDocument.components as Json | undefined)?.schemas ?? {}) as Record<string, Json>;
    for (const [id, schema] of Object.entries(schemas)) ajv.addSchema(schema, `#/components/schemas/${id}`);
    this.check = ajv.getSchema('#/components/schemas/Manifest')!;
  }

  problems(manifest: unknown): ManifestProblem[] {
    if (this.check(manifest)) return [];
    const seen = new Set<string>();
    const out: ManifestProblem[] = [];
    for (const error of this.check.errors ?? []) {
      const problem = toProblem(error);
      // Taxonomies and clusters get their own message (refusedKinds); oneOf/anyOf branches repeat themselves.
      if (/^(taxonomies|clusters)\b/.test(problem.path)) continue;
      const key = `${problem.path}|${problem.message}`;
      if (seen.has(key)) continue;
      seen.add(key);
      out.push(problem);
    }
    return out;
  }
}

function toProblem(error: ErrorObject): ManifestProblem {
  const parts: Array<string | number> = error.instancePath
    .split('/')
    .slice(1)
    .map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~'))
    .map((p) => (/^(0|[1-9][0-9]*)$/.test(p) ? Number(p) : p));
  const params = error.params as { additionalProperty?: string; missingProperty?: string };
  if (error.keyword === 'additionalProperties' && params.additionalProperty !== undefined) {
    return { path: pathOf([...parts, params.additionalProperty]), message: 'is not a field of this entry', type: 'schema' };
  }
  if (error.keyword === 'required' && params.missingProperty !== undefined) {
    return { path: pathOf([...parts, params.missingProperty]), message: 'is required', type: 'schema' };
  }
  return { path: pathOf(parts), message: error.message ?? 'is not valid', type: 'schema' };
}

/** Non-empty `taxonomies` or `clusters`: named, and said to be unsupported. */
export function refusedKinds(manifest: Json): ManifestProblem[] {
  return (['taxonomies', 'clusters'] as const)
    .filter((key) => Array.isArray(manifest[key]) && (manifest[key] as unknown[]).length > 0)
    .map((key) => ({ path: key, message: `${key} are not supported yet: leave \`${key}\` empty or out of the manifest`, type: 'not_supported' as const }));
}
