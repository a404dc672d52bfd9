/**
 * The whole check of a manifest text, shared by validate, diff and apply: YAML, schema, unsupported kinds,
 * secrets (present; values put in place), references and cycles.
 */
import type { OrganizationSecrets } from '../../../kernel/organization-secrets.js';
import type { Deployment } from './deployment.js';
import { entriesOf, type Entry, type Json } from './entries.js';
import { parseYaml } from './parse.js';
import { planManifest } from './plan.js';
import type { ManifestProblem } from './problems.js';
import { refusedKinds, type ManifestSchema } from './schema.js';
import { findSecretUses, SecretRedactor, substituteSecrets } from './secret-refs.js';

export interface CheckedManifest {
  problems: ManifestProblem[];
  name: string;
  counts: Record<string, number>;
  secrets: string[];
  /** In creation order (empty while there are problems). */
  order: Entry[];
  /** Hides the referenced secrets' values in anything answered. */
  redactor: SecretRedactor;
}

export interface CheckInputs {
  text: string;
  organizationId: string;
  schema: ManifestSchema;
  secrets: OrganizationSecrets;
  deployment: Deployment;
}

export async function checkManifest(inputs: CheckInputs): Promise<CheckedManifest> {
  const empty = (problems: ManifestProblem[], redactor = new SecretRedactor(new Map())): CheckedManifest =>
    ({ problems, name: '', counts: {}, secrets: [], order: [], redactor });
  const parsed = parseYaml(inputs.text);
  if (!parsed.ok) return empty(parsed.problems);
  const manifest = parsed.value as Json;

  const { uses, problems: secretProblems } = findSecretUses(manifest);
  const names = [...new Set(uses.map((u) => u.name))].sort();
  const values = await inputs.secrets.values(inputs.organizationId, names);
  const redactor = new SecretRedactor(values);
  const problems: ManifestProblem[] = [...secretProblems];
  for (const use of uses) {
    if (!values.has(use.name)) problems.push({ path: use.path, message: `secret '${use.name}' does not exist in the organization`, type: 'secret' });
  }
  substituteSecrets(manifest, values);

  problems.push(...refusedKinds(manifest), ...inputs.schema.problems(manifest));
  const metadata = manifest.metadata as Json | undefined;
  const result: CheckedManifest = {
    problems,
    name: typeof metadata?.name === 'string' ? redactor.text(metadata.name) : '',
    counts: Object.fromEntries(['namespaces', 'buckets', 'collections', 'retrievers'].map((k) => [k, Array.isArray(manifest[k]) ? (manifest[k] as unknown[]).length : 0])),
    secrets: names,
    order: [],
    redactor,
  };
  // References are only worth checking in a manifest of the right shape.
  if (problems.length > 0) return { ...result, problems: redactor.value(problems) };
  const plan = await planManifest(entriesOf(manifest), manifest, inputs.deployment);
  return { ...result, problems: redactor.value(plan.problems), order: plan.problems.length > 0 ? [] : plan.order };
}
